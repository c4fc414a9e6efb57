"""Text skill → LoRA adapter in one forward pass.

lora        LoRA algebra in ΔW space (concat, scale, truncate, EMA, SVD)
merges      named merges of several adapters into one (cat, svd, factors)
peft_io     PEFT adapter folders, base-model fingerprints
targets     which modules of a base model get adapters
encoder     frozen skill-text encoders (MiniLM, base-model hidden states)
lexicon     a skill's own tokens read by the base model (the lexical channel)
hypernetwork  chunk vectors → A, B for every target module
memory      a skill's commands written into down_proj in closed form (key → next token)
apply       generated adapters on a frozen base through forward hooks (training)
objectives  stage-1 and stage-2 examples
evaluate    held-out loss with/without adapter and skill text
train       the two training stages
checkpoint  hypernetwork checkpoints and their content ids
compile     Compiler: skill text → PEFT folder
"""
