"""What makes a folder a usable LoRA adapter, checked before the store records one and before a
model loads one: a readable config, readable weights, every lora_A matched by a lora_B of the
rank the config states, and nothing but finite numbers."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillgraft.skills.errors import StoreError

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"


class AdapterFormatError(StoreError, ValueError):
    """The folder is not an adapter that can be used; the message names the file and what is wrong."""


def check_adapter_files(adapter: Path | Mapping[str, bytes]) -> None:
    """Raises AdapterFormatError unless `adapter` (a PEFT folder, or its files by name) is whole."""
    where = str(adapter) if isinstance(adapter, Path) else "<adapter>"
    config_bytes, weights = _read(adapter, CONFIG, where), _read(adapter, WEIGHTS, where)
    try:
        config = json.loads(config_bytes)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AdapterFormatError(f"{where}/{CONFIG}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise AdapterFormatError(f"{where}/{CONFIG}: not a JSON object")
    rank = config.get("r")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise AdapterFormatError(f"{where}/{CONFIG}: field 'r' must be a positive whole number (got {rank!r})")
    tensors = _tensors(weights, f"{where}/{WEIGHTS}")
    pairs = 0
    for key, a in tensors.items():
        if not key.endswith(".lora_A.weight"):
            continue
        b = tensors.get(key[: -len("lora_A.weight")] + "lora_B.weight")
        if b is None:
            raise AdapterFormatError(f"{where}/{WEIGHTS}: {key} has no matching lora_B")
        expected = _rank_for(key, config)
        if a.dim() != 2 or b.dim() != 2 or a.shape[0] != b.shape[1] or (expected is not None and a.shape[0] != expected):
            raise AdapterFormatError(f"{where}/{WEIGHTS}: {key} has shapes {tuple(a.shape)} and {tuple(b.shape)}, "
                                     f"which do not make a rank-{expected or '?'} LoRA as {CONFIG} states")
        pairs += 1
    if pairs == 0:
        raise AdapterFormatError(f"{where}/{WEIGHTS}: holds no LoRA factors (no *.lora_A.weight)")
    for key, tensor in tensors.items():
        if not bool(tensor.float().isfinite().all()):
            raise AdapterFormatError(f"{where}/{WEIGHTS}: {key} holds NaN or infinite values")


def _read(adapter: Path | Mapping[str, bytes], name: str, where: str) -> bytes:
    if isinstance(adapter, Path):
        try:
            return (adapter / name).read_bytes()
        except OSError as exc:
            raise AdapterFormatError(f"{where}/{name}: cannot be read ({exc.strerror or exc})") from None
    if name not in adapter:
        raise AdapterFormatError(f"{where}: {name} is missing")
    return adapter[name]


def _tensors(data: bytes, where: str) -> dict[str, Any]:
    from safetensors.torch import load  # torch only when an adapter is checked

    try:
        return load(data)
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types for any damage
        raise AdapterFormatError(f"{where}: not a readable safetensors file ({exc})") from None


def _rank_for(key: str, config: dict) -> int | None:
    """The rank the config gives this module: its rank_pattern entry, else `r`."""
    module = key[: -len(".lora_A.weight")]
    for pattern, rank in (config.get("rank_pattern") or {}).items():
        if re.search(rf"(^|\.){pattern}$", module) or module.endswith(pattern):
            return int(rank)
    return config.get("r")
