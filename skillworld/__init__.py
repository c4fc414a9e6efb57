"""SkillWorld: a CPU-scale world of generated repository tasks in families of planted bugs,
a recipe skill per family, a scripted expert, and the default model's policy: a LoRA on
SmolLM2-135M-Instruct trained by cloning the expert. (A policy trained from scratch from a
config, `policy/train.py`, remains as a fast fixture for tests.)

It exists so that what a skill adds (in context or compiled into weights) can be measured on
this machine end to end: real sandboxes, real tests, a real (small) transformer.
"""
