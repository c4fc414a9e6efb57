"""Generated LoRAs applied to a frozen base model functionally, one adapter per batch row.

Forward hooks add x·Aᵢᵀ·Bᵢᵀ to each target module's output, with Aᵢ, Bᵢ still attached to the
hypernetwork's graph: the loss of the frozen base backpropagates into the hypernetwork and
nowhere else, and every row of a batch can carry a different skill's adapter.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import Tensor, nn


def _hook(A: Tensor, B: Tensor):
    At, Bt = A.transpose(1, 2), B.transpose(1, 2)  # (N, in, r), (N, r, out)

    def add_delta(module: nn.Module, args: tuple, output):
        out = output[0] if isinstance(output, tuple) else output
        x = args[0]
        delta = torch.bmm(torch.bmm(x.reshape(x.shape[0], -1, x.shape[-1]).to(At.dtype), At), Bt)
        out = out + delta.reshape(out.shape).to(out.dtype)
        return (out, *output[1:]) if isinstance(output, tuple) else out

    return add_delta


@contextmanager
def generated_lora(
    model: nn.Module, factors: Mapping[str, tuple[Tensor, Tensor]], rows: Tensor | None = None
) -> Iterator[None]:
    """Within the block, module `path` of `model` computes W x + Bᵢ Aᵢ x for batch row i.

    `factors` maps module paths to (A (N, r, in), B (N, out, r)). `rows`, if given, says which
    of the N adapters each batch row uses (several examples of one skill share an adapter).
    """
    modules = dict(model.named_modules())
    handles = []
    try:
        for path, (A, B) in factors.items():
            if path not in modules:
                raise KeyError(f"the base model has no module {path}")
            if rows is not None:
                A, B = A.index_select(0, rows), B.index_select(0, rows)
            handles.append(modules[path].register_forward_hook(_hook(A, B)))
        yield
    finally:
        for handle in handles:
            handle.remove()
