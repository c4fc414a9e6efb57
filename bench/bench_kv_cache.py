"""One decoding step of the default model with the growing key/value cache against transformers'
DynamicCache, side by side at several lengths of conversation.

    python -m bench.bench_kv_cache [--lengths 500,1000,2000,4000] [--steps 20] [--rounds 3]

For each length a random prompt is read once into each kind of cache; then `--steps` single
tokens are decoded into both, the two caches taking turns round by round so that machine noise
falls on both. The logits of every step must be identical.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from rich.console import Console
from rich.table import Table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="500,1000,2000,4000")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM, DynamicCache

    from skillgraft.agent.models.kv_cache import GrowingCache
    from skillgraft.settings import load_settings
    from skillgraft.skillworld.default_model import ensure_policy

    model = AutoModelForCausalLM.from_pretrained(ensure_policy(load_settings().models), dtype=torch.float32).eval()
    table = Table(title=f"ms per decoding step, default model, {torch.get_num_threads()} threads "
                        f"(median of {args.steps} steps x {args.rounds} rounds)")
    for col in ("context tokens", "DynamicCache", "growing cache", "speed-up"):
        table.add_column(col, justify="right")
    same = True
    gen = torch.Generator().manual_seed(0)
    for length in (int(x) for x in args.lengths.split(",")):
        prompt = torch.randint(100, 20000, (1, length), generator=gen)
        tokens = torch.randint(100, 20000, (args.rounds, args.steps), generator=gen)
        times: dict[str, list[float]] = {"dynamic": [], "growing": []}
        for r in range(args.rounds):
            caches = {"dynamic": DynamicCache(), "growing": GrowingCache()}
            logits: dict[str, list[torch.Tensor]] = {name: [] for name in caches}
            with torch.no_grad():
                for cache in caches.values():
                    model(input_ids=prompt, cache=cache, use_cache=True)
                for step in range(args.steps):
                    order = list(caches) if (r + step) % 2 == 0 else list(reversed(caches))
                    for name in order:
                        started = time.perf_counter()
                        out = model(input_ids=tokens[r, step].view(1, 1), cache=caches[name], use_cache=True)
                        times[name].append(time.perf_counter() - started)
                        logits[name].append(out.logits)
            same &= all(torch.equal(a, b) for a, b in zip(logits["dynamic"], logits["growing"], strict=True))
        dynamic, growing = (statistics.median(times[n]) * 1e3 for n in ("dynamic", "growing"))
        table.add_row(str(length), f"{dynamic:.1f}", f"{growing:.1f}", f"{dynamic / growing:.2f}×")
    console = Console()
    console.print(table)
    console.print(f"logits identical at every step: {same}")


if __name__ == "__main__":
    main()
