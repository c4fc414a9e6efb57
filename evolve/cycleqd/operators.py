"""Crossover and mutation on low-rank task vectors; no d×d matrix is ever formed.

A child's task vector is a weighted sum of parts merged by the MERGE method of `hypernet.merges`:
an exact rank concatenation brought back to rank R (QR of both stacks + SVD of the small core),
so the cost per module is O(d·k²) for stacked rank k instead of O(d²) for dense task vectors.
The mutations a config may name are registered in cycleqd.mutations.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from skillgraft.hypernet.lora import LoraDelta, LowRank, svd
from skillgraft.hypernet.merges import merge

Svd = Mapping[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
MERGE = "svd"  # how children, and the final merge of a search, sum task vectors and return to rank R


def crossover_weights(n: int, rng: np.random.Generator, mu: float = 1.0, sigma: float = 0.01) -> np.ndarray:
    """ω_i ~ N(μ, σ²), returned normalised as ω_i / Σω."""
    w = rng.normal(mu, sigma, size=n)
    total = float(w.sum())
    if abs(total) < 1e-12:
        # Only reachable with μ ≈ 0, far from the paper's μ = 1; equal weights keep the child defined.
        return np.full(n, 1.0 / n)
    return w / total


def crossover(
    parents: Sequence[Mapping[str, LowRank]],
    rng: np.random.Generator,
    *,
    rank: int,
    mu: float = 1.0,
    sigma: float = 0.01,
    granularity: str = "model",
) -> LoraDelta:
    """Σ ω_i/(Σω) · τ_i, one ω per parent ("model") or drawn afresh for every module ("module")."""
    if not parents:
        raise ValueError("crossover needs at least one parent")
    if granularity not in ("model", "module"):
        raise ValueError(f"unknown crossover granularity {granularity!r}")
    shared = crossover_weights(len(parents), rng, mu, sigma) if granularity == "model" else None
    child: LoraDelta = {}
    # Module by module, so only one module's stacked factors exist at a time.
    for name in _module_union(parents):
        coeffs = shared if shared is not None else crossover_weights(len(parents), rng, mu, sigma)
        parts = [({name: p[name]}, float(c)) for p, c in zip(parents, coeffs) if name in p]
        child.update(merge(MERGE, [d for d, _ in parts], [c for _, c in parts], rank=rank))
    return child


def _module_union(deltas: Sequence[Mapping[str, LowRank]]) -> list[str]:
    names: dict[str, None] = {}
    for d in deltas:
        names.update(dict.fromkeys(d))
    return list(names)


def _uniforms(rng: np.random.Generator, low: float, high: float, n: int, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(rng.uniform(low, high, size=n)).to(like.dtype)


def svd_expert_mutation(
    child: Mapping[str, LowRank],
    expert_svd: Svd,
    rng: np.random.Generator,
    *,
    rank: int,
    w_max: float = 0.1,
) -> LoraDelta:
    """τ + Σ_k u_k σ_k u_k v_kᵀ over the expert's singular triplets, u_k ~ U(0, w_max).

    The expert is the current quality task's best elite: the child is pushed along the
    directions that make that elite good, by at most w_max of each direction's strength.
    """
    out: LoraDelta = dict(child)
    for name, (U, S, Vh) in expert_svd.items():
        u = _uniforms(rng, 0.0, w_max, S.shape[0], S)
        push = {name: LowRank(B=U * (u * S), A=Vh)}
        own = {name: child[name]} if name in child else {}
        out.update(merge(MERGE, [own, push], [1.0, 1.0], rank=rank))
    return out


def svd_rescale_mutation(
    child: Mapping[str, LowRank],
    rng: np.random.Generator,
    *,
    rank: int,
    w_max: float = 0.1,
) -> LoraDelta:
    """Rescales the child's own singular values: σ_k ← σ_k (1 + u_k), u_k ~ U(−w_max, w_max)."""
    out: LoraDelta = {}
    for name, (U, S, Vh) in svd(child).items():
        keep = min(rank, S.shape[0])
        factor = 1.0 + _uniforms(rng, -w_max, w_max, keep, S)
        root = (S[:keep] * factor).clamp_min(0).sqrt()
        ref = child[name]
        out[name] = LowRank(B=(U[:, :keep] * root).to(ref.B.dtype), A=(root[:, None] * Vh[:keep]).to(ref.A.dtype))
    return out


def gaussian_mutation(
    child: Mapping[str, LowRank],
    rng: np.random.Generator,
    *,
    rank: int,
    std: float = 0.05,
) -> LoraDelta:
    """Ablation: adds low-rank Gaussian noise G = P·Q/√k with P, Q standard normal.

    Each entry of G has unit variance, scaled to `std` × the module's RMS entry of ΔW, so the
    noise is comparable across modules of different magnitude. k = rank keeps it low rank.
    """
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**63 - 1)))
    out: LoraDelta = {}
    for name, lr in child.items():
        out_dim, in_dim = lr.shape
        rms = _rms(lr)
        k = max(1, min(rank, out_dim, in_dim))
        P = torch.randn(out_dim, k, generator=gen, dtype=torch.float32)
        Q = torch.randn(k, in_dim, generator=gen, dtype=torch.float32)
        noise = LowRank(B=(P * (std * rms / k**0.5)).to(lr.B.dtype), A=Q.to(lr.A.dtype))
        out.update(merge(MERGE, [{name: lr}, {name: noise}], [1.0, 1.0], rank=rank))
    return out


def _rms(lr: LowRank) -> float:
    """RMS entry of B·A from tr((BᵀB)(AAᵀ)), without forming B·A."""
    B, A = lr.B.double(), lr.A.double()
    sq = float(torch.trace((B.T @ B) @ (A @ A.T)).clamp_min(0))
    return (sq / (lr.shape[0] * lr.shape[1])) ** 0.5
