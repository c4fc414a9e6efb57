"""Which of the expert's turns a policy gets right: teacher-forced exact match per turn on
held-out expert conversations, side by side for two policies.

    python -m bench.bench_policy_turns --policy DIR [--baseline DIR] [--per-family 2] [--families seen]

Each held-out task is solved by the expert; its conversation is fed to the policy one token at
a time, and a turn counts as right when the policy's greedy next token is the expert's at every
position of that assistant reply (its thought, command and end token). This isolates what the
policy can produce when everything before the turn is right, which a sandbox success rate mixes
up with earlier mistakes. Turns: 0 run the tests, 1 find the failing code (copies the test's
name), 2 the edit (copies the path and the family's values), 3 rerun, 4 submit. Each
conversation is shown without and with one of its family's skills in context.
"""
from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table


def held_out_records(families: list[str], per_family: int, offset: int = 500) -> list[dict]:
    """The expert's successful runs on `per_family` held-out seeds of each family, from HELDOUT_START + offset."""
    from skillgraft.skillworld.dataset import episode_record
    from skillgraft.skillworld.episodes import run_episodes
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    tasks = [generate(f, HELDOUT_START + offset + i) for i in range(per_family) for f in families]
    return [episode_record(ep) for ep in run_episodes(tasks) if ep.success]


def turn_hits(policy: Path, records: list[dict], seed: int = 0) -> dict:
    """{(turn, in_context): [right, total]} and {family: [first wrong turn per conversation]}."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from skillgraft.skillworld import library
    from skillgraft.skillworld.dataset import record_steps
    from skillgraft.skillworld.expert import messages
    from skillgraft.skillworld.policy.lora_policy import encode

    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy).eval()
    rng = random.Random(seed)
    hits: dict = defaultdict(lambda: [0, 0])
    first_wrong: dict = defaultdict(list)
    for record in records:
        skill = library.pick(record["family"], rng, record["seed"])
        for in_context in (False, True):
            conv = messages(record_steps(record, in_context), [(skill.name, skill.body)] if in_context else [])
            ids, mask = encode(tokenizer, conv, 4096)
            with torch.no_grad():
                guess = model(torch.tensor([ids])).logits[0].argmax(-1).tolist()
            turn, i, wrong = 0, 1, None
            while i < len(ids):
                if not mask[i]:
                    i += 1
                    continue
                j, right = i, True
                while j < len(ids) and mask[j]:
                    right &= guess[j - 1] == ids[j]
                    j += 1
                hits[(turn, in_context)][0] += right
                hits[(turn, in_context)][1] += 1
                if not right and wrong is None:
                    wrong = turn
                turn, i = turn + 1, j
            if not in_context:
                first_wrong[record["family"]].append(wrong)
    return {"hits": dict(hits), "first_wrong": dict(first_wrong)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", type=Path, default=None, help="policy model folder (default: the bundled skillworld model)")
    ap.add_argument("--baseline", type=Path, default=None, help="a second policy folder to compare with")
    ap.add_argument("--models-dir", type=Path, default=None, help="default: HOME/models (SKILLGRAFT_HOME or ~/.skillgraft)")
    ap.add_argument("--per-family", type=int, default=2, help="held-out tasks per family")
    ap.add_argument("--families", nargs="+", default=["seen"], help="families or groups (seen, skill-only, drill, all)")
    args = ap.parse_args()
    from skillgraft.settings import load_settings
    from skillgraft.skillworld.default_model import ensure_policy
    from skillgraft.skillworld.families import resolve

    policies = {"policy": args.policy or ensure_policy(args.models_dir or load_settings().models)}
    if args.baseline:
        policies["baseline"] = args.baseline
    records = held_out_records(resolve(args.families), args.per_family)
    results = {name: turn_hits(path, records) for name, path in policies.items()}
    console = Console()
    table = Table(title=f"teacher-forced turns right, {len(records)} held-out expert conversations")
    table.add_column("turn")
    table.add_column("skill in context")
    for name in results:
        table.add_column(name, justify="right")
    for key in sorted(results["policy"]["hits"]):
        cells = []
        for res in results.values():
            right, total = res["hits"].get(key, [0, 0])
            cells.append(f"{right}/{total}")
        table.add_row(str(key[0]), "yes" if key[1] else "no", *cells)
    console.print(table)
    for name, res in results.items():
        failed = {f: sum(w is not None for w in ws) for f, ws in res["first_wrong"].items()}
        console.print(f"{name}: conversations with a wrong turn (no skill), per family: "
                      + ", ".join(f"{f} {n}/{len(res['first_wrong'][f])}" for f, n in failed.items()))


if __name__ == "__main__":
    main()
