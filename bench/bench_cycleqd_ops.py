"""Cost of making one CycleQD child: low-rank task vectors against dense ones, Llama-3-8B q/v shapes.

    python -m bench.bench_cycleqd_ops [--rank 16] [--dense-layers 1] [--repeats 3]

Llama-3-8B (published dimensions): 32 layers, hidden 4096, 32 query heads and 8 key/value
heads of 128, so q_proj is 4096×4096 and v_proj is 1024×4096 (GQA). One child is a crossover
of two parents, Σ ω_i/Σω · τ_i, followed by the SVD mutation along the quality expert's
singular directions; the expert's SVD is computed once per expert and cached on both sides.

LoRA route (evolve.cycleqd.operators): exact rank concatenation, QR + small core SVD back to
rank R. Dense route (task vectors as d×d matrices, as full-checkpoint merging does): weighted
sum, then U·diag(u∘S)·Vᵀ over the expert's full SVD. The dense route over 32 layers would need
about 12 GiB of resident task vectors, so it runs on `--dense-layers` layers and its time and
memory are scaled linearly to 32 layers; the LoRA route always runs all 32 layers. Each route
runs in its own subprocess so peak resident memory is measured for it alone.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

LAYERS = 32
SHAPES = {"q_proj": (4096, 4096), "v_proj": (1024, 4096)}


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _modules(layers: int):
    return [(f"model.layers.{i}.self_attn.{p}", shape) for i in range(layers) for p, shape in SHAPES.items()]


def run_lora(rank: int, repeats: int) -> dict:
    import numpy as np
    import torch

    from skillgraft.evolve.cycleqd.operators import crossover, svd_expert_mutation
    from skillgraft.hypernet.lora import LowRank, svd

    base = _peak_rss_bytes()
    g = torch.Generator().manual_seed(0)

    def adapter():
        return {name: LowRank(B=torch.randn(o, rank, generator=g) * 0.01, A=torch.randn(rank, i, generator=g) * 0.01)
                for name, (o, i) in _modules(LAYERS)}

    parents, expert = [adapter(), adapter()], adapter()
    t0 = time.perf_counter()
    expert_svd = svd(expert)
    svd_s = time.perf_counter() - t0
    del expert  # only its SVD is kept, as on the dense side
    times = []
    for k in range(repeats + 1):
        rng = np.random.default_rng(k)
        t0 = time.perf_counter()
        child = crossover(parents, rng, rank=rank)
        child = svd_expert_mutation(child, expert_svd, rng, rank=rank, w_max=0.1)
        if k:  # the first round warms up the kernels
            times.append(time.perf_counter() - t0)
    assert all(lr.rank <= rank for lr in child.values())
    return {"child_s": float(np.median(times)), "expert_svd_s": svd_s, "layers": LAYERS,
            "peak_rss_delta": _peak_rss_bytes() - base,
            "child_bytes": sum(lr.B.numel() + lr.A.numel() for lr in child.values()) * 4}


def run_dense(layers: int, repeats: int) -> dict:
    import numpy as np
    import torch

    base = _peak_rss_bytes()
    g = torch.Generator().manual_seed(0)
    modules = _modules(layers)
    parents = [{n: torch.randn(o, i, generator=g) * 1e-3 for n, (o, i) in modules} for _ in range(2)]
    expert = {n: torch.randn(o, i, generator=g) * 1e-3 for n, (o, i) in modules}
    t0 = time.perf_counter()
    expert_svd = {n: torch.linalg.svd(t, full_matrices=False) for n, t in expert.items()}
    svd_s = time.perf_counter() - t0
    del expert
    times = []
    for k in range(repeats + 1):
        rng = np.random.default_rng(k)
        t0 = time.perf_counter()
        w = rng.normal(1.0, 0.01, size=2)
        w = w / w.sum()
        child = {}
        for n, _ in modules:
            c = parents[0][n] * float(w[0]) + parents[1][n] * float(w[1])
            U, S, Vh = expert_svd[n]
            u = torch.from_numpy(rng.uniform(0.0, 0.1, size=S.shape[0])).float()
            c += (U * (u * S)) @ Vh
            child[n] = c
        if k:
            times.append(time.perf_counter() - t0)
        del child
    return {"child_s": float(np.median(times)), "expert_svd_s": svd_s, "layers": layers,
            "peak_rss_delta": _peak_rss_bytes() - base,
            "child_bytes": sum(o * i for _, (o, i) in modules) * 4}


def _side(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.bench_cycleqd_ops", *args], check=True, capture_output=True,
                         text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--dense-layers", type=int, default=1, help="layers the dense route really runs (scaled to 32)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads for both routes (default 1: on a shared 2-core machine OpenMP spinning "
                         "slows small decompositions by up to ~80x and does not speed up the dense matmuls)")
    ap.add_argument("--side", choices=["lora", "dense"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    if args.side == "lora":
        print(json.dumps(run_lora(args.rank, args.repeats)))
        return
    if args.side == "dense":
        print(json.dumps(run_dense(args.dense_layers, args.repeats)))
        return

    threads = ["--threads", str(args.threads)]
    lo = _side(["--side", "lora", "--rank", str(args.rank), "--repeats", str(args.repeats), *threads])
    de = _side(["--side", "dense", "--dense-layers", str(args.dense_layers), "--repeats", str(args.repeats), *threads])
    scale = LAYERS / de["layers"]
    dense_time = de["child_s"] * scale
    dense_mem = de["peak_rss_delta"] * scale
    dense_svd = de["expert_svd_s"] * scale
    mib = 1024**2
    print(f"CycleQD child (crossover of 2 parents + SVD mutation), Llama-3-8B q/v shapes, {LAYERS} layers, "
          f"LoRA rank {args.rank}, torch threads {args.threads}")
    print(f"dense route measured on {de['layers']} layer(s), scaled x{scale:g} to {LAYERS} layers")
    print(f"{'':24}{'LoRA':>14}{'dense':>14}{'ratio':>10}")
    print(f"{'time per child':24}{lo['child_s'] * 1e3:>11.1f} ms{dense_time * 1e3:>11.0f} ms{dense_time / lo['child_s']:>9.0f}x")
    print(f"{'peak memory (RSS)':24}{lo['peak_rss_delta'] / mib:>10.1f} MiB{dense_mem / mib:>10.0f} MiB"
          f"{dense_mem / max(lo['peak_rss_delta'], 1):>9.0f}x")
    print(f"{'child size':24}{lo['child_bytes'] / mib:>10.1f} MiB{de['child_bytes'] * scale / mib:>10.0f} MiB"
          f"{de['child_bytes'] * scale / lo['child_bytes']:>9.0f}x")
    print(f"{'expert SVD (once)':24}{lo['expert_svd_s'] * 1e3:>11.1f} ms{dense_svd * 1e3:>11.0f} ms"
          f"{dense_svd / lo['expert_svd_s']:>9.0f}x")


if __name__ == "__main__":
    main()
