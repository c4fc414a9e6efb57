"""Named merges of several LoRA adapters into one, chosen by name.

    merged = merge("svd", [a, b], [0.7, 0.3], rank=16)

"cat" is Σ w_i ΔW_i exactly, its rank the sum of the parts' ranks; "svd" is the same sum brought
back to `rank` (its best rank-`rank` approximation); "factors" averages the B's and the A's
apart, which is not a sum of ΔW at all and is kept so that difference can be measured. A new
merge is one function under `@register_merge("name")`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import torch
from torch import Tensor

from skillgraft.hypernet.lora import LoraDelta, LowRank, concat, truncate


class Merge(Protocol):
    def __call__(self, deltas: Sequence[Mapping[str, LowRank]], weights: Sequence[float], rank: int | None) -> LoraDelta: ...


MERGES: dict[str, Merge] = {}


def register_merge(name: str) -> Callable[[Merge], Merge]:
    def register(method: Merge) -> Merge:
        if name in MERGES:
            raise ValueError(f"merge {name!r} is registered twice")
        MERGES[name] = method
        return method

    return register


def merge_names() -> list[str]:
    return list(MERGES)


def merge(method: str, deltas: Sequence[Mapping[str, LowRank]], weights: Sequence[float] | None = None, *,
          rank: int | None = None) -> LoraDelta:
    """The adapters merged by the named method, each weighted (1 when no weights are given).

    A module missing from some adapter counts as zero there.
    """
    if method not in MERGES:
        raise ValueError(f"unknown merge {method!r}: use one of {sorted(MERGES)}")
    if weights is None:
        weights = [1.0] * len(deltas)
    if len(weights) != len(deltas):
        raise ValueError(f"{len(deltas)} adapters but {len(weights)} weights")
    return MERGES[method](deltas, weights, rank)


def _needs_rank(method: str, rank: int | None) -> int:
    if rank is None:
        raise ValueError(f"the {method} merge brings its result to a rank: give one")
    return rank


@register_merge("cat")
def cat(deltas: Sequence[Mapping[str, LowRank]], weights: Sequence[float], rank: int | None) -> LoraDelta:
    """Σ w_i ΔW_i exactly, by rank concatenation."""
    if rank is not None:
        raise ValueError("the cat merge keeps every part's rank: give no rank, or use the svd merge")
    return concat(deltas, weights)


@register_merge("svd")
def svd_sum(deltas: Sequence[Mapping[str, LowRank]], weights: Sequence[float], rank: int | None) -> LoraDelta:
    """Σ w_i ΔW_i, recompressed to `rank` by QR of both stacks and an SVD of the small core."""
    return truncate(concat(deltas, weights), _needs_rank("svd", rank))


def _padded(lr: LowRank, rank: int) -> LowRank:
    """Zero columns of B and rows of A up to `rank`; ΔW is unchanged."""
    extra = rank - lr.rank
    if extra <= 0:
        return lr
    return LowRank(B=torch.cat([lr.B, lr.B.new_zeros(lr.B.shape[0], extra)], dim=1),
                   A=torch.cat([lr.A, lr.A.new_zeros(extra, lr.A.shape[1])], dim=0))


def _weighted_sum(tensors: Sequence[Tensor], weights: Sequence[float]) -> Tensor:
    total = weights[0] * tensors[0]
    for t, w in zip(tensors[1:], weights[1:]):
        total = total + w * t
    return total


@register_merge("factors")
def factors(deltas: Sequence[Mapping[str, LowRank]], weights: Sequence[float], rank: int | None) -> LoraDelta:
    """(Σ w_i B_i)(Σ w_i A_i), each part first brought to `rank`: the tempting shortcut.

    Σ w_i B_i A_i is the weighted sum of ΔW; this adds the cross terms w_i w_j B_i A_j and shrinks
    each part by its weight twice. A module held by one adapter only keeps that part, weighted once.
    """
    rank = _needs_rank("factors", rank)
    out: LoraDelta = {}
    for name in dict.fromkeys(n for d in deltas for n in d):
        parts = [(truncate({name: d[name]}, rank)[name], float(w)) for d, w in zip(deltas, weights) if name in d]
        if len(parts) == 1:
            only, w = parts[0]
            out[name] = LowRank(B=only.B * w, A=only.A.clone())
            continue
        padded = [_padded(lr, rank) for lr, _ in parts]
        ws = [w for _, w in parts]
        out[name] = LowRank(B=_weighted_sum([p.B for p in padded], ws), A=_weighted_sum([p.A for p in padded], ws))
    return out
