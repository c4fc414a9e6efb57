"""The tiny SkillWorld policy: tokenizer, model configuration, training data and training loop."""
