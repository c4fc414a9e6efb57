"""The policy's architecture: a Llama-style causal LM built from a config, sized by name."""
from __future__ import annotations

from transformers import LlamaConfig, LlamaForCausalLM

SIZES = {
    # name: (hidden, layers, heads, intermediate)
    "micro": (64, 2, 2, 128),  # for tests: trains in seconds
    "tiny": (192, 4, 4, 512),  # about two million parameters
    "small": (384, 6, 6, 1024),
}


def build_policy(vocab_size: int, size: str = "tiny", context: int = 2048, pad_id: int = 0,
                 eos_id: int | None = None) -> LlamaForCausalLM:
    if size not in SIZES:
        raise KeyError(f"unknown policy size {size!r}; choose one of {', '.join(SIZES)}")
    hidden, layers, heads, inter = SIZES[size]
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=context,
        rope_theta=10000.0, tie_word_embeddings=True, pad_token_id=pad_id, eos_token_id=eos_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config)


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())
