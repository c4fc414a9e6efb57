"""SkillWorld policies: the default one, a LoRA on a pretrained chat model (lora_policy.py), and
LoRA experts for CycleQD (lora_expert.py), both trained by behaviour cloning (data.py, fit.py).
The from-scratch micro policy (model.py, tokenizer.py, train.py) is a fast fixture for tests."""
