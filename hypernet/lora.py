"""LoRA algebra in ΔW space.

An adapter is a map from module path to a pair of factors with ΔW = B @ A and any scaling
already folded in. Every operation here is defined on ΔW, never on A and B apart: averaging
two adapters' A's and B's separately is not averaging their ΔW's (B1A1 + B2A2 ≠ (B1+B2)(A1+A2)/2).

Sums are exact as rank concatenation. Recompression to a bounded rank goes through a thin QR
of each factor and an SVD of the small core, so the cost per module is O(d·k²) for stacked
rank k and the d×d matrix is never formed.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

# Factors are upcast to at least this precision for decompositions; bf16 QR/SVD lose too much.
_WORK_DTYPE = torch.float32


@dataclass
class LowRank:
    """ΔW = B @ A for one module. B is (out × r), A is (r × in)."""

    B: Tensor
    A: Tensor

    def __post_init__(self) -> None:
        if self.B.dim() != 2 or self.A.dim() != 2:
            raise ValueError(f"LoRA factors must be matrices, got B{tuple(self.B.shape)} A{tuple(self.A.shape)}")
        if self.B.shape[1] != self.A.shape[0]:
            raise ValueError(f"rank mismatch: B{tuple(self.B.shape)} @ A{tuple(self.A.shape)}")

    @property
    def rank(self) -> int:
        return self.A.shape[0]

    @property
    def shape(self) -> tuple[int, int]:
        """Shape of ΔW, (out, in)."""
        return self.B.shape[0], self.A.shape[1]

    def dense(self) -> Tensor:
        return self.B @ self.A


LoraDelta = dict[str, LowRank]


def _module_shapes(deltas: Iterable[Mapping[str, LowRank]]) -> dict[str, tuple[int, int]]:
    """Union of module paths in first-seen order, checking that each module has one shape."""
    shapes: dict[str, tuple[int, int]] = {}
    for delta in deltas:
        for name, lr in delta.items():
            seen = shapes.setdefault(name, lr.shape)
            if seen != lr.shape:
                raise ValueError(f"module {name}: ΔW shapes differ between adapters ({seen} vs {lr.shape})")
    return shapes


def concat(deltas: Sequence[Mapping[str, LowRank]], weights: Sequence[float] | None = None) -> LoraDelta:
    """Σ w_i ΔW_i exactly, as one adapter whose rank is the sum of the ranks.

    A module missing from some adapter counts as zero there. The weight goes on B only, so
    negative weights work and A keeps the input-side basis of each part unchanged.
    """
    if weights is None:
        weights = [1.0] * len(deltas)
    if len(weights) != len(deltas):
        raise ValueError(f"{len(deltas)} adapters but {len(weights)} weights")
    out: LoraDelta = {}
    for name in _module_shapes(deltas):
        parts = [(d[name], float(w)) for d, w in zip(deltas, weights) if name in d]
        dtype = torch.promote_types(parts[0][0].B.dtype, parts[0][0].A.dtype)
        for lr, _ in parts[1:]:
            dtype = torch.promote_types(dtype, torch.promote_types(lr.B.dtype, lr.A.dtype))
        out[name] = LowRank(
            B=torch.cat([lr.B.to(dtype) * w for lr, w in parts], dim=1),
            A=torch.cat([lr.A.to(dtype) for lr, _ in parts], dim=0),
        )
    return out


def scale(delta: Mapping[str, LowRank], w: float) -> LoraDelta:
    """w · ΔW for every module."""
    return {name: LowRank(B=lr.B * float(w), A=lr.A.clone()) for name, lr in delta.items()}


def add(a: Mapping[str, LowRank], b: Mapping[str, LowRank]) -> LoraDelta:
    """ΔW_a + ΔW_b exactly (rank concatenation)."""
    return concat([a, b], [1.0, 1.0])


def subtract(a: Mapping[str, LowRank], b: Mapping[str, LowRank]) -> LoraDelta:
    """ΔW_a − ΔW_b exactly (rank concatenation); a task vector relative to b."""
    return concat([a, b], [1.0, -1.0])


def _core_svd(lr: LowRank) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Thin QR of B and Aᵀ, then SVD of the small core Rb·Raᵀ.

    ΔW = Qb (Rb Raᵀ) Qaᵀ = (Qb U) S (Vh Qaᵀ); everything is at most k×k except the
    orthonormal bases, which are d×k.
    """
    B = lr.B.to(_WORK_DTYPE) if lr.B.dtype not in (torch.float32, torch.float64) else lr.B
    A = lr.A.to(B.dtype)
    qb, rb = torch.linalg.qr(B, mode="reduced")
    qa, ra = torch.linalg.qr(A.transpose(0, 1), mode="reduced")
    u, s, vh = torch.linalg.svd(rb @ ra.transpose(0, 1), full_matrices=False)
    return qb, u, s, vh, qa


def svd(delta: Mapping[str, LowRank]) -> dict[str, tuple[Tensor, Tensor, Tensor]]:
    """Thin SVD (U, S, Vh) of each module's ΔW, singular values in descending order."""
    result = {}
    for name, lr in delta.items():
        qb, u, s, vh, qa = _core_svd(lr)
        result[name] = (qb @ u, s, vh @ qa.transpose(0, 1))
    return result


def _truncate_one(lr: LowRank, rank: int) -> LowRank:
    qb, u, s, vh, qa = _core_svd(lr)
    keep = min(rank, s.shape[0])
    # Split √S between the factors so neither one carries all the magnitude; this keeps
    # B and A on similar scales, which matters when they are later stored in half precision.
    root = s[:keep].sqrt()
    B = (qb @ u[:, :keep]) * root
    A = root[:, None] * (vh[:keep] @ qa.transpose(0, 1))
    return LowRank(B=B.to(lr.B.dtype), A=A.to(lr.A.dtype))


def truncate(delta: Mapping[str, LowRank], rank: int) -> LoraDelta:
    """Best rank-`rank` approximation of each ΔW (Eckart–Young), by QR + core SVD.

    Modules already at or below `rank` are returned unchanged (exact).
    """
    if rank < 1:
        raise ValueError(f"rank must be at least 1, got {rank}")
    return {
        name: (_truncate_one(lr, rank) if lr.rank > rank else LowRank(B=lr.B.clone(), A=lr.A.clone()))
        for name, lr in delta.items()
    }


def ema(global_: Mapping[str, LowRank], new: Mapping[str, LowRank], alpha: float, rank: int) -> LoraDelta:
    """(1−α)·ΔW_global + α·ΔW_new, recompressed to `rank`.

    Exact up to the final truncation. A module present on one side only counts as zero on the
    other, so an empty `global_` yields α·ΔW_new: callers that want the first global adapter
    to equal the first compiled skill pass α = 1.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    return truncate(concat([global_, new], [1.0 - alpha, alpha]), rank)


def to_dense(delta: Mapping[str, LowRank]) -> dict[str, Tensor]:
    """ΔW as full matrices. Memory d_out×d_in per module: for tests and small models only."""
    return {name: lr.dense() for name, lr in delta.items()}


def frobenius_norm(delta: Mapping[str, LowRank]) -> float:
    """‖ΔW‖_F over all modules, via tr((BᵀB)(AAᵀ)) so no d×d product is formed."""
    total = 0.0
    for lr in delta.values():
        B = lr.B.to(torch.float64)
        A = lr.A.to(torch.float64)
        total += float(torch.trace((B.T @ B) @ (A @ A.T)).clamp_min(0.0))
    return total**0.5


def ranks(delta: Mapping[str, LowRank]) -> dict[str, int]:
    return {name: lr.rank for name, lr in delta.items()}


def to(delta: Mapping[str, LowRank], dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> LoraDelta:
    """A detached copy with factors moved to `dtype`/`device`."""
    return {
        name: LowRank(B=lr.B.detach().to(device=device, dtype=dtype), A=lr.A.detach().to(device=device, dtype=dtype))
        for name, lr in delta.items()
    }
