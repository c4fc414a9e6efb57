"""Model time per agent turn on the default model: the conversation's key/value cache kept between
turns against re-reading the whole conversation every turn, side by side in the same run.

    python -m bench.bench_agent_turns [--tasks 4] [--family wrong_constant] [--other-skills 0]

Each held-out SkillWorld task runs twice through the real agent loop in a Docker sandbox, once with
each model (same weights, greedy decoding, the family's skill in context so that prompts are long);
the runs alternate so that machine noise falls on both. Per turn: the model's time for the call,
the prompt's length, how many of its tokens came from the cache, the reply's length (decoding it is
what a cached turn mostly costs). The replies must be identical.
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
    args = ap.parse_args()

    from skillgraft.agent.loadout import GivenSkill, make_loadout
    from skillgraft.agent.models.factory import make_model
    from skillgraft.agent.runner import run_task
    from skillgraft.settings import load_settings
    from skillgraft.skillworld.default_model import ensure_policy
    from skillgraft.skillworld.evaluate import episode_skill
    from skillgraft.skillworld.families import SEEN
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    folder = ensure_policy(load_settings().models)
    models = {"cached": make_model(f"hf:{folder}"), "re-read": make_model(f"hf:{folder}", reuse_cache=False)}
    per_turn: dict[tuple[str, int], list[tuple[int, int, float, int]]] = defaultdict(list)
    same = True
    for i in range(args.tasks):
        wt = generate(args.family, HELDOUT_START + 700 + i)
        others = [f for f in SEEN if f != args.family][: args.other_skills]
        skills = [episode_skill(f, wt.seed) for f in [*others, args.family]]  # the task's own skill last, nearest the task
        replies = {}
        for name in (("cached", "re-read") if i % 2 == 0 else ("re-read", "cached")):
            timed = Timed(models[name])
            given = [GivenSkill.of_body(s.name, s.body) for s in skills]
            run_task(wt.task(), timed, sandbox=args.sandbox, loadout=make_loadout(None, timed, given))
            replies[name] = [c[3] for c in timed.calls]
            for turn, (prompt, cached, seconds, _, reply) in enumerate(timed.calls, 1):
                per_turn[(name, turn)].append((prompt, cached, seconds, reply))
        same &= replies["cached"] == replies["re-read"]
    table = Table(title=f"model time per turn, {args.tasks} held-out {args.family} tasks, "
                        f"{len(skills)} skill(s) in context")
    for col in ("turn", "prompt tokens", "cached tokens", "reply tokens", "re-read s", "cached s", "speed-up"):
        table.add_column(col, justify="right")
    turns = sorted({t for _, t in per_turn})
    for turn in turns:
        cached, reread = per_turn[("cached", turn)], per_turn[("re-read", turn)]
        if not cached or not reread:
            continue
        a = statistics.median(s for _, _, s, _ in reread)
        b = statistics.median(s for _, _, s, _ in cached)
        table.add_row(str(turn), f"{statistics.mean(p for p, *_ in cached):.0f}",
                      f"{statistics.mean(c for _, c, *_ in cached):.0f}", f"{statistics.mean(r for *_, r in cached):.0f}",
                      f"{a:.2f}", f"{b:.2f}", f"{a / b:.2f}×")
    console = Console(width=120)
    console.print(table)
    console.print(f"replies identical with and without the cache: {same}")


if __name__ == "__main__":
    main()
