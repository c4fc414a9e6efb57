"""Low-rank EMA of LoRA adapters against the dense route, on one 4096×4096 module.

    python -m bench.bench_ema [--dim 4096] [--rank 16] [--new-rank 8] [--alpha 0.1] [--threads 1]

Dense route: form (1−α)·ΔW_global + α·ΔW_new as a d×d matrix, full SVD, keep the top R.
Low-rank route (hypernet.lora.ema): concatenate the scaled factors, thin QR of both, SVD of
the small core. Both run here, side by side; the error is measured against a float64 dense
reference.
"""
from __future__ import annotations

import argparse
import time

import torch

from skillgraft.hypernet import lora
from skillgraft.hypernet.lora import LowRank


def dense_ema(g: LowRank, n: LowRank, alpha: float, rank: int) -> torch.Tensor:
    dense = (1 - alpha) * (g.B @ g.A) + alpha * (n.B @ n.A)
    u, s, vh = torch.linalg.svd(dense, full_matrices=False)
    return (u[:, :rank] * s[:rank]) @ vh[:rank]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--new-rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both routes (1: fair on a shared machine)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    d, R = args.dim, args.rank
    g = {"m": LowRank(B=torch.randn(d, R) / d**0.5, A=torch.randn(R, d) / d**0.5)}
    n = {"m": LowRank(B=torch.randn(d, args.new_rank) / d**0.5, A=torch.randn(args.new_rank, d) / d**0.5)}

    lora.ema(g, n, args.alpha, R)  # warm-up
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        out = lora.ema(g, n, args.alpha, R)
        times.append(time.perf_counter() - t)
    low = sorted(times)[len(times) // 2]

    t = time.perf_counter()
    dense_out = dense_ema(g["m"], n["m"], args.alpha, R)
    dense_time = time.perf_counter() - t

    g64 = LowRank(g["m"].B.double(), g["m"].A.double())
    n64 = LowRank(n["m"].B.double(), n["m"].A.double())
    ref = dense_ema(g64, n64, args.alpha, R)
    low_err = float((out["m"].dense().double() - ref).norm() / ref.norm())
    dense_err = float((dense_out.double() - ref).norm() / ref.norm())

    print(f"torch threads {torch.get_num_threads()}; module {d}x{d}, global rank {R}, new rank {args.new_rank}, alpha {args.alpha}, target rank {R}")
    print(f"low-rank EMA (QR + core SVD): {low * 1e3:9.2f} ms  (median of {args.repeats})")
    print(f"dense EMA + full SVD        : {dense_time * 1e3:9.2f} ms")
    print(f"speed-up                    : {dense_time / low:9.1f}x   (goal >= 50x)")
    print(f"relative error vs float64   : low-rank {low_err:.2e}, dense float32 {dense_err:.2e}   (goal <= 1e-4)")


if __name__ == "__main__":
    main()
