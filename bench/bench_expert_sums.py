"""Do LoRA experts add up? Each expert alone and the sum of all of them, at a few weights, on the
edit replays of held-out conversations of every group (teacher-forced, skillworld/edit_replay.py).

    python -m bench.bench_expert_sums --experts case=E/case --experts format=E/format \\
        --groups case=wrong_case_method --groups format=wrong_format [--per-group 8] [--weights 1,0.75,0.5]

A merge (CycleQD's, the global adapter's EMA) sums task vectors; experts whose sum makes every
expert's own edit can be merged, experts whose sum makes one and loses the others cannot,
whatever the search. The policy without an adapter is the baseline, measured in the same run.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experts", action="append", default=[], help="NAME=ADAPTER_DIR, repeatable")
    ap.add_argument("--groups", action="append", default=[], help="GROUP=family,family,...; repeatable")
    ap.add_argument("--per-group", type=int, default=8, help="held-out conversations per group")
    ap.add_argument("--offset", type=int, default=900, help="held-out seeds from this offset (other benches use 500, 700)")
    ap.add_argument("--weights", type=lambda v: [float(w) for w in v.split(",")], default=[1.0, 0.75, 0.5],
                    help="weight of each expert in the sum, one sum per weight")
    ap.add_argument("--policy", help="policy folder (default: the bundled default model)")
    args = ap.parse_args()
    from bench.bench_cycleqd_world import pairs, replay_sets

    experts, groups = pairs(args.experts, "--experts"), pairs(args.groups, "--groups")
    if not experts or not groups:
        ap.error("give --experts and --groups")

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from skillgraft.hypernet.lora import concat
    from skillgraft.hypernet.peft_io import load_adapter
    from skillgraft.settings import load_settings
    from skillgraft.skillworld.default_model import ensure_policy
    from skillgraft.skillworld.edit_replay import applied, edit_replay, edit_right

    policy = Path(args.policy) if args.policy else ensure_policy(load_settings().models)
    model = AutoModelForCausalLM.from_pretrained(policy).eval()
    tokenizer = AutoTokenizer.from_pretrained(policy)
    deltas = {name: load_adapter(folder, model)[0] for name, folder in experts.items()}
    held_out = replay_sets({g: families.split(",") for g, families in groups.items()}, args.per_group, args.offset)
    sets = {group: [edit_replay(tokenizer, c) for c in convs] for group, convs in held_out.items()}

    def row(label: str, delta) -> None:
        cells = []
        for replays in sets.values():
            with applied(model, delta):
                cells.append(f"{sum(edit_right(model, r) for r in replays)}/{len(replays)}")
        print(f"{label:<28}" + "".join(f"{c:>12}" for c in cells), flush=True)

    print(f"{'edits made (teacher-forced)':<28}" + "".join(f"{g:>12}" for g in sets))
    row("policy, no adapter", None)
    for name, delta in deltas.items():
        row(f"{name} alone", delta)
    for w in args.weights:
        row(f"sum, {w:g} each", concat(list(deltas.values()), [w] * len(deltas)))


if __name__ == "__main__":
    main()
