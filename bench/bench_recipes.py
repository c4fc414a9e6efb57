"""Recipe texts side by side on the same tasks, none of them learning.

A learning curve mixes two things: which run succeeded first in a family (its recipe is what
the later runs are given) and how the summariser writes a recipe from it. This bench holds the
first fixed: for each skill a kept store learned, it takes the run its latest version was
summarised from and writes that run's recipe again with the summariser as it is now. The stored
text and the rewritten one (and no skill at all) are then each given in context to the same
held-out tasks of the skill's family, greedy, in the sandbox. A change to the summariser is
measured on what it changes alone. With `--skill-mode parametric` the texts are given compiled
instead (the hypernetwork and its command memory, as a parametric run gets a skill), so a change
to how a skill compiles is measured on the same texts and tasks; `--tune-steps N` gives the stored
version compiled and tuned on the run it was summarised from (hypernet.tune), as a learner with
tuning compiles it.

    python -m bench.bench_learning --skill-mode context --conditions on --unstick --keep DIR
    python -m bench.bench_recipes DIR/on --per-family 10 --unstick --workers 2
    python -m bench.bench_recipes DIR/on --per-family 10 --unstick --forms none stored --skill-mode parametric
    python -m bench.bench_recipes DIR/on --per-family 10 --unstick --forms none stored --skill-mode parametric --tune-steps 10
"""
from __future__ import annotations

import argparse
import difflib
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skillgraft.skills.schema import SkillVersion

FORMS = ("none", "stored", "rewritten")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", type=Path, help="a store folder (store.db beside artifacts/), such as bench_learning --keep DIR/on")
    p.add_argument("--per-family", type=int, default=10, help="held-out tasks of each skill's family")
    p.add_argument("--seed", type=int, default=0, help="which block of held-out tasks")
    p.add_argument("--families", nargs="+", default=None, help="only the skills of these families (default: every one)")
    p.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS, help="which texts to give the tasks")
    p.add_argument("--unstick", action="store_true", help="runs go back and redraw when stuck (agent.unstick)")
    p.add_argument("--skill-mode", choices=("context", "parametric"), default="context",
                   help="give the texts in the prompt, or compiled into an adapter by the hypernetwork")
    p.add_argument("--hypernet", type=Path, default=None, help="hypernetwork checkpoint for parametric (default: the bundled one)")
    p.add_argument("--tune-steps", type=int, default=0,
                   help="parametric: the stored version's adapter tuned this many steps on its run (0: as compiled)")
    p.add_argument("--tune-from", choices=["compiled", "fresh"], default="fresh",
                   help="tune the hypernetwork's adapter, or a fresh LoRA on its modules")
    p.add_argument("--tune-lr", type=float, default=None, help="the tuning's learning rate (default: 5e-4 compiled, 5e-3 fresh)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--keep", type=Path, default=None, metavar="DIR",
                   help="write each run's trajectory to DIR/FORM/TASK.json, to read what a form's runs did")
    p.add_argument("--out", type=Path, default=Path("bench/out"), help="where recipes.png (bars per family and form) goes")
    p.add_argument("--policy", type=Path, default=None, help="a trained policy folder instead of the default model")
    p.add_argument("--models", type=Path, default=None, help="models folder (default HOME/models)")
    return p.parse_args()


def recipes(store) -> list[tuple[str, SkillVersion, str]]:
    """(family, stored version, rewritten text) for each skill summarised from a stored run."""
    from skillgraft.evolve.learn.episode import load_episode
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser

    summariser = OfflineSummariser(test_command="python3 -m pytest -q")
    out = []
    for version in store.latest_versions():
        family = (version.frontmatter.get("metadata") or {}).get("family")
        if not family or version.trajectory_id is None:
            continue
        episode = load_episode(store.trajectory_path(version.trajectory_id))
        out.append((family, version, summariser.summarise(episode, version.skill_name)))
    return out


def plot_forms(cells: dict[str, dict[str, tuple[int, int]]], out: Path, title: str) -> Path:
    """Bars per family, one per form, with 95% Wilson intervals: {family: {form: (solved, run)}}."""
    from skillgraft.evolve.intervals import wilson
    from skillgraft.evolve.learn.curve import new_figure, save_png

    families = sorted(cells)
    forms = [form for form in FORMS if any(form in cells[f] for f in families)]
    width = 0.8 / max(1, len(forms))
    fig, ax = new_figure()
    for i, form in enumerate(forms):
        present = [j for j, f in enumerate(families) if cells[f].get(form, (0, 0))[1]]  # no bar where not run
        xs = [j + (i - (len(forms) - 1) / 2) * width for j in present]
        got = [cells[families[j]][form] for j in present]
        rates = [k / n for k, n in got]
        bounds = [wilson(k, n) for k, n in got]
        errors = [[r - lo for r, (lo, _) in zip(rates, bounds)], [hi - r for r, (_, hi) in zip(rates, bounds)]]
        ax.bar(xs, rates, width, yerr=errors, capsize=3, label=form)
    ax.set_xticks(range(len(families)), families)
    ax.set_ylabel("solved (95% Wilson interval)")
    ax.set_ylim(0, 1.05)
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=len(forms), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save_png(fig, out)


def main() -> None:
    args = parse()
    from skillgraft.agent.episodes import EpisodeJob, LocalEpisodes
    from skillgraft.agent.loadout import NOTHING, GivenSkill, make_loadout
    from skillgraft.agent.models.factory import make_model
    from skillgraft.agent.unstick import Unstick
    from skillgraft.evolve.intervals import rate_text
    from skillgraft.evolve.learn.roles import make_compiler
    from skillgraft.hypernet.tune import Tuning
    from skillgraft.settings import load_settings
    from skillgraft.skills.store import Store
    from skillgraft.skillworld.default_model import ensure_hypernet, ensure_policy
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    if not (args.store / "store.db").is_file():
        sys.exit(f"{args.store}: no store.db there (give the folder bench_learning --keep wrote, such as DIR/on)")
    store = Store.at(args.store, embedder=lambda: None)
    found = [r for r in recipes(store) if args.families is None or r[0] in args.families]
    if not found:
        sys.exit(f"{args.store}: no skill summarised from a stored run of a SkillWorld family"
                 + (f" among {', '.join(args.families)}" if args.families else ""))
    models = args.models or load_settings().models
    policy = args.policy or ensure_policy(models, show_progress=False)
    factory = partial(make_model, f"hf:{policy}")
    model = factory()
    compiler = None
    if args.tune_steps and args.skill_mode != "parametric":
        sys.exit("--tune-steps tunes compiled adapters: give --skill-mode parametric")
    if args.skill_mode == "parametric":
        compiler = make_compiler(args.hypernet or ensure_hypernet(models, show_progress=False), model,
                                 Tuning(args.tune_steps, args.tune_lr, args.tune_from) if args.tune_steps else None)
    cache = args.out / "compiled"  # texts outside the store compile once per checkpoint, here
    first = HELDOUT_START + 60_000 + 1_000 * args.seed  # a block no session, validation or forgetting task comes from
    unstick = Unstick() if args.unstick else None
    jobs = []
    for family, version, rewritten in found:
        name, stored = version.skill_name, version.text
        same = stored == rewritten
        print(f"\n--- {name} ({family}): " + ("the summariser writes it as stored" if same else "rewritten:"))
        if not same:
            print("".join(difflib.unified_diff(stored.splitlines(True), rewritten.splitlines(True), "stored", "rewritten", n=0)))
        # The stored text as the store's version where it is tuned on the version's run; else as a text.
        given = {"none": None, "stored": version if args.tune_steps else GivenSkill.of_text(name, stored),
                 "rewritten": GivenSkill.of_text(name, rewritten)}
        given = {form: skill for form, skill in given.items() if form in args.forms}
        for i in range(args.per_family):
            task = generate(family, first + i).task()
            for form, skill in given.items():
                loadout = NOTHING if skill is None else make_loadout(
                    store, model, [skill], args.skill_mode, compiler=compiler, cache=cache)
                path = args.keep / form / f"{task.id}.json" if args.keep else None
                jobs.append(EpisodeJob(task, loadout, path, tag=(family, form), unstick=unstick))
    runner = LocalEpisodes(factory, args.workers)
    solved, run = Counter(), Counter()
    try:
        for n, (job, result) in enumerate(runner.run_all(jobs), 1):
            run[job.tag] += 1
            solved[job.tag] += result.success
            print(f"  [{n}/{len(jobs)}] {job.task.id} {job.tag[1]}: {'solved' if result.success else 'failed'}", flush=True)
    finally:
        runner.close()
        store.close()
    how = "in context" if args.skill_mode == "context" else "compiled" + (
        f", the stored versions tuned on their runs ({args.tune_from}, {args.tune_steps} steps)" if args.tune_steps else "")
    print(f"\nsolved, {args.per_family} held-out tasks per family, greedy, texts {how}"
          + (", going back when stuck" if unstick else ""))
    print(f"{'family':<14}" + "".join(f"{form:>26}" for form in args.forms))
    for family in sorted({f for f, *_ in found}):
        print(f"{family:<14}" + "".join(f"{rate_text(solved[family, form], run[family, form]):>26}" for form in args.forms))
    print(f"{'all':<14}" + "".join(
        f"{rate_text(sum(solved[k] for k in run if k[1] == form), sum(run[k] for k in run if k[1] == form)):>26}"
        for form in args.forms))
    png = plot_forms({f: {form: (solved[f, form], run[f, form]) for form in args.forms} for f, *_ in found},
                     args.out / "recipes.png", f"each family's learned recipe {how}\n{args.per_family} held-out tasks per "
                     "family, greedy" + (", going back when stuck" if unstick else ""))
    print(f"bars: {png}")


if __name__ == "__main__":
    main()
