"""Does writing a skill's commands into the weights (hypernet.memory) make a compiled skill carry
its edit? Teacher-forced edit commands, as bench_skill_forms measures them.

    python -m bench.bench_command_memory [--hypernet DIR] [--families skill-only drill_number ...] [--per-family 5]
                                         [--layers 23-27] [--scales 1.0] [--show-misses]

For each held-out expert conversation, the family's shipped skill text (a drill's written for
its own task) is compiled three ways, nothing of it in the prompt:

    hypernet            the hypernetwork's adapter alone
    memory              the closed-form key-value memory of the skill's literal edits alone
    hypernet + memory   both at once, their ΔW summed: what the compiler gives

The memory is the hypernetwork checkpoint's own (the default one's unless --hypernet;
memory.json: its band of layers, scale, ridge, and the expert conversations of training seeds
its moments are read from); --layers and --scales measure others beside it, moments read off
the same conversations.
"""
from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.bench_policy_turns import held_out_records

FORMS = ("hypernet", "memory", "hypernet + memory")


def band(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", nargs="+", default=["skill-only", "drill_number", "drill_word", "drill_precision", "drill_default"],
                    help="families or groups (seen, skill-only, drill, all)")
    ap.add_argument("--per-family", type=int, default=5, help="held-out conversations per family")
    ap.add_argument("--hypernet", type=Path, default=None, help="hypernetwork checkpoint (default: the bundled one)")
    ap.add_argument("--layers", default=None, help="another band of layers for the memory, as 23-27")
    ap.add_argument("--scales", type=float, nargs="+", default=None, help="other value scales, each a column")
    ap.add_argument("--show-misses", action="store_true", help="print every missed command, each wrong token as [guess|expert]")
    args = ap.parse_args()

    import json

    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.lora import concat
    from skillgraft.hypernet.memory import SPEC, CommandMemory, LayerMoments
    from skillgraft.settings import load_settings
    from skillgraft.skillworld import library
    from skillgraft.skillworld.dataset import record_steps
    from skillgraft.skillworld.default_model import ensure_hypernet, ensure_policy
    from skillgraft.skillworld.edit_replay import edit_command_guess
    from skillgraft.skillworld.expert import messages
    from skillgraft.skillworld.families import resolve

    models_dir = load_settings().models
    checkpoint = args.hypernet or ensure_hypernet(models_dir)
    started = time.perf_counter()
    compiler = Compiler.load(checkpoint, ensure_policy(models_dir))
    loading = time.perf_counter() - started
    if compiler.memory is None:
        raise SystemExit(f"the hypernetwork {checkpoint} has no command memory ({SPEC}); the default one has")
    model, tokenizer, own = compiler.memory.model, compiler.memory.tokenizer, compiler.memory
    started = time.perf_counter()
    moments, _ = own.whitening()  # measured at the memory's first write
    measuring = time.perf_counter() - started
    if args.layers:  # another band: moments read off the memory's own reference conversations
        reference = json.loads((Path(checkpoint) / SPEC).read_text())["reference"]
        moments = LayerMoments.measure(model, reference, band(args.layers))
    memories = {f"scale {own.scale}, layers {own.layers[0]}-{own.layers[-1]}": own}
    for scale in args.scales or ([own.scale] if args.layers else []):
        layers = sorted(moments.second)
        memories[f"scale {scale}, layers {layers[0]}-{layers[-1]}"] = CommandMemory(model, tokenizer, moments, scale=scale,
                                                                                     ridge=own.ridge)
    bare = compiler.beside_text()  # the hypernetwork alone

    families = resolve(args.families)
    records = held_out_records(families, args.per_family)
    rng = random.Random(0)
    bodies = [library.pick(r["family"], rng, r["seed"]).body for r in records]
    texts = list(dict.fromkeys(bodies))
    started = time.perf_counter()
    hypernet = dict(zip(texts, bare.compile(texts)))
    alone = time.perf_counter() - started
    started = time.perf_counter()
    compiler.memory.write(texts)
    writing = time.perf_counter() - started
    print(f"compiling {len(texts)} skill texts: the hypernetwork {alone:.2f} s, the memory's writing {writing:.2f} s more "
          f"({(alone + writing) / alone:.2f}x); loading the compiler {loading:.1f} s, measuring the memory's moments "
          f"{measuring:.1f} s (once, at its first write)")

    def measure(name: str, delta_of) -> None:
        hits: dict = defaultdict(int)
        for record, body in zip(records, bodies):
            conversation = messages(record_steps(record, False), [])
            right, shown = edit_command_guess(model, tokenizer, conversation, delta_of(body))
            hits[record["family"]] += right
            if args.show_misses and not right:
                print(f"{record['family']}, {name}: {shown}", flush=True)
        rows[name] = hits

    rows: dict = {}
    measure("hypernet", lambda t: hypernet[t])
    for label, memory in memories.items():
        written = dict(zip(texts, memory.write(texts)))
        measure(f"memory, {label}", lambda t: written[t])
        measure(f"hypernet + memory, {label}", lambda t: concat([hypernet[t], written[t]]))

    per = defaultdict(int)
    for record in records:
        per[record["family"]] += 1
    table = Table(title=f"edit command right, teacher-forced, {len(records)} held-out conversations")
    table.add_column("family")
    for name in rows:
        table.add_column(name, justify="right")
    for f in families:
        table.add_row(f, *(f"{hits[f]}/{per[f]}" for hits in rows.values()))
    table.add_row("all", *(f"{sum(hits.values())}/{len(records)}" for hits in rows.values()), style="bold")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
