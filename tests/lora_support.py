"""Random LoRA deltas and the checks the LoRA algebra tests share."""
from __future__ import annotations

import torch

from skillgraft.hypernet.lora import LoraDelta, LowRank


def rand_lowrank(out: int, inp: int, r: int, seed: int) -> LowRank:
    g = torch.Generator().manual_seed(seed)
    return LowRank(B=torch.randn(out, r, generator=g), A=torch.randn(r, inp, generator=g))


def random_delta(seed: int, r: int = 4) -> LoraDelta:
    return {"l0.q_proj": rand_lowrank(24, 16, r, seed), "l0.v_proj": rand_lowrank(8, 16, r, seed + 100)}


def best_rank(dense: torch.Tensor, rank: int) -> torch.Tensor:
    """The best rank-`rank` approximation of a matrix (Eckart–Young), in double precision."""
    u, s, vh = torch.linalg.svd(dense.double(), full_matrices=False)
    return (u[:, :rank] * s[:rank]) @ vh[:rank]


def close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-5) -> bool:
    """Relative Frobenius distance below `tol`."""
    return float((a.double() - b.double()).norm() / max(float(b.double().norm()), 1e-12)) < tol
