"""Adapters on disk, in PEFT's own format, and the base model they belong to.

A folder holds `adapter_config.json` and `adapter_model.safetensors` exactly as PEFT writes
them, so `PeftModel.from_pretrained` (and servers such as vLLM) load it unchanged. The scaling
is folded into the factors and `lora_alpha` equals the rank, so PEFT's scaling is 1 and what
is stored is ΔW = B @ A. What PEFT's config has no field for (the base-model fingerprint, the
hypernetwork checkpoint, provenance) goes in a third file, `skillgraft.json`, which PEFT ignores.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from safetensors.torch import save as save_safetensors

from skillgraft.hypernet.lora import LoraDelta, LowRank
from skillgraft.hypernet.targets import meta_model

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
EXTRA_FILE = "skillgraft.json"
_PREFIX = "base_model.model."


class BaseMismatchError(ValueError):
    """An adapter was made for a different base model than the one it is being applied to."""


@dataclass
class AdapterInfo:
    path: Path
    base_model_name: str | None
    fingerprint: str | None
    target_modules: list[str]
    ranks: dict[str, int]
    hypernet_ckpt: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return max(self.ranks.values(), default=0)


# ---------------------------------------------------------------- fingerprint


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The bare transformers model under a PeftModel, so wrapping does not change the fingerprint."""
    while hasattr(model, "get_base_model"):
        inner = model.get_base_model()
        if inner is model:
            break
        model = inner
    return model


def model_fingerprint(model_or_config: Any) -> str:
    """A short hash of the base model's parameter names and shapes.

    Two models with the same architecture and sizes share it whatever their dtype, device
    (meta included) or PEFT wrapping; a different depth, width or vocabulary changes it.
    """
    model = meta_model(model_or_config)
    model = _unwrap(model)
    digest = hashlib.sha256()
    for name, param in model.named_parameters():
        if "lora_" in name:
            continue
        # PEFT renames wrapped linears' weights to `<path>.base_layer.weight`.
        name = name.replace(".base_layer.", ".")
        digest.update(f"{name}:{tuple(param.shape)}\n".encode())
    return "sha256:" + digest.hexdigest()[:24]


# ---------------------------------------------------------------- saving


def _module_suffixes(paths: Sequence[str]) -> list[str]:
    return sorted({p.rsplit(".", 1)[-1] for p in paths})


def adapter_files(
    delta: Mapping[str, LowRank],
    *,
    base_model_name: str | None,
    fingerprint: str | None,
    target_modules: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    hypernet_ckpt: str | None = None,
    dtype: torch.dtype = torch.float32,
) -> dict[str, bytes]:
    """The files of a PEFT LoRA folder holding `delta`, by name, as bytes (nothing is written).

    `target_modules` are the module-name suffixes PEFT should wrap (default: those present in
    `delta`). Modules PEFT wraps but `delta` lacks get PEFT's zero-initialised B, i.e. ΔW = 0.
    Per-module ranks that differ from the most common one go in rank_pattern/alpha_pattern.
    """
    if not delta:
        raise ValueError("refusing to save an adapter with no modules")
    ranks = {name: lr.rank for name, lr in delta.items()}
    if min(ranks.values()) < 1:
        raise ValueError("every module needs rank ≥ 1")
    r = Counter(ranks.values()).most_common(1)[0][0]
    rank_pattern = {name: k for name, k in ranks.items() if k != r}
    targets = list(target_modules) if target_modules else _module_suffixes(list(delta))

    tensors = {}
    for name, lr in delta.items():
        tensors[f"{_PREFIX}{name}.lora_A.weight"] = lr.A.detach().to("cpu", dtype).contiguous()
        tensors[f"{_PREFIX}{name}.lora_B.weight"] = lr.B.detach().to("cpu", dtype).contiguous()

    from peft import LoraConfig

    config = LoraConfig(
        r=r,
        lora_alpha=r,
        target_modules=targets,
        rank_pattern=rank_pattern,
        alpha_pattern=dict(rank_pattern),  # alpha = rank everywhere keeps PEFT's scaling at 1
        lora_dropout=0.0,
        bias="none",
        use_rslora=False,
        task_type="CAUSAL_LM",
        base_model_name_or_path=base_model_name,
    ).to_dict()
    # As PEFT's save_pretrained writes it, with sets sorted so equal adapters are equal bytes.
    config = {k: sorted(v) if isinstance(v, set) else v for k, v in config.items()}
    extra = {
        "format": 1,
        "base_model_name": base_model_name,
        "base_fingerprint": fingerprint,
        "hypernet_ckpt": hypernet_ckpt,
        "ranks": ranks,
        "metadata": dict(metadata or {}),
    }
    return {
        WEIGHTS_FILE: save_safetensors(tensors, metadata={"format": "pt"}),
        CONFIG_FILE: json.dumps(config, indent=2, sort_keys=True).encode(),
        EXTRA_FILE: json.dumps(extra, indent=2, sort_keys=True, default=str).encode(),
    }


def save_adapter(delta: Mapping[str, LowRank], out_dir: str | Path, **described: Any) -> Path:
    """Writes `delta` as a PEFT LoRA folder (see `adapter_files` for the keywords) and returns its path."""
    files = adapter_files(delta, **described)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return out


# ---------------------------------------------------------------- loading


def _scaling_for(name: str, config: dict, rank: int) -> float:
    from peft.utils.other import get_pattern_key

    alpha = config.get("lora_alpha", config.get("r", rank))
    alpha_pattern = config.get("alpha_pattern") or {}
    if alpha_pattern:
        key = get_pattern_key(list(alpha_pattern), name)
        alpha = alpha_pattern.get(key, alpha)
    if config.get("use_rslora"):
        return alpha / math.sqrt(rank)
    return alpha / rank


def read_info(adapter_dir: str | Path) -> AdapterInfo:
    """The adapter's description without loading its weights."""
    path = Path(adapter_dir)
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"{path} is not a PEFT adapter folder (no {CONFIG_FILE})")
    config = json.loads(config_path.read_text())
    extra = json.loads((path / EXTRA_FILE).read_text()) if (path / EXTRA_FILE).is_file() else {}
    targets = config.get("target_modules") or []
    if isinstance(targets, str):
        targets = [targets]
    return AdapterInfo(
        path=path,
        base_model_name=extra.get("base_model_name", config.get("base_model_name_or_path")),
        fingerprint=extra.get("base_fingerprint"),
        target_modules=list(targets),
        ranks=dict(extra.get("ranks") or {}),
        hypernet_ckpt=extra.get("hypernet_ckpt"),
        metadata=dict(extra.get("metadata") or {}),
    )


def load_adapter(adapter_dir: str | Path, base: Any = None) -> tuple[LoraDelta, AdapterInfo]:
    """Reads a PEFT LoRA folder (ours or any PEFT-written one) with the scaling folded into B.

    Given `base` (a model, a meta-device model, a config or a model folder), an adapter made
    for another base raises BaseMismatchError.
    """
    path = Path(adapter_dir)
    info = check_base(path, base) if base is not None else read_info(path)
    config = json.loads((path / CONFIG_FILE).read_text())
    weights_path = path / WEIGHTS_FILE
    if not weights_path.is_file():
        raise FileNotFoundError(f"{path} has no {WEIGHTS_FILE}")
    tensors = load_file(str(weights_path))
    delta: LoraDelta = {}
    for key, A in tensors.items():
        if not key.endswith(".lora_A.weight"):
            continue
        stem = key[: -len(".lora_A.weight")]
        B = tensors.get(stem + ".lora_B.weight")
        if B is None:
            raise ValueError(f"{weights_path}: {key} has no matching lora_B")
        name = stem[len(_PREFIX):] if stem.startswith(_PREFIX) else stem
        factor = _scaling_for(name, config, A.shape[0])
        delta[name] = LowRank(B=B.float() * factor if factor != 1.0 else B.float(), A=A.float())
    if not delta:
        raise ValueError(f"{weights_path} holds no LoRA factors")
    info.ranks = {name: lr.rank for name, lr in delta.items()}
    return delta, info


def check_base(adapter_dir: str | Path, model_or_config: Any) -> AdapterInfo:
    """Raises BaseMismatchError unless the adapter was made for this base model's shapes."""
    info = read_info(adapter_dir)
    if info.fingerprint is None:
        return info  # a foreign PEFT adapter records no fingerprint; PEFT itself checks shapes
    actual = model_fingerprint(model_or_config)
    if actual != info.fingerprint:
        raise BaseMismatchError(
            f"adapter {info.path} was made for base model {info.base_model_name or '?'} "
            f"(fingerprint {info.fingerprint}), but this base model's fingerprint is {actual}: "
            "its layer names or shapes differ. Compile the skill again for this base model."
        )
    return info


# ---------------------------------------------------------------- combining inside PEFT


def peft_cat(peft_model: Any, adapter_names: Sequence[str], weights: Sequence[float], new_name: str) -> str:
    """Adds `new_name` = Σ w_i · adapter_i to a PeftModel by PEFT's rank concatenation.

    PEFT folds each source's scaling into the merged factors but then gives the merged adapter
    the first source's rsLoRA flag, so its scaling becomes √r instead of 1. We reset it to 1,
    which makes merging a single adapter at weight 1 reproduce it exactly.
    """
    if len(adapter_names) != len(weights):
        raise ValueError(f"{len(adapter_names)} adapters but {len(weights)} weights")
    if len(adapter_names) == 1 and weights[0] < 0:
        # PEFT merges one adapter "linearly" with √weight on each factor, undefined for w < 0.
        raise ValueError("a single adapter can only be merged with a non-negative weight")
    peft_model.add_weighted_adapter(list(adapter_names), list(weights), new_name, combination_type="cat")
    peft_model.peft_config[new_name].use_rslora = False
    from peft.tuners.lora import LoraLayer

    for module in peft_model.modules():
        if isinstance(module, LoraLayer) and new_name in module.scaling:
            module.scaling[new_name] = 1.0
    return new_name


# ---------------------------------------------------------------- reading a trained PEFT model


def lora_modules(peft_model: Any) -> list[tuple[str, torch.nn.Module]]:
    """(name, module) of every module the PEFT model wraps with its default LoRA."""
    return [(name, module) for name, module in peft_model.named_modules()
            if hasattr(module, "lora_A") and "default" in module.lora_A]


def lora_delta(peft_model: Any) -> dict[str, LowRank]:
    """ΔW = scaling · B @ A of every wrapped module, keyed by its path in the bare model."""
    out = {}
    for name, module in lora_modules(peft_model):
        path = name.removeprefix("base_model.model.")
        out[path] = LowRank(B=module.lora_B["default"].weight.detach().clone() * module.scaling["default"],
                            A=module.lora_A["default"].weight.detach().clone())
    if not out:
        raise RuntimeError("the PEFT model has no LoRA modules")
    return out
