"""A skill's own tokens, as the base model reads them: the lexical channel of the hypernetwork.

A pooled sentence vector says what a skill is about but cannot hold its literals (`and`,
`.lower()`, `:.2f`), and an adapter that must make the model write such a literal has to
carry the token itself. The reader gives the hypernetwork, for every token of a skill in the
base model's own vocabulary, two vectors from the frozen base:

  features  the token's hidden state at one layer (what the token is, in its context), which
            the hypernetwork's token selection attends over;
  embedding the token's output embedding (the direction in the residual stream that raises its
            logit), which a selected token contributes to the adapter's B columns, so that the
            adapter can write that token itself.

`LexicalEncoder` wraps any chunk encoder and adds the tokens to what it returns.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from skillgraft.hypernet.encoder import EncodedSkills, SkillEncoder, SkillTokens, TextCache, hidden_windows, make_encoder


class TokenReader:
    """Reads texts with the frozen base model: hidden states of `layer` and output embeddings."""

    def __init__(self, model: Any, tokenizer: Any, layer: int, window: int = 512):
        if next(model.parameters()).device.type == "meta":
            raise ValueError("the lexical channel needs the base model's weights, not a meta-device model")
        self.model, self.tokenizer, self.layer, self.window = model, tokenizer, layer, window
        self.dim = int(model.config.hidden_size)
        self._cache = TextCache()

    def _unembedding(self) -> Tensor:
        # The rows that turn a hidden state into each token's logit: adding one to the residual
        # stream raises that token (tied models use their input embeddings here).
        head = self.model.get_output_embeddings() or self.model.get_input_embeddings()
        return head.weight

    @torch.no_grad()
    def _read_one(self, text: str) -> tuple[Tensor, Tensor]:
        parts = hidden_windows(self.model, self.tokenizer, text, self.layer, self.window)
        unembedding = self._unembedding()
        return (torch.cat([hidden for _, hidden in parts]),
                torch.cat([unembedding[ids].float().cpu() for ids, _ in parts]))

    def read(self, texts: Sequence[str]) -> SkillTokens:
        per_text = []
        for text in texts:
            hit = self._cache.get(text)
            if hit is None:
                hit = torch.stack(self._read_one(text))  # (2, L, D)
                self._cache.put(text, hit)
            per_text.append(hit)
        width = max(t.shape[1] for t in per_text)
        both = torch.zeros(2, len(texts), width, self.dim)
        mask = torch.zeros(len(texts), width, dtype=torch.bool)
        for i, t in enumerate(per_text):
            both[:, i, : t.shape[1]] = t
            mask[i, : t.shape[1]] = True
        return SkillTokens(both[0], both[1], mask)


class LexicalEncoder:
    """A chunk encoder whose output also carries the skill's tokens, read by the base model."""

    def __init__(self, inner: SkillEncoder, reader: TokenReader):
        self.inner, self.reader = inner, reader
        self.name, self.dim = inner.name, inner.dim

    def encode(self, texts: Sequence[str]) -> EncodedSkills:
        encoded = self.inner.encode(texts)
        return EncodedSkills(encoded.chunks, encoded.mask, self.reader.read(texts))


def load_reading_base(base_config: Any) -> tuple[torch.nn.Module, Any]:
    """The base model (with weights) and tokenizer that `base_config` names: a model folder, or a
    config whose `_name_or_path` is one. The lexical channel reads skills with them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = base_config if isinstance(base_config, (str, Path)) else getattr(base_config, "_name_or_path", "")
    if not folder or not (Path(folder) / "config.json").is_file():
        raise ValueError(
            "this hypernetwork reads a skill's tokens with the base model's weights: give the base model's "
            "folder (or base_model and tokenizer), not only its configuration"
        )
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    model.requires_grad_(False)
    return model, AutoTokenizer.from_pretrained(str(folder))


def encoder_for(config: Any, base_model: Any = None, tokenizer: Any = None) -> SkillEncoder:
    """The encoder a hypernetwork of `config` (a HypernetConfig) reads skills with: its chunk
    encoder, and the base model's reading of the tokens when it has lexical targets."""
    encoder = make_encoder(config.encoder, base_model=base_model, tokenizer=tokenizer,
                           layer=config.encoder_layer, window=config.encoder_window)
    if not config.lexical_targets:
        return encoder
    if base_model is None or tokenizer is None:
        raise ValueError("a hypernetwork with lexical targets needs the base model and its tokenizer")
    return LexicalEncoder(encoder, TokenReader(base_model, tokenizer, config.lexical_layer))
