"""Whether bfloat16 autocast pays on a device.

On a GPU with bfloat16 support, and on a CPU with AVX-512 BF16 or AMX instructions, autocast
roughly halves a training step. On any other CPU the bfloat16 matrix products are emulated and
run tens of times slower than float32, so training asks for bfloat16 only where it is native.
"""
from __future__ import annotations

import torch


def native_bf16(device: str | torch.device) -> bool:
    """True when `device` computes bfloat16 matrix products in hardware."""
    kind = torch.device(device).type
    if kind == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if kind == "cpu":
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return False


def bf16_autocast(device: str | torch.device, wanted: bool) -> torch.autocast:
    """Autocast to bfloat16 on `device` when `wanted` and native there; otherwise float32."""
    kind = torch.device(device).type
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=wanted and native_bf16(kind))
