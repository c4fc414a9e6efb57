"""Model time per agent turn on the default model: the conversation's key/value cache kept between
turns against re-reading the whole conversation every turn, side by side in the same run.

    python -m bench.bench_agent_turns [--tasks 4] [--family wrong_constant] [--other-skills 0] [--lookup-tokens 10]

Each held-out SkillWorld task runs four times through the real agent loop in a Docker sandbox, once
with each model (same weights, greedy decoding, the family's skill in context so that prompts are
long): re-reading the conversation every turn or keeping its cache, each with and without prompt
lookup (the model drafting the next tokens by copying from the conversation, lookup_decoding.py). The runs
rotate so that machine noise falls on all four. Per turn: the model's time for the call,
the prompt's length, how many of its tokens came from the cache, the reply's length (decoding it is
what a cached turn mostly costs). The replies are compared turn by turn with plain re-reading's (no
cache, no lookup): in exact arithmetic they are the same, and a difference can only come from float
rounding (a pass over new tokens against a cache sums in another order than a pass over all of
them), where the top two tokens are nearly tied.
--other-skills N also puts N other families' skills in context, as a retrieval of several would,
for prompts of the length a real repository's skills and outputs make.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from rich.console import Console
from rich.table import Table


class Timed:
    """Wraps a model: records (prompt tokens, cached tokens, seconds, reply, reply tokens) for every call."""

    def __init__(self, model):
        self.model, self.name, self.calls = model, model.name, []

    def query(self, messages):
        started = time.perf_counter()
        reply = self.model.query(messages)
        usage = reply.usage
        self.calls.append((usage["prompt_tokens"], usage.get("cached_tokens", 0), time.perf_counter() - started,
                           reply.content, usage["completion_tokens"]))
        return reply


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--family", default="wrong_constant")
    ap.add_argument("--sandbox", default="docker")
    ap.add_argument("--other-skills", type=int, default=0)
    ap.add_argument("--lookup-tokens", type=int, default=None,
                    help="tokens prompt lookup drafts per step for re-read and cached (default: the model's)")
    args = ap.parse_args()

    from skillgraft.agent.loadout import GivenSkill, make_loadout
    from skillgraft.agent.models.factory import make_model
    from skillgraft.agent.models.hf_model import LOOKUP_TOKENS
    from skillgraft.agent.runner import run_task
    from skillgraft.settings import load_settings
    from skillgraft.skillworld.default_model import ensure_policy
    from skillgraft.skillworld.evaluate import episode_skill
    from skillgraft.skillworld.families import SEEN
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    folder = ensure_policy(load_settings().models)
    lookup = LOOKUP_TOKENS if args.lookup_tokens is None else args.lookup_tokens
    models = {(cache, draft): make_model(f"hf:{folder}", reuse_cache=cache == "cached", lookup_tokens=draft)
              for draft in (lookup, 0) for cache in ("re-read", "cached")}
    names = list(models)
    per_turn: dict[tuple[tuple[str, int], int], list[tuple[int, int, float, int]]] = defaultdict(list)
    same = {name: [0, 0] for name in names}  # per model: turns whose reply equals the reference's, turns
    for i in range(args.tasks):
        wt = generate(args.family, HELDOUT_START + 700 + i)
        others = [f for f in SEEN if f != args.family][: args.other_skills]
        skills = [episode_skill(f, wt.seed) for f in [*others, args.family]]  # the task's own skill last, nearest the task
        replies = {}
        for name in names[i % 4:] + names[: i % 4]:
            timed = Timed(models[name])
            given = [GivenSkill.of_body(s.name, s.body) for s in skills]
            run_task(wt.task(), timed, sandbox=args.sandbox, loadout=make_loadout(None, timed, given))
            replies[name] = [c[3] for c in timed.calls]
            for turn, (prompt, cached, seconds, _, reply) in enumerate(timed.calls, 1):
                per_turn[(name, turn)].append((prompt, cached, seconds, reply))
        reference = replies[("re-read", 0)]
        for name in names:
            same[name][0] += sum(a == b for a, b in zip(replies[name], reference))
            same[name][1] += max(len(replies[name]), len(reference))
    table = Table(title=f"model time per turn, {args.tasks} held-out {args.family} tasks, "
                        f"{len(skills)} skill(s) in context, prompt lookup {lookup} tokens")
    for col in ("turn", "prompt tokens", "cached tokens", "reply tokens", "re-read s", "cached s", "speed-up",
                "no lookup: re-read s", "cached s", "speed-up"):
        table.add_column(col, justify="right")
    turns = sorted({t for _, t in per_turn})
    for turn in turns:
        runs = [per_turn[(name, turn)] for name in names]
        if not all(runs):
            continue
        times = [statistics.median(s for _, _, s, _ in r) for r in runs]
        cached = runs[1]
        table.add_row(str(turn), f"{statistics.mean(p for p, *_ in cached):.0f}",
                      f"{statistics.mean(c for _, c, *_ in cached):.0f}", f"{statistics.mean(r for *_, r in cached):.0f}",
                      *(f for a, b in (times[:2], times[2:]) for f in (f"{a:.2f}", f"{b:.2f}", f"{a / b:.2f}×")))
    spent = [sum(s for (n, _), calls in per_turn.items() if n == name for _, _, s, _ in calls) for name in names]
    table.add_row("all", "", "", "", *(f for a, b in (spent[:2], spent[2:]) for f in (f"{a:.1f}", f"{b:.1f}", f"{a / b:.2f}×")))
    console = Console(width=140)
    console.print(table)
    console.print(f"all turns, prompt lookup against none: re-reading {spent[2] / spent[0]:.2f}×, cached {spent[3] / spent[1]:.2f}×")
    console.print("replies equal to plain re-reading's, turn by turn: " + ", ".join(
        f"{cache}{'' if draft else ', no lookup'} {equal}/{total}" for (cache, draft), (equal, total) in same.items()))


if __name__ == "__main__":
    main()
