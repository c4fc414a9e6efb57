"""Which modules of a base model get a generated LoRA, found by name pattern.

Works for any transformers causal LM whose blocks sit in a numbered list: Llama, Qwen2 and
Mistral (`model.layers.N.self_attn.q_proj`), GPT-2 (`transformer.h.N.attn.c_attn`, a Conv1D
whose weight is stored transposed). Only shapes are read, so a meta-device model is enough.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

DEFAULT_TARGETS = ("q_proj", "v_proj")
_LAYER_INDEX = re.compile(r"\.(\d+)\.")


@dataclass(frozen=True)
class TargetModule:
    path: str  # e.g. "model.layers.3.self_attn.q_proj"
    layer: int
    kind: str  # the module-name suffix, e.g. "q_proj"
    in_features: int
    out_features: int


@dataclass(frozen=True)
class TargetSpec:
    modules: tuple[TargetModule, ...]
    kinds: tuple[str, ...]
    n_layers: int

    def of_kind(self, kind: str) -> list[TargetModule]:
        return [m for m in self.modules if m.kind == kind]

    def shape_of(self, kind: str) -> tuple[int, int]:
        first = self.of_kind(kind)[0]
        return first.in_features, first.out_features

    def to_dict(self) -> dict:
        return {"kinds": list(self.kinds), "n_layers": self.n_layers, "modules": [asdict(m) for m in self.modules]}

    @classmethod
    def from_dict(cls, d: dict) -> "TargetSpec":
        return cls(tuple(TargetModule(**m) for m in d["modules"]), tuple(d["kinds"]), int(d["n_layers"]))


def _features(module: torch.nn.Module) -> tuple[int, int] | None:
    if isinstance(module, torch.nn.Linear):
        return module.in_features, module.out_features
    # transformers' Conv1D (GPT-2): weight is (in, out); PEFT treats it as fan_in_fan_out.
    if type(module).__name__ == "Conv1D" and getattr(module, "weight", None) is not None:
        rows, cols = module.weight.shape
        return int(rows), int(cols)
    return None


def find_targets(model: torch.nn.Module, kinds: Sequence[str] = DEFAULT_TARGETS) -> TargetSpec:
    """All linear modules whose last name component is in `kinds`, with their layer index."""
    kinds = tuple(kinds)
    found: list[TargetModule] = []
    for path, module in model.named_modules():
        kind = path.rsplit(".", 1)[-1]
        if kind not in kinds or "lora_" in path:
            continue
        if path.endswith(".base_layer"):
            continue
        feats = _features(module)
        if feats is None:
            continue
        match = _LAYER_INDEX.search(path)
        found.append(TargetModule(path, int(match.group(1)) if match else 0, kind, feats[0], feats[1]))
    missing = [k for k in kinds if not any(m.kind == k for m in found)]
    if missing:
        raise ValueError(f"the base model has no linear modules named {', '.join(missing)}")
    for kind in kinds:
        shapes = {(m.in_features, m.out_features) for m in found if m.kind == kind}
        if len(shapes) > 1:
            # One output head per module kind needs one shape per kind.
            raise ValueError(f"modules named {kind} have differing shapes {sorted(shapes)}")
    n_layers = max(m.layer for m in found) + 1
    return TargetSpec(tuple(found), kinds, n_layers)


def meta_model(config: Any) -> torch.nn.Module:
    """The base model built on the meta device from a config (or a model folder): shapes, no memory."""
    from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

    if isinstance(config, torch.nn.Module):
        return config
    if isinstance(config, (str, Path)):
        config = AutoConfig.from_pretrained(str(config))
    if not isinstance(config, PretrainedConfig):
        raise TypeError(f"expected a model, a transformers config or a model folder, got {type(config).__name__}")
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)
