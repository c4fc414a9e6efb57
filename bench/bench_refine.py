"""Does refinement repair a weak skill? A skill-only family's shipped recipe, broken by a bad
edit, refined by the generator–verifier loop; success before and after on held-out tasks.

    python -m bench.bench_refine [--family wrong_case_method] [--test 8] [--rounds 4] [--generator offline]

The store holds the family's recipe as version 1, with the runs the agent made with it (on
--history tasks), as a store does after a skill has been in use. Version 2 is the bad edit: the
command of the fix step taken out, so the step says in words what to change but no longer how.
The family is skill-only, so the default model solves none of its tasks without the skill.
Version 2 is refined: the offline generator edits it with material from successful runs (those
of the minibatches and the skill's own earlier ones in the store); `--generator MODEL` has a
litellm model rewrite it instead. Four disjoint blocks of held-out seeds: the history, the
refiner's minibatches, its validation tasks, and the test tasks that the before and after
figures come from, which the refiner never sees. The goal is after ≥ 2× before.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# A numbered step whose fix is given as a command: "3. Find the line … instead: `sed -i …` FILE".
_FIX_STEP = re.compile(r"^(\d+\. .*?):\s*`sed -i [^`]*`.*$", re.MULTILINE)


def weakened(text: str) -> str:
    """The recipe with each sed command of its fix step taken out; the step's words stay."""
    out, count = _FIX_STEP.subn(lambda m: m.group(1).rstrip() + ".", text)
    if not count:
        raise ValueError("the recipe has no `sed -i` fix step to weaken")
    return out


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", default="wrong_case_method", help="a skill-only family (its recipe is weakened)")
    p.add_argument("--history", type=int, default=4, help="tasks run with version 1 before the bad edit")
    p.add_argument("--train", type=int, default=6, help="tasks the refiner draws its minibatches from")
    p.add_argument("--validation", type=int, default=4, help="tasks the refiner judges a revision on")
    p.add_argument("--test", type=int, default=8, help="held-out tasks for the before and after figures")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--minibatch", type=int, default=3)
    p.add_argument("--generator", default="offline", help="offline, or a litellm model string")
    p.add_argument("--skill-mode", default="context", choices=["context", "parametric", "both"])
    p.add_argument("--workers", type=int, default=2, help="test episodes at once")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main() -> None:
    args = parse()
    from skillgraft.agent.episodes import EpisodeJob, LocalEpisodes
    from skillgraft.agent.loadout import make_loadout
    from skillgraft.agent.models.factory import make_model
    from skillgraft.evolve.intervals import rate_text
    from skillgraft.evolve.learn.refine import AgentVerifier, Refiner
    from skillgraft.evolve.learn.roles import make_compiler, make_generator
    from skillgraft.settings import load_settings
    from skillgraft.skills.schema import SkillVersion, saved_id
    from skillgraft.skills.store import Store
    from skillgraft.skillworld.default_model import ensure_hypernet, ensure_policy
    from skillgraft.skillworld.families import SKILL_ONLY
    from skillgraft.skillworld.generate import HELDOUT_START, generate
    from skillgraft.skillworld.library import for_family

    if args.family not in SKILL_ONLY:
        sys.exit(f"--family must be a skill-only family ({', '.join(SKILL_ONLY)}), not {args.family!r}")
    recipe = next(s for s in for_family(args.family) if s.name.endswith("-recipe"))
    start = weakened(recipe.text)
    models = load_settings().models
    policy = ensure_policy(models, show_progress=False)
    model = make_model(f"hf:{policy}")
    compiler = make_compiler(ensure_hypernet(models, show_progress=False), model) if args.skill_mode != "context" else None
    first = HELDOUT_START + 60_000 + 1_000 * args.seed  # four blocks no other bench draws from
    history, train, validation, test = ([generate(args.family, first + block * 100 + i).task() for i in range(n)]
                                        for block, n in enumerate((args.history, args.train, args.validation, args.test)))
    runner = LocalEpisodes(lambda: make_model(f"hf:{policy}"), args.workers)

    def loadout(store: Store, version: SkillVersion):
        return make_loadout(store, model, [version], args.skill_mode, compiler=compiler, cache=work / "adapters")

    def solved(store: Store, version: SkillVersion, label: str) -> int:
        jobs = [EpisodeJob(t, loadout(store, version)) for t in test]
        wins = sum(result.success for _, result in runner.run_all(jobs))
        print(f"  {label}: {rate_text(wins, len(test))}", flush=True)
        return wins

    with tempfile.TemporaryDirectory(prefix="bench-refine-") as tmp:
        work = Path(tmp)
        store = Store(f"sqlite:///{work / 'store.db'}", work / "artifacts")
        t0 = time.monotonic()
        good = store.add_version(recipe.name, recipe.text, origin="authored")
        jobs = [EpisodeJob(t, loadout(store, good), work / "runs" / f"{t.id}.json") for t in history]
        wins = 0
        for job, result in runner.run_all(jobs):
            assert job.trajectory_path is not None
            store.add_trajectory(job.trajectory_path, job.task.id, job.task.family, result.exit_status, result.reward,
                                 result.cost, result.steps, result.timings, [saved_id(good.id)], [])
            wins += result.success
        print(f"{args.family}: {recipe.name} v1 solved {wins}/{len(history)} of its history tasks", flush=True)
        bad = store.add_version(recipe.name, start, origin="authored", parent_id=good.id)
        print(f"v2, the bad edit; {args.rounds} rounds of {args.generator} refinement in {args.skill_mode} mode, "
              f"{len(train)} training / {len(validation)} validation / {len(test)} test tasks", flush=True)
        print(start.split("---\n", 2)[2].strip() + "\n", flush=True)
        before = solved(store, bad, "before refinement (v2)")
        verifier = AgentVerifier(store, model, compiler, skill_mode=args.skill_mode, workdir=work / "verify")
        refiner = Refiner(store, make_generator(args.generator), verifier, rounds=args.rounds,
                          minibatch=args.minibatch, seed=args.seed)
        result = refiner.refine(recipe.name, train, validation)
        for i, a in enumerate(result.attempts, 1):
            valid = f", validation {sum(a.validation.values()):g}/{len(a.validation)}" if a.validation is not None else ""
            print(f"  proposal {i} (from candidate {a.parent}): minibatch {sum(a.parent_minibatch.values()):g} -> "
                  f"{sum(a.minibatch.values()):g}{valid}; {'kept' if a.kept else 'dropped'}: {a.reason}", flush=True)
        print(f"  {result.describe()}")
        final = store.latest_version(recipe.name)
        assert final is not None
        if final.number > bad.number:
            print("\nthe refined text:\n" + final.text.split("---\n", 2)[2].strip() + "\n")
        after = solved(store, final, f"after refinement (v{final.number})")
        store.close()
        runner.close()
    ratio = f"{after / before:.2f}x" if before else ("unbounded" if after else "undefined")
    print(f"after / before: {ratio} (goal >= 2x); {time.monotonic() - t0:.0f}s")


if __name__ == "__main__":
    main()
