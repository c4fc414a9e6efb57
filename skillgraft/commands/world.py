"""`skillgraft world …`: SkillWorld's tasks, expert, default policy and evaluation."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from skillgraft.commands.common import (HomeOption, JsonOption, RayOption, RetriesOption, SandboxOption, StoreOption,
                                       console, err_console, fail, job_exits, settings_from)
from skillgraft.sandbox.base import SandboxKind

app = typer.Typer(help="SkillWorld: generated repo tasks in bug families, their skills, the expert, and the default model's policy.",
                  no_args_is_help=True)

FamiliesOption = typer.Option(None, "--families", "-f", help="Families or groups (seen, skill-only, drill, learning, all); repeatable. Default: all (seen and skill-only; drills are for training, learning families for `skillgraft learn`).")


def _families(names: Optional[list[str]]) -> list[str]:
    from skillgraft.skillworld.families import resolve

    try:
        return resolve(names)
    except KeyError as exc:
        raise fail(str(exc.args[0]), 2)


def _seeds(spec: str) -> list[int]:
    try:
        if ":" in spec:
            lo, hi = spec.split(":")
            return list(range(int(lo), int(hi)))
        return [int(s) for s in spec.split(",")]
    except ValueError:
        raise fail(f"--seeds {spec!r}: give START:STOP or a comma list of integers", 2)


@app.command()
def generate(out: Path = typer.Argument(..., help="Folder to write task files into."),
             families: Optional[list[str]] = FamiliesOption,
             seeds: str = typer.Option("1000000:1000003", help="START:STOP or a comma list (held-out seeds start at 1000000)."),
             json_out: bool = JsonOption):
    """Write generated tasks as YAML files that `skillgraft run` accepts."""
    from skillgraft.skillworld.generate import generate as make

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for family in _families(families):
        for seed in _seeds(seeds):
            wt = make(family, seed)
            path = out / f"{wt.id}.yaml"
            path.write_text(yaml.safe_dump(wt.task_dict(), sort_keys=False))
            written.append(str(path))
    if json_out:
        console.print_json(json.dumps(written))
    else:
        console.print(f"wrote {len(written)} task files to {out}")


@app.command()
def expert(families: Optional[list[str]] = FamiliesOption,
           seeds: str = typer.Option("1000000:1000002", help="START:STOP or a comma list."),
           sandbox: SandboxKind = SandboxOption,
           workers: int = typer.Option(2, min=1, help="Episodes at once."),
           out: Optional[Path] = typer.Option(None, help="Folder for the expert's trajectory files."),
           json_out: bool = JsonOption):
    """Run the scripted expert on tasks through the agent loop and check that it solves them."""
    from concurrent.futures import ThreadPoolExecutor

    from skillgraft.agent.runner import run_task
    from skillgraft.skillworld.expert import ExpertModel
    from skillgraft.skillworld.generate import generate as make

    tasks = [make(f, s) for f in _families(families) for s in _seeds(seeds)]
    if out:
        out.mkdir(parents=True, exist_ok=True)

    def one(wt):
        path = out / f"{wt.id}.json" if out else None
        return wt, run_task(wt.task(), ExpertModel(wt), sandbox=sandbox.value, trajectory_path=path)

    rows = []
    with _bar() as bar, ThreadPoolExecutor(max_workers=workers) as pool:
        job = bar.add_task("expert", total=len(tasks))
        for wt, res in pool.map(one, tasks):
            rows.append({"task": wt.id, "family": wt.family, "success": res.success, "steps": res.steps,
                         "exit_status": res.exit_status})
            bar.advance(job)
    solved = sum(r["success"] for r in rows)
    if json_out:
        console.print_json(json.dumps(rows))
    else:
        console.print(f"expert solved {solved}/{len(rows)}")
    if solved != len(rows):
        raise typer.Exit(1)


@app.command("train-policy")
def train_policy_cmd(home: Optional[str] = HomeOption, store: Optional[str] = StoreOption,
                     out: Optional[Path] = typer.Option(None, help="Adapter folder to write (default: HOME/models/skillworld-policy, which the default model then uses instead of the shipped adapter).")):
    """Rebuild the default model's policy adapter from nothing: the expert's episodes, then behaviour
    cloning into a LoRA on SmolLM2-135M-Instruct (fixed seed; about an hour on two cores)."""
    from skillgraft.skillworld.default_model import POLICY_ADAPTER, train_policy

    settings = settings_from(home, store)
    report = train_policy(settings.models, out)
    where = out or settings.models / POLICY_ADAPTER
    console.print(f"policy adapter at {where}: {report['conversations']} conversations, {report['tokens']:,} tokens, "
                  f"loss {report['first_loss']:.3f} → {report['final_loss']:.3f} in {report['seconds']:.0f} s")


@app.command("pin-recipes")
def pin_recipes_cmd(home: Optional[str] = HomeOption, store: Optional[str] = StoreOption,
                    out: Optional[Path] = typer.Option(None, help="File to write (default: the one the default hypernetwork's recipe reads, skillworld/hypernet_recipes.json).")):
    """Rewrite the recipes the default hypernetwork trains on from the expert's runs with today's
    offline summariser. They are pinned so that a rebuild sees the texts the shipped hypernetwork saw;
    new ones change its recipe's digest, so the hypernetwork is refused until `skillgraft hypernet
    train --recipe skillworld` rebuilds it."""
    from skillgraft.skillworld.default_model import training_records
    from skillgraft.skillworld.skill_texts import PINNED, pin_recipes, pinned_recipes

    target = out or PINNED
    before = pinned_recipes(target)
    recipes = pin_recipes(training_records(settings_from(home, store).models), target)
    changed = sum(before.get(k) != v for k, v in recipes.items())
    console.print(f"{len(recipes)} recipes pinned in {target}; {changed} differ from what it held")


@app.command("train-expert")
def train_expert_cmd(out: Path = typer.Argument(..., help="Folder to write the adapter into."),
                     families: Optional[list[str]] = FamiliesOption,
                     policy: Optional[Path] = typer.Option(None, help="Policy model folder (default: the bundled skillworld model)."),
                     episodes: int = typer.Option(40, min=1, help="Expert episodes per family (training seeds)."),
                     steps: int = typer.Option(150, min=1, help="Training steps."),
                     rank: int = typer.Option(8, min=1, help="LoRA rank."),
                     seed: int = typer.Option(0, help="Seed of the data order and the initial adapter."),
                     replay: int = typer.Option(0, min=0, help="Also train on this many episodes per seen family (not named in --families), so the expert leaves them alone: an adapter that writes its own edit everywhere breaks any merge it enters."),
                     min_scale: float = typer.Option(1.0, min=0.01, max=1.0, help="Apply the adapter at a scale drawn from [MIN_SCALE, 1] at each step, so that a weighted average with other experts still works (1: off)."),
                     anchor: int = typer.Option(0, min=0, help="Also keep the policy's own next-token distributions (a KL term, or see --anchor-loss) over the edit replies of this many episodes per skill-only family not named in --families: the families other experts are for, which a merge should see moved by their expert only."),
                     anchor_weight: float = typer.Option(0.1, min=0.0, help="Weight of that term against the behaviour-cloning loss (at 1, a 70-step case expert kept the other families and learnt none of its own edits; at 0.1 it learnt them)."),
                     anchor_loss: str = typer.Option("kl", help="What that term keeps: kl (the policy's whole next-token distribution) or margin (the log-probabilities of its 8 top tokens at each position, so a token it already prefers is not made surer either; stricter: at 0.1 the format expert learnt its edit with it, the case and default experts did not)."),
                     register: bool = typer.Option(False, "--register", help="Also add it to the store as a checkpoint adapter."),
                     home: Optional[str] = HomeOption, store: Optional[str] = StoreOption):
    """Train a LoRA expert on the policy for some families (a CycleQD starting checkpoint)."""
    from skillgraft.skillworld.dataset import build_episodes
    from skillgraft.skillworld.default_model import ensure_policy, episode_cache
    from skillgraft.skillworld.families import SEEN, SKILL_ONLY
    from skillgraft.hypernet.anchor import ANCHOR_LOSSES
    from skillgraft.skillworld.policy.lora_expert import train_lora_expert

    if anchor_loss not in ANCHOR_LOSSES:
        raise fail(f"--anchor-loss {anchor_loss}: must be one of {', '.join(ANCHOR_LOSSES)}", 2)
    settings = settings_from(home, store)
    fams = _families(families)
    policy_dir = policy or ensure_policy(settings.models)
    if not (Path(policy_dir) / "config.json").is_file():
        raise fail(f"--policy {policy_dir}: no transformers model there", 2)
    with _bar() as bar:
        task = bar.add_task("expert episodes", total=None)
        cache = episode_cache(settings.models, "experts")

        def shown(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        records = build_episodes(fams, episodes, cache, progress=shown)
        others = [f for f in SEEN if f not in fams]
        replayed = build_episodes(others, replay, cache, progress=shown) if replay else []
        strangers = [f for f in SKILL_ONLY if f not in fams]
        anchors = build_episodes(strangers, anchor, cache, progress=shown) if anchor else []
    report = train_lora_expert(Path(policy_dir), records, out, rank=rank, steps=steps, seed=seed, replay=replayed,
                               min_scale=min_scale, anchors=anchors, anchor_weight=anchor_weight,
                               anchor_loss=anchor_loss)
    console.print(f"expert for {', '.join(report['families'])} at {out}: rank {rank}, loss {report['first_loss']:.3f} "
                  f"→ {report['final_loss']:.3f} on {report['episodes']} episodes, {report['replay']} replayed, "
                  f"{report['anchors']} anchored")
    if register:
        from skillgraft.evolve.cycleqd.population import add_checkpoint
        from skillgraft.skills.store import Store

        record = add_checkpoint(Store(settings.store_url, settings.artifacts), out,
                                {"expert": report["families"], "steps": steps}, f"expert-{'+'.join(report['families'])}"[:120])
        console.print(f"registered as adapter {record.id}")


@app.command("eval")
def eval_cmd(model: str = typer.Option("skillworld", help="expert, skillworld (the default model), a bundled base such as smollm2-135m, or hf:<folder>."),
             condition: list[str] = typer.Option(["none"], help="none, context, parametric or both; repeatable."),
             families: Optional[list[str]] = FamiliesOption,
             episodes: int = typer.Option(10, min=1, help="Held-out episodes per family and condition."),
             workers: int = typer.Option(2, min=1, help="Episodes at once, each in its own sandbox (with --ray: workers on the cluster)."),
             hypernet: Optional[Path] = typer.Option(None, help="Hypernetwork checkpoint (default: the bundled one)."),
             sandbox: SandboxKind = SandboxOption,
             ray: Optional[str] = RayOption, retries: int = RetriesOption,
             home: Optional[str] = HomeOption, store: Optional[str] = StoreOption, json_out: bool = JsonOption):
    """Success rate with 95% Wilson interval and mean steps, per family group and condition; stored as scores."""
    from skillgraft.jobs.cluster import ClusterOptions, cluster_episodes, join_cluster
    from skillgraft.agent.episodes import ThreadModels
    from skillgraft.skillworld.evaluate import CONDITIONS, cells, run_eval, world_compiler

    bad = [c for c in condition if c not in CONDITIONS]
    if bad:
        raise fail(f"unknown condition {bad[0]!r}; choose from {', '.join(CONDITIONS)}", 2)
    settings = settings_from(home, store)
    fams = _families(families)
    cluster = ClusterOptions(ray, workers, retries, sandbox)
    with job_exits():
        join_cluster(settings, cluster)
    factory, policy = _model_factory(model, settings.models)
    compiler = None
    if any(c in ("parametric", "both") for c in condition):
        if policy is None:
            raise fail("parametric conditions need a local policy (skillworld or hf:<folder>)", 2)
        if hypernet is None:
            from skillgraft.skillworld.default_model import ensure_hypernet

            hypernet = ensure_hypernet(settings.models)
        compiler = world_compiler(hypernet, policy)
    results = []
    shown: list = []  # the current condition's bar and label, for the cluster's counts

    def counted(tally) -> None:
        if shown:
            bar.update(shown[0], description=f"{shown[1]} · {tally.describe()}")

    with job_exits(), cluster_episodes(settings, cluster, model, counted) as runner, _bar() as bar:
        for cond in condition:
            job = bar.add_task(f"{model} · {cond}", total=episodes * len(fams))
            shown[:] = [job, f"{model} · {cond}"]
            results += run_eval(factory if model == "expert" else ThreadModels(factory), cond, fams, episodes,
                                workers=workers, compiler=compiler, sandbox=sandbox.value,
                                on_result=lambda r, j=job: bar.advance(j), runner=runner)
    table = cells(results, "group") + cells(results, "family")
    _store_scores(settings, model, condition, table, episodes)
    rows = [{"name": c.name, "condition": c.condition, "success": c.rate, "ci95": list(c.interval),
             "episodes": c.episodes, "mean_steps": c.mean_steps} for c in table]
    if json_out:
        console.print_json(json.dumps(rows))
        return
    view = Table(title=f"SkillWorld · {model}")
    for col in ("families", "condition", "success", "95% CI", "episodes", "mean steps"):
        view.add_column(col)
    for r in rows:
        view.add_row(r["name"], r["condition"], f"{r['success']:.0%}", f"{r['ci95'][0]:.0%}–{r['ci95'][1]:.0%}",
                     str(r["episodes"]), f"{r['mean_steps']:.1f}")
    console.print(view)


def _model_factory(name: str, models_dir: Path):
    """(task -> model, local policy folder or None)."""
    if name == "expert":
        from skillgraft.skillworld.expert import ExpertModel

        return ExpertModel, None
    from skillgraft.agent.models.factory import make_model

    if name == "skillworld":
        from skillgraft.skillworld.default_model import ensure_policy

        folder = ensure_policy(models_dir)
        return (lambda: make_model(f"hf:{folder}")), folder
    from skillgraft.agent.models.bases import BASES, ensure_base

    if name in BASES:
        folder = ensure_base(name, models_dir)
        return (lambda: make_model(f"hf:{folder}")), folder
    folder = Path(name[3:]) if name.startswith("hf:") else None
    return (lambda: make_model(name, models_dir=models_dir)), folder


def _store_scores(settings, model: str, conditions: list[str], table, episodes: int) -> None:
    """One eval session; each cell a score row whose subject is the session's checkpoint (the
    model named in the session's config)."""
    from skillgraft.skills.store import Store

    st = Store(settings.store_url, settings.artifacts)
    session = st.start_session("world-eval", {"model": model, "conditions": conditions, "episodes": episodes})
    sid = session.id if hasattr(session, "id") else int(session)
    for c in table:
        st.add_score("checkpoint", sid, c.name, c.rate, c.episodes, condition=c.condition, session_id=sid)
    st.end_session(sid, {"cells": len(table)})


def _bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console)  # stderr, so that --json output stays clean
