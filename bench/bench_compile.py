"""Compile latency on the real shapes of Qwen2.5-0.5B and Qwen2.5-7B.

    python -m bench.bench_compile [--threads 1] [--repeats 10] [--models-dir ~/.skillgraft/models]

Adapters for the two models' shapes (configs written from their published dimensions, models
built on the meta device), q_proj and v_proj at rank 8: time to encode the skill, run the
hypernetwork, and write the PEFT folder. The timing does not depend on the weights' values, so
a freshly initialised hypernetwork of the default size is used. Compiling against fitting by
gradient descent, on the default model, is bench_compile_vs_fit. With --models-dir, the default
model's compile is timed with and without the lexical channel (which reads the skill's tokens
with the base model itself).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import Qwen2Config

from skillgraft.hypernet.compile import Compiler
from skillgraft.hypernet.hypernetwork import HypernetConfig

QWEN_05B = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=32768)
QWEN_7B = Qwen2Config(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                      num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False, max_position_embeddings=32768)

SKILL = """# flaky-test-triage

Use this when a test fails only sometimes.

## Steps

1. Run the failing test alone ten times: `pytest -x -p no:randomly tests/test_x.py::test_y --count 10`.
2. If it passes alone, run the whole file with `-p randomly` and note the seed that fails.
3. Look for shared state: module-level caches, temp files with fixed names, time.sleep-based waits.
4. Replace sleeps with polling on the condition; give temp files unique names with tmp_path.
5. Re-run with the failing seed until it passes twenty times in a row.

## Pitfalls

Do not mark the test as xfail to make the run green. Do not raise timeouts without a reason.
"""

TOOLS = ["pytest", "ruff", "mypy", "git bisect", "pip", "make", "docker", "sed", "grep", "tox", "black", "coverage"]
ACTS = ["find the failing test", "fix the import order", "pin the dependency", "rerun only failures",
        "bisect the regression", "format the file"]


def _ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def part1(repeats: int) -> None:
    print("== compile latency on published shapes (meta-device bases, q_proj+v_proj, rank 8) ==")
    for name, config in (("Qwen2.5-0.5B", QWEN_05B), ("Qwen2.5-7B", QWEN_7B)):
        compiler = Compiler.load(None, config, config=HypernetConfig(rank=8))
        params = sum(p.numel() for p in compiler.net.parameters())
        enc_ms = _ms(lambda: compiler.encoder.encode([SKILL + f"\n<!-- {time.perf_counter()} -->"]), repeats)
        encoded = compiler.encoder.encode([SKILL])

        def net_only():
            with torch.inference_mode():
                compiler.net(encoded)

        net_ms = _ms(net_only, repeats)
        total_ms = _ms(lambda: compiler.compile([SKILL + f"\n<!-- {time.perf_counter()} -->"]), repeats)
        with tempfile.TemporaryDirectory() as tmp:
            save_ms = _ms(lambda: compiler.compile_to_dir(SKILL, Path(tmp) / "a"), max(3, repeats // 3))
        print(f"{name:13s} hypernet {params / 1e6:5.1f}M params, {len(compiler.net.spec.modules)} modules | "
              f"encode {enc_ms:6.1f} ms  hypernet {net_ms:6.1f} ms  compile (uncached text) {total_ms:6.1f} ms  "
              f"+ write PEFT folder {save_ms:6.1f} ms")
    print("goal: compile <= 100 ms for the 7B shapes")


def part2(repeats: int, models_dir: Path) -> None:
    """The default model's shapes and weights: what reading a skill's tokens with the base (the
    lexical channel, o_proj) adds to a compile, against the same hypernetwork without it."""
    from skillgraft.skillworld.default_model import ensure_policy
    from skillgraft.skillworld.recipe import HYPERNET

    policy = ensure_policy(models_dir, show_progress=False)
    print(f"== compile latency on the default model ({policy}) ==")
    times = {}
    for name, config in (("pooled only", HYPERNET.network(lexical=False)), ("with lexical", HYPERNET.network())):
        compiler = Compiler.load(None, str(policy), config=config)
        times[name] = _ms(lambda: compiler.compile([SKILL + f"\n<!-- {time.perf_counter()} -->"]), repeats)
        print(f"{name:13s} compile (uncached text) {times[name]:7.1f} ms")
    print(f"lexical / pooled: {times['with lexical'] / times['pooled only']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (the goal is stated for 2)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--models-dir", type=Path, default=None,
                    help="also time the default model's compile, lexical channel on and off (its models folder)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}")
    part1(args.repeats)
    if args.models_dir:
        part2(args.repeats, args.models_dir)


if __name__ == "__main__":
    main()
