"""Does learning across sessions help? SkillWorld held-out seeds, from a store with no learned skills.

Three learners run the very same sessions (same tasks, same seeds), each from its own empty store:
learning off (run and record only), learning on with the exact low-rank EMA of ΔW, and learning on
with the shortcut of averaging the LoRA factors A and B apart (the ablation). Printed: success
per session with 95% intervals, the last session's ratio on/off (goal: on ≥ 2× off and ≥ 60%), how
far the factor-averaged global adapter drifts from the exact EMA of the same updates, and (with
--forgetting-per-family) the seen families with and without the final global adapter.

    python -m bench.bench_learning --sessions 5 --tasks-per-session 6 [--forgetting-per-family 3]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from contextlib import nullcontext
from functools import partial
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ray_option import add_ray_option, ray_runner  # noqa: E402
from skillgraft.agent.episodes import LocalEpisodes  # noqa: E402
from skillgraft.agent.unstick import Unstick  # noqa: E402
from skillgraft.evolve.learn import EmaConfig, LearnConfig, Learner, OfflineSummariser  # noqa: E402
from skillgraft.evolve.learn.curve import SessionPoint, plot_curves  # noqa: E402
from skillgraft.evolve.learn.schedule import world_sessions, world_validation  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=5)
    p.add_argument("--tasks-per-session", type=int, default=6)
    p.add_argument("--families", nargs="+", default=["learning"],
                   help="families or groups (learning, seen, skill-only, drill, all); the learning families ship no "
                        "skill and are solved now and then without one: what online learning is for")
    p.add_argument("--skill-mode", default="parametric", choices=["context", "parametric", "both"])
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=None,
                   help="sample the policy's replies at this temperature in every condition (default: greedy)")
    p.add_argument("--practice", type=int, default=0,
                   help="learning on: run a task the session failed up to N more times, sampled at "
                        "--practice-temperature from other streams of draws, and learn from the first success "
                        "(the session's score stays that of its own runs)")
    p.add_argument("--practice-temperature", type=float, default=1.0)
    p.add_argument("--rewrite-confirmed", action="store_true",
                   help="summarise every success, also one that followed the skill's latest version while that "
                        "version solves at least half the session runs given it (kept as it is by default)")
    p.add_argument("--unstick", action="store_true",
                   help="every run, in every condition: when the model proposes a command it already ran on the same "
                        "files, the run goes back to before its last change and the reply there is drawn anew, "
                        "sampled (agent.unstick)")
    p.add_argument("--tune-steps", type=int, default=0,
                   help="parametric: tune each learned skill's compiled adapter this many steps on the run it was "
                        "summarised from (hypernet.tune; 0: the hypernetwork's adapter as it is)")
    p.add_argument("--tune-from", choices=["compiled", "fresh"], default="fresh",
                   help="tune the hypernetwork's adapter, or a fresh LoRA on its modules (the text then goes into no weight)")
    p.add_argument("--tune-lr", type=float, default=None, help="the tuning's learning rate (default: 5e-4 compiled, 5e-3 fresh)")
    p.add_argument("--tune-anchor-weight", type=float, default=0.0,
                   help="tuning: each step also keeps the model's replies on one of its own solved runs of "
                        "--anchors-per-family held-out tasks of each seen family, times this weight (hypernet.anchor)")
    p.add_argument("--tune-anchor-loss", choices=["kl", "margin"], default="kl")
    p.add_argument("--anchors-per-family", type=int, default=2)
    p.add_argument("--models", type=Path, default=None, help="models folder (default HOME/models); trained on first use")
    p.add_argument("--policy", type=Path, default=None, help="a trained policy folder instead of the default model")
    p.add_argument("--hypernet", type=Path, default=None, help="a hypernetwork checkpoint instead of the default one")
    p.add_argument("--conditions", nargs="+", default=["off", "on", "on-factors"])
    p.add_argument("--gate", action="store_true",
                   help="learning on: keep a new skill version (as runs get it: in context, or compiled beside the "
                        "global adapter) and a new global version only if each does not score below the current "
                        "one on --validation-per-family held-out tasks (of the family, for a skill)")
    p.add_argument("--validation-per-family", type=int, default=2)
    p.add_argument("--validation-seen-per-family", type=int, default=1,
                   help="with --gate: held-out tasks of each seen family added to the validation set, so that a "
                        "global version that costs the families the model already solves is not kept")
    p.add_argument("--workers", type=int, default=1, help="a session's tasks at once (with --ray: workers on the cluster)")
    p.add_argument("--forgetting-per-family", type=int, default=0,
                   help="after the sessions, run N held-out tasks of each seen family with no adapter and with the "
                        "final global adapter of learning on (parametric mode): does what was learned cost them anything?")
    add_ray_option(p)
    p.add_argument("--show-skills", action="store_true", help="print the skill texts learning on wrote, as they ended")
    p.add_argument("--out", type=Path, default=Path("bench/out"))
    p.add_argument("--keep", type=Path, default=None, metavar="DIR",
                   help="keep each condition's store (skills, versions, trajectories) in DIR/CONDITION instead of a "
                        "folder deleted at the end; list its runs with `skillgraft trajectories ls --store "
                        "sqlite:///DIR/CONDITION/store.db`")
    return p.parse_args()


def run_condition(label: str, plan, model, compiler, args, root: Path, validation=(), anchors=()) -> list:
    """One learner from an empty store through every session; returns the session reports."""
    from skillgraft.skills.store import Store

    home = root / label
    store = Store(f"sqlite:///{home / 'store.db'}", home / "artifacts")
    mode = "factors" if label.endswith("factors") else "exact"
    config = LearnConfig(learning=label != "off", skill_mode=args.skill_mode,
                         ema=EmaConfig(alpha=args.alpha, rank=args.rank, mode=mode), gate=args.gate,
                         practice=args.practice, practice_temperature=args.practice_temperature,
                         keep_confirmed=not args.rewrite_confirmed, unstick=Unstick() if args.unstick else None)
    learner = Learner(store, model, compiler, OfflineSummariser(test_command="python3 -m pytest -q"), config, home / "work",
                      validation=validation, episodes=args.episodes, anchors=anchors)
    reports = []
    for i, tasks in enumerate(plan, 1):
        t0 = time.monotonic()
        report = learner.run_session(tasks, label=label)
        reports.append(report)
        learned = sum(1 for o in report.outcomes if o.learned)
        practised = f", {report.solved_in_practice} solved in practice" if config.learning and args.practice else ""
        print(f"  [{label}] session {i}: {report.successes}/{len(report.outcomes)} solved, {learned} learned{practised}, "
              f"{time.monotonic() - t0:.0f}s", flush=True)
        for o in report.outcomes:
            if o.note:  # why a success taught nothing (a gate's refusal, an unchanged summary)
                print(f"    {o.task_id}: {o.note}", flush=True)
        for note in report.notes:  # the session's own (anchors, refinement, the periodic search)
            print(f"    {note}", flush=True)
    reports.append(store)  # kept for the drift measurement; popped by the caller
    return reports


def by_family(reports) -> dict[str, tuple[int, int]]:
    """Tasks solved and run, per family, over a condition's sessions."""
    solved, run = Counter(), Counter()
    for o in (o for report in reports for o in report.outcomes):
        run[o.family or "?"] += 1
        solved[o.family or "?"] += o.success
    return {fam: (solved[fam], run[fam]) for fam in sorted(run)}


def drift(store, compiler_rank: int, args) -> tuple[float, int, int]:
    """‖ΔW_factor-EMA − ΔW_exact-EMA‖ / ‖ΔW_exact-EMA‖ over the same sequence of compiled skills, with
    how many updates there were and how many distinct adapters they folded. Folding one adapter again
    and again, the two agree exactly (its A is every update's A), so only distinct ones tell them apart."""
    import torch

    from skillgraft.evolve.learn.global_adapter import combine
    from skillgraft.hypernet.lora import to_dense
    from skillgraft.hypernet.peft_io import load_adapter

    history = store.global_history()
    updates = [rec.provenance["combined"][-1]["adapter_id"] for rec in history if rec.provenance.get("combined")]
    counts = len(updates), len(set(updates))
    if len(updates) < 2:
        return float("nan"), *counts
    exact = EmaConfig(alpha=args.alpha, rank=args.rank, mode="exact")
    factors = EmaConfig(alpha=args.alpha, rank=args.rank, mode="factors")
    g_exact = g_fact = None
    for aid in updates:
        new = load_adapter(store.adapter_path(aid))[0]
        g_exact, _ = combine(g_exact, new, exact)
        g_fact, _ = combine(g_fact, new, factors)
    de, df = to_dense(g_exact), to_dense(g_fact)
    num = sum(float(torch.linalg.norm(df[m] - de[m]) ** 2) for m in de) ** 0.5
    den = sum(float(torch.linalg.norm(de[m]) ** 2) for m in de) ** 0.5
    return num / max(den, 1e-12), *counts


def forgetting(store, model, args, cache: Path) -> None:
    """Seen families with no adapter and with the store's final global adapter, the same held-out
    tasks side by side; prints both rates with intervals and the difference in points."""
    from skillgraft.agent.episodes import EpisodeJob
    from skillgraft.agent.loadout import NOTHING, SkillMode, make_loadout
    from skillgraft.evolve.intervals import rate_text
    from skillgraft.skillworld.families import SEEN
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    head = store.latest_global()
    if head is None:
        why = "the gate refused every update" if args.gate else "nothing was learned"
        print(f"forgetting: learning on made no global adapter ({why}), so a seen family's run gets what it got before "
              "learning: no adapter, and no learned skill (those name their own families)")
        return
    # What a run with no skill retrieved gets from that store: its global adapter alone.
    adapter = make_loadout(store, model, mode=SkillMode.parametric, use_global=True, cache=cache)
    first = HELDOUT_START + 50_000 + 1_000 * args.seed  # a block no session or validation task comes from
    tasks = [generate(f, first + i).task() for f in SEEN for i in range(args.forgetting_per_family)]
    jobs = [EpisodeJob(t, loadout, tag=label) for t in tasks for label, loadout in (("none", NOTHING), ("global", adapter))]
    runner = args.episodes or LocalEpisodes(lambda: model)  # the sessions' own runner where there is one
    solved = {"none": 0, "global": 0}
    for job, result in runner.run_all(jobs):
        solved[job.tag] += result.success
    if args.episodes is None:  # started here, so closed here
        runner.close()
    n = len(tasks)
    print(f"\nseen families, {n} held-out tasks, no adapter vs the final global adapter (v{head.version}) of learning on:")
    for label in ("none", "global"):
        print(f"  {label:>6}: {rate_text(solved[label], n)}")
    print(f"  global - none: {100 * (solved['global'] - solved['none']) / n:+.1f} points (goal: no more than 2 below)")


def main() -> None:
    args = parse()
    from skillgraft.agent.models.factory import make_model
    from skillgraft.evolve.learn.roles import make_compiler
    from skillgraft.hypernet.tune import Tuning
    from skillgraft.skillworld.default_model import ensure_hypernet, ensure_policy
    from skillgraft.skillworld.families import SEEN, resolve
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    from skillgraft.settings import load_settings

    models = args.models or load_settings().models
    t0 = time.monotonic()
    policy = args.policy or ensure_policy(models, show_progress=False)
    hypernet = None
    if args.skill_mode != "context":
        hypernet = args.hypernet or ensure_hypernet(models, show_progress=False)
    print(f"policy {policy}, hypernet {hypernet} ready in {time.monotonic() - t0:.0f}s", flush=True)
    model = make_model(f"hf:{policy}", temperature=args.temperature)
    tuning = Tuning(args.tune_steps, args.tune_lr, args.tune_from, anchor_weight=args.tune_anchor_weight,
                    anchor_loss=args.tune_anchor_loss) if args.tune_steps else None
    compiler = make_compiler(hypernet, model, tuning)
    factory = partial(make_model, f"hf:{policy}", temperature=args.temperature)
    args.episodes = ray_runner(args.ray, factory, args.workers) or (
        LocalEpisodes(factory, args.workers) if args.workers > 1 else None)
    families = resolve(args.families)
    # Held-out seeds only, and a block of them no other bench uses.
    plan = world_sessions(families, args.sessions, args.tasks_per_session, HELDOUT_START + 30_000 + 1_000 * args.seed,
                          lambda f, s: generate(f, s).task(), shuffle_seed=args.seed)
    # The gate's validation tasks: another block of held-out seeds, so they are never session tasks.
    first = HELDOUT_START + 40_000 + 1_000 * args.seed
    validation = world_validation(families, SEEN, first, args.validation_per_family, args.validation_seen_per_family,
                                  lambda f, s: generate(f, s).task()) if args.gate else []
    # The tuning's anchors: seen families, on seeds no session, validation or forgetting task comes from.
    first = HELDOUT_START + 45_000 + 1_000 * args.seed
    anchors = [generate(f, first + i).task() for f in SEEN for i in range(args.anchors_per_family)
               ] if tuning is not None and tuning.anchor_weight else []
    print(f"{args.sessions} sessions x {args.tasks_per_session} tasks from {', '.join(families)}; "
          f"skill mode {args.skill_mode}, alpha {args.alpha}, rank {args.rank}, "
          + (f"temperature {args.temperature}" if args.temperature else "greedy")
          + (f"; gate on {len(validation)} validation tasks" if args.gate else "")
          + (f"; learned skills' adapters tuned on their runs ({compiler.tuning.tag})" if args.tune_steps and compiler else "")
          + (f"; the adapters the global adapter folds keep the model's runs of {len(anchors)} anchor tasks "
             f"({args.tune_anchor_loss} weight {args.tune_anchor_weight:g})" if anchors else "")
          + (f"; learning on practises a failed task up to {args.practice} times at temperature {args.practice_temperature}"
             if args.practice else ""), flush=True)

    results, stores = {}, {}
    if args.keep is not None:
        if args.keep.exists() and any(args.keep.iterdir()):
            sys.exit(f"--keep {args.keep}: the folder is not empty; give a new one")
        args.keep.mkdir(parents=True, exist_ok=True)
    folder = nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory(prefix="bench-learning-")
    with folder as tmp:
        for label in args.conditions:
            print(f"condition {label}:", flush=True)
            reports = run_condition(label, plan, model, compiler, args, Path(tmp), validation, anchors)
            stores[label] = reports.pop()
            results[label] = reports
        drift_figure = drift(stores["on"], args.rank, args) if "on" in stores and compiler is not None else None

        points = {k: [SessionPoint(i + 1, r.successes, len(r.outcomes)) for i, r in enumerate(v)] for k, v in results.items()}
        print("\nsuccess per session (95% Wilson interval)")
        print("session  " + "  ".join(f"{k:>24}" for k in points))
        for i in range(args.sessions):
            cells = []
            for k in points:
                p = points[k][i]
                lo, hi = p.interval
                cells.append(f"{p.successes:>2}/{p.episodes:<2} {p.rate:5.0%} [{lo:4.0%},{hi:4.0%}]")
            print(f"{i + 1:>7}  " + "  ".join(f"{c:>24}" for c in cells))
        print("solved per family, all sessions: " + "; ".join(
            f"{k} " + ", ".join(f"{fam} {won}/{n}" for fam, (won, n) in by_family(v).items()) for k, v in results.items()))
        last = {k: v[-1].rate for k, v in points.items()}
        if "off" in last:
            for k in points:
                if k != "off":
                    if last["off"]:
                        ratio = f"{last[k] / last['off']:.2f}x"
                    else:
                        ratio = "undefined (off solved none)" if not last[k] else "unbounded (off solved none)"
                    print(f"last session, {k} / off: {ratio} (goal: >= 2x and >= 60%)  [{last[k]:.0%} vs {last['off']:.0%}]")
        if "on" in last and "on-factors" in last:
            print(f"last session, factor EMA vs exact EMA: {last['on-factors']:.0%} vs {last['on']:.0%}")
        if drift_figure is not None:
            rel, n, distinct = drift_figure
            if n < 2:  # with one update or none, every mode holds the same adapter
                print(f"factor-averaged global vs exact EMA: nothing to tell apart ({n} global update(s) committed)")
            else:
                print(f"factor-averaged global vs exact EMA of the same {n} updates ({distinct} distinct adapters): "
                      f"relative ΔW error {rel:.3f}")
        args.out.mkdir(parents=True, exist_ok=True)
        png = plot_curves({f"learning {k}": v for k, v in points.items()}, args.out / "learning_curve.png",
                          title=f"SkillWorld held-out ({', '.join(args.families)}), skill mode {args.skill_mode}"
                          + (f", temperature {args.temperature}" if args.temperature else "")
                          + (f", practice {args.practice} at {args.practice_temperature}" if args.practice else ""))
        print(f"curve: {png}")
        if args.show_skills and "on" in stores:
            for version in stores["on"].latest_versions():
                print(f"\n--- learning on wrote {version.skill_name} (v{version.number}):\n{version.text.strip()}")
        if args.forgetting_per_family and "on" in stores and args.skill_mode != "context":
            forgetting(stores["on"], model, args, Path(tmp) / "forgetting")
        for store in stores.values():
            store.close()


if __name__ == "__main__":
    main()
