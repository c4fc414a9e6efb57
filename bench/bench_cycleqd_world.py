"""CycleQD's final merge against the experts it started from, and the paper's ablations.

    python -m bench.bench_cycleqd_world --mode synthetic [--generations 30] [--children 2] [--seeds 3]
    python -m bench.bench_cycleqd_world --mode skillworld [--policy PATH] \\
        --experts G1=ADAPTER_DIR --experts G2=... --experts G3=... \\
        --groups G1=family,family --groups G2=... --groups G3=... [--eval-tasks 4] [--sandbox docker]
        [--rows cycleqd,map-elites,...]
    python -m bench.bench_cycleqd_world --mode skillworld --compiled-experts --scoring replay \\
        --groups default=wrong_default --groups format=wrong_format --groups case=wrong_case_method \\
        --groups boolean=wrong_boolean --eval-tasks 3 --generations 6 --seeds 3

Each row is one CycleQD configuration run at the same budget (generations x children) from the
same experts; after the search the best elite of each archive is merged (softmax of qualities,
scaled by the config's merge scale that scores best on the search's tasks), grown as a greedy
soup of the elites on the search's tasks, and scored on the validation sets; the scaled merge
before the soup and the paper's unscaled merge (weights summing to 1) are shown beside it. Rows: the paper's default (cyclic quality, elite sampling,
SVD mutation), MAP-Elites with a fixed quality task, uniform sampling, and no / Gaussian /
rescaling-SVD mutation. Baselines measured side by side: each expert's average over tasks and
the best single elite (starting or found) among every row's elites, picked like the merge on the
search's tasks, and, as an upper bound, picked on the validation sets themselves; and beside each
row, its own search's best elite, picked on that search's tasks ("own best elite").

synthetic: the known fitness of evolve.cycleqd.evaluators (each task lives in its own modules;
an expert scores e^-1 on the others), averaged over --seeds worlds. skillworld: the default model (or --policy) with each adapter on held-out SkillWorld tasks of
each family group, scored in sandboxes (--scoring sandbox: the fraction of episodes solved) or by
edit replays (--scoring replay: the fraction of held-out expert conversations whose edit the
policy makes, teacher-forced; one forward pass each, skillworld/edit_replay.py). The experts are
adapter folders (`skillgraft world train-expert` trains one per group), or with
--compiled-experts each group's shipped skills compiled by the hypernetwork (--hypernet, default
the bundled one). Over --seeds searches, the experts and tasks stay and the search's seed moves.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.bench_policy_turns import held_out_records
from bench.ray_option import add_ray_option, ray_runner

# key (for --rows), label, configuration overrides
ABLATIONS = [
    ("cycleqd", "CycleQD (cyclic, elite, SVD)", {}),
    ("map-elites", "MAP-Elites, fixed quality", {"fixed_quality": "<first>"}),
    ("uniform", "uniform sampling", {"sampling": "uniform"}),
    ("no-mutation", "no mutation", {"mutation": "none"}),
    ("gaussian", "Gaussian mutation", {"mutation": "gaussian"}),
    ("svd-rescale", "SVD rescale mutation", {"mutation": "svd_rescale"}),
]


def _mean(scores: dict) -> float:
    return float(np.mean(list(scores.values())))


def _picked(elites: dict) -> float:
    """The validation score of the elite with the best mean on the search's tasks; elites tied there
    count by their mean. `elites`: adapter id -> (search mean, validation mean)."""
    top = max(search for search, _ in elites.values())
    return float(np.mean([val for search, val in elites.values() if search == top]))


def experiment(store, checkpoints: list, tasks: list[str], evaluator, validator, *, generations: int, children: int,
               seed: int, names: dict, rows: list[str] | None = None) -> dict:
    """Runs every row on one store and returns {row: figures} plus the baselines."""
    from skillgraft.evolve.cycleqd import CycleQDConfig, merge_and_promote, run_cycleqd
    from skillgraft.evolve.cycleqd.candidate import Candidate
    from skillgraft.evolve.cycleqd.final_merge import merge_best
    from skillgraft.evolve.cycleqd.persistence import RunRecorder, score_candidates
    from skillgraft.hypernet.lora import scale

    recorder = RunRecorder(store)
    like = recorder.info(checkpoints[0])

    def validate(adapter_ids: list) -> list[dict]:
        subjects = [Candidate.of(recorder.delta(i), adapter_id=i) for i in adapter_ids]
        return score_candidates(recorder, validator, subjects, tasks, like, namespace="validation")[0]

    expert_scores = dict(zip((names[c] for c in checkpoints), validate(checkpoints)))
    figures = {}
    elites: dict = {}  # adapter id -> (mean score on the search's tasks, mean validation score)
    for key, label, overrides in ABLATIONS:
        if rows and key not in rows:
            continue
        kw = dict(overrides)
        if kw.get("fixed_quality") == "<first>":
            kw["fixed_quality"] = tasks[0]
        config = CycleQDConfig(generations=generations, children_per_generation=children, seed=seed, **kw)
        t0 = time.perf_counter()

        def progress(stats, label=label, t0=t0):  # the search is slow on SkillWorld: say where it is
            print(f"[{label}] generation {stats.generation}/{generations}: QD score {stats.qd_score:.2f}, "
                  f"{stats.evaluations} new evaluations, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

        result = run_cycleqd(store, checkpoints, tasks, evaluator, config, on_generation=progress)
        outcome = merge_and_promote(store, result, evaluator, validator, promote=False)
        # The paper's merge (weights summing to 1) and the scaled merge the soup grew from, beside it.
        merged = merge_best(recorder, result, int(recorder.load_run(result.run_id)[2]["rank"]))[0]
        unscaled, scaled = score_candidates(recorder, validator, [Candidate.of(merged), Candidate.of(scale(merged, outcome.scale))],
                                            tasks, like, namespace="validation")[0]
        kept = [step for step in outcome.soup if step["kept"] is not None]
        last = result.history[-1]
        held = {e.adapter_id: _mean(e.scores) for a in result.archives.values() for e in a.elites.values()}
        fresh = sorted(set(held) - set(elites))
        for adapter_id, s in zip(fresh, validate(fresh)):
            elites[adapter_id] = (held[adapter_id], _mean(s))
        own = _picked({i: elites[i] for i in held})
        figures[label] = {"merge": _mean(outcome.candidate_scores), "merge_scores": outcome.candidate_scores,
                          "scale": outcome.scale, "unscaled": _mean(unscaled), "scaled": _mean(scaled),
                          "own_best": own,
                          "soup": f"{len(outcome.parts)} parts, {len(kept)} added"
                                  + (f", from a tie of {len(outcome.soup_start['tied'])}"
                                     f" ({'kept' if outcome.soup_start['from'] == 'tied elites' else 'lower'})"
                                     if "tied" in outcome.soup_start else ""),
                          "qd_score": last.qd_score, "coverage": last.coverage,
                          "best": {t: a.best_quality for t, a in last.archives.items()},
                          "seconds": time.perf_counter() - t0}
    recorder.close()
    # The best single elite of every row's search two ways: picked on the search's tasks as the merge's
    # scale is, and picked on validation itself, an upper bound that profits from the noise of the
    # very scores it is judged by. Each row also has its own search's best ("own_best").
    return {"experts": expert_scores, "best_single": _picked(elites),
            "best_single_oracle": max(val for _, val in elites.values()), "rows": figures}


def synthetic_trial(root: Path, seed: int, generations: int, children: int, rows: list[str] | None) -> dict:
    from skillgraft.evolve.cycleqd import synthetic_world
    from skillgraft.hypernet.peft_io import save_adapter
    from skillgraft.skills.store import Store

    tasks = ["group-a", "group-b", "group-c"]
    world = synthetic_world(tasks, seed=seed)
    store = Store(f"sqlite:///{root / 'store.db'}", root / "artifacts")
    ids, names = [], {}
    for task, delta in world.experts.items():
        folder = save_adapter(delta, root / "experts" / task, base_model_name="synthetic", fingerprint="synthetic")
        rank = max(lr.rank for lr in delta.values())
        rec = store.add_adapter(folder, "checkpoint", "synthetic", rank, float(rank), ["q_proj"], {"expert": task},
                                name=f"expert-{task}")
        ids.append(rec.id)
        names[rec.id] = f"expert {task}"
    try:
        return experiment(store, ids, tasks, world.evaluator, world.evaluator, generations=generations,
                          children=children, seed=seed, names=names, rows=rows)
    finally:
        store.close()


def _compiled_experts(root: Path, groups: dict[str, list[str]], policy: Path, hypernet: Path) -> dict[str, Path]:
    """Each group's shipped skills (one per family) compiled and joined into one adapter folder."""
    import random

    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.lora import concat
    from skillgraft.skillworld import library

    compiler = Compiler.load(hypernet, policy)
    rng = random.Random(0)
    folders = {}
    for group, families in groups.items():
        deltas = compiler.compile([library.pick(f, rng).body for f in families])
        folders[group] = compiler.save(concat(deltas), root / "experts" / group, {"expert": families})
    return folders


def pairs(values: list[str], flag: str) -> dict[str, str]:
    """NAME=VALUE options (--experts, --groups) as a dict; a malformed one stops the bench, named."""
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"{flag} {value!r}: expected NAME=VALUE")
        out[name] = rest
    return out


def replay_sets(groups: dict[str, list[str]], per_group: int, offset: int) -> dict[str, list[list[dict]]]:
    """Held-out expert conversations (no skill in context) for each group, per_group of them."""
    from skillgraft.skillworld.dataset import record_steps
    from skillgraft.skillworld.expert import messages

    sets = {}
    for group, families in groups.items():
        records = held_out_records(families, -(-per_group // len(families)), offset)[:per_group]
        sets[group] = [messages(record_steps(r, False)) for r in records]
    return sets


def skillworld_trials(root: Path, args) -> list[dict]:
    from skillgraft.agent.models.factory import make_model
    from skillgraft.evolve.cycleqd import AgentEvaluator
    from skillgraft.evolve.cycleqd.population import add_checkpoint
    from skillgraft.settings import load_settings
    from skillgraft.skills.store import Store
    from skillgraft.skillworld.default_model import ensure_hypernet, ensure_policy
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    groups = {g: families.split(",") for g, families in pairs(args.groups, "--groups").items()}
    models = load_settings().models
    policy = Path(args.policy) if args.policy else ensure_policy(models)
    if args.compiled_experts:
        experts = _compiled_experts(root, groups, policy, Path(args.hypernet) if args.hypernet else ensure_hypernet(models))
    else:
        experts = {g: Path(folder) for g, folder in pairs(args.experts, "--experts").items()}
    if set(groups) != set(experts) or len(groups) < 3:
        raise SystemExit("give --groups (three or more) and, unless --compiled-experts, --experts for the same names")
    store = Store(f"sqlite:///{root / 'store.db'}", root / "artifacts")
    ids, names = [], {}
    for group, folder in experts.items():
        rec = add_checkpoint(store, folder, {"expert": group}, f"expert-{group}")
        ids.append(rec.id)
        names[rec.id] = f"expert {group}"

    if args.scoring == "replay":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from skillgraft.skillworld.edit_replay import EditReplayEvaluator

        model = AutoModelForCausalLM.from_pretrained(policy).eval()
        tokenizer = AutoTokenizer.from_pretrained(policy)
        evaluator = EditReplayEvaluator(replay_sets(groups, args.eval_tasks, 500), model, tokenizer)
        validator = EditReplayEvaluator(replay_sets(groups, args.eval_tasks, 700), model, tokenizer)
        closing: list = []
    else:
        def tasks_for(offset: int) -> dict:
            return {g: [generate(fams[i % len(fams)], HELDOUT_START + offset + i).task() for i in range(args.eval_tasks)]
                    for g, fams in groups.items()}

        def factory():
            return make_model(f"hf:{policy}")

        runner = ray_runner(args.ray, factory, args.workers)
        evaluator = AgentEvaluator(tasks_for(0), factory, sandbox=args.sandbox, workers=args.workers, episodes=runner)
        validator = AgentEvaluator(tasks_for(10_000), factory, sandbox=args.sandbox, workers=args.workers, episodes=runner)
        closing = [evaluator, validator]
    try:
        return [experiment(store, ids, list(groups), evaluator, validator, generations=args.generations,
                           children=args.children, seed=args.seed + s, names=names, rows=args.rows)
                for s in range(args.seeds)]
    finally:
        for evaluator_ in closing:
            evaluator_.close()
        store.close()


def _ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}x" if baseline > 0 else ("same" if value == 0 else "above 0")


def report(trials: list[dict], budget: str) -> None:
    experts = {k: float(np.mean([_mean(t["experts"][k]) for t in trials])) for k in trials[0]["experts"]}
    best_expert = max(experts.values())
    best_single = float(np.mean([t["best_single"] for t in trials]))
    oracle = float(np.mean([t["best_single_oracle"] for t in trials]))
    print(f"budget: {budget}; figures are means over {len(trials)} trial(s); success = mean validation score over tasks")
    tasks = list(next(iter(trials[0]["experts"].values())))
    for name, v in experts.items():
        per_task = ", ".join(f"{t} {np.mean([tr['experts'][name][t] for tr in trials]):.2f}" for t in tasks)
        print(f"  {name:<34} {v:.3f}   ({per_task})")
    print(f"  {'best single elite, picked on search':<34} {best_single:.3f}")
    print(f"  {'best single elite, picked on valid.':<34} {oracle:.3f}   (picked by the scores it is judged by)")
    print(f"{'configuration':<34}{'merge avg':>10}{'vs best expert':>16}{'vs best single':>16}{'vs picked on valid.':>21}"
          f"{'own best elite':>16}{'QD score':>10}{'coverage':>10}{'scaled, no soup':>17}{'scale 1 merge':>15}"
          "  scales picked; soups")
    for label in trials[0]["rows"]:
        merge = float(np.mean([t["rows"][label]["merge"] for t in trials]))
        qd = float(np.mean([t["rows"][label]["qd_score"] for t in trials]))
        cov = float(np.mean([t["rows"][label]["coverage"] for t in trials]))
        unscaled = float(np.mean([t["rows"][label]["unscaled"] for t in trials]))
        scaled = float(np.mean([t["rows"][label]["scaled"] for t in trials]))
        own = float(np.mean([t["rows"][label]["own_best"] for t in trials]))
        scales = ",".join(f"{t['rows'][label]['scale']:g}" for t in trials)
        soups = "; ".join(t["rows"][label]["soup"] for t in trials)
        print(f"{label:<34}{merge:>10.3f}{_ratio(merge, best_expert):>16}{_ratio(merge, best_single):>16}"
              f"{_ratio(merge, oracle):>21}{own:>16.3f}{qd:>10.2f}{cov:>9.1%}{scaled:>17.3f}{unscaled:>15.3f}  {scales}; {soups}")
        print("    merge per task: " + ", ".join(
            f"{t} {np.mean([tr['rows'][label]['merge_scores'][t] for tr in trials]):.2f}" for t in tasks))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["synthetic", "skillworld"], default="synthetic")
    ap.add_argument("--generations", type=int, default=30)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=3,
                    help="synthetic worlds to average over; skillworld: searches (seeds) over the same experts")
    ap.add_argument("--policy", help="skillworld: folder of the trained policy (default: the bundled default model)")
    ap.add_argument("--experts", action="append", default=[], help="skillworld: GROUP=ADAPTER_DIR, one per group")
    ap.add_argument("--compiled-experts", action="store_true",
                    help="skillworld: each group's expert is its shipped skills compiled by --hypernet")
    ap.add_argument("--hypernet", help="skillworld: hypernetwork for --compiled-experts (default: the bundled one)")
    ap.add_argument("--scoring", choices=["sandbox", "replay"], default="sandbox",
                    help="skillworld: episodes in sandboxes, or teacher-forced edit replays (fast, a proxy)")
    ap.add_argument("--groups", action="append", default=[], help="skillworld: GROUP=family,family,...")
    ap.add_argument("--eval-tasks", type=int, default=4,
                    help="skillworld: held-out tasks (or conversations) per group, in each of the search and validation sets")
    ap.add_argument("--sandbox", default="docker")
    ap.add_argument("--workers", type=int, default=2)
    add_ray_option(ap)
    ap.add_argument("--rows", type=lambda v: v.split(","), default=None,
                    help="comma list of rows to run (default all): " + ", ".join(k for k, _, _ in ABLATIONS))
    args = ap.parse_args()
    unknown = set(args.rows or []) - {k for k, _, _ in ABLATIONS}
    if unknown:
        ap.error(f"unknown rows: {', '.join(sorted(unknown))}")
    if args.mode == "synthetic" or args.scoring == "sandbox":
        import torch

        torch.set_num_threads(1)  # small decompositions here (see bench_cycleqd_ops); replays want every core
    budget = f"{args.generations} generations x {args.children} children per configuration"
    with tempfile.TemporaryDirectory(prefix="bench-cycleqd-") as tmp:
        if args.mode == "synthetic":
            trials = [synthetic_trial(Path(tmp) / f"world{s}", args.seed + s, args.generations, args.children, args.rows)
                      for s in range(args.seeds)]
        else:
            trials = skillworld_trials(Path(tmp), args)
        report(trials, budget)


if __name__ == "__main__":
    main()
