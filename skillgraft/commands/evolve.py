"""`skillgraft evolve …`: searches over the agent's checkpoints."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from skillgraft.commands.common import HomeOption, JsonOption, StoreOption, console, fail, settings_from
from skillgraft.settings import DEFAULT_MODEL, DEFAULT_SANDBOX

app = typer.Typer(help="Evolve the agent's adapters: CycleQD quality-diversity search over stored checkpoints.",
                  no_args_is_help=True)


def _task_sets(specs: list[str]) -> dict[str, list]:
    from evolve.cycleqd.task_sets import load_task_set, parse_task_spec

    sets: dict[str, list] = {}
    for spec in specs:
        name, path = parse_task_spec(spec)
        if name in sets:
            raise ValueError(f"task set {name!r} named twice")
        sets[name] = load_task_set(path)
    return sets


_SEARCH_OPTIONS = {"children": "children_per_generation", "seed": "seed", "bins": "bins", "rank": "rank",
                   "sampling": "sampling", "mutation": "mutation", "crossover": "crossover_granularity",
                   "fixed_quality": "fixed_quality"}


def _resumed_config(ctx: typer.Context, stored: dict, given):
    """The stored run's settings with the new generation count; a differing setting typed on the command line is an error."""
    from evolve.cycleqd import CycleQDConfig

    for option, key in _SEARCH_OPTIONS.items():
        # Compared by name: typer may bring its own copy of click's ParameterSource enum.
        typed = getattr(ctx.get_parameter_source(option), "name", None) == "COMMANDLINE"
        if typed and stored.get(key) != getattr(given, key):
            raise ValueError(f"--{option.replace('_', '-')} differs from the resumed run's ({stored.get(key)!r}); "
                             "only --generations may change")
    return CycleQDConfig.from_dict({**stored, "generations": given.generations})


def _absolute(spec: str) -> str:
    """NAME=PATH with PATH made absolute, so a resumed run finds the task sets from any folder."""
    from evolve.cycleqd.task_sets import parse_task_spec

    name, path = parse_task_spec(spec)
    return f"{name}={path.expanduser().resolve()}"


def _row_cells(stats, tasks: list[str]) -> list[str]:
    best = [f"{stats.archives[t].best_quality:.3f}" if stats.archives[t].best_quality is not None else "-" for t in tasks]
    return [str(stats.generation), stats.quality_task or "(start)", str(stats.insertions), str(stats.evaluations),
            f"{stats.qd_score:.3f}", f"{stats.coverage:.1%}", *best]


@app.command("cycleqd")
def cycleqd(
    ctx: typer.Context,
    generations: int = typer.Option(20, "--generations", "-g", min=0, help="Generations to run (in total, counting a resumed run's earlier ones)."),
    tasks: List[str] = typer.Option([], "--tasks", "-t", help="A task set as NAME=PATH (a task file or a folder of them); give two or more. Each set's tasks are its evaluation set."),
    validation: List[str] = typer.Option([], "--validation", help="Validation set as NAME=PATH, one per task set, for accepting the final merge (default: the evaluation sets)."),
    population: List[str] = typer.Option([], "--population", "-p", help="Starting checkpoints: an adapter id, 'global' (every global version), 'global:NAME', 'name:NAME' or 'kind:KIND'. Repeatable; default 'global'."),
    seed: int = typer.Option(0, "--seed", help="Seed of every random draw; the same seed repeats the run exactly."),
    children: int = typer.Option(2, "--children", min=1, help="Children per generation."),
    bins: int = typer.Option(15, "--bins", min=1, help="Bins per grid coordinate."),
    rank: Optional[int] = typer.Option(None, "--rank", min=1, help="Rank children are recompressed to (default: largest starting rank)."),
    sampling: str = typer.Option("elite", "--sampling", help="Parent sampling: elite (the paper's) or uniform."),
    mutation: str = typer.Option("svd", "--mutation", help="svd (along the quality expert's singular directions), svd_rescale, gaussian or none."),
    crossover: str = typer.Option("model", "--crossover", help="Crossover weights per 'model' or per 'module'."),
    fixed_quality: Optional[str] = typer.Option(None, "--fixed-quality", help="Ablation: keep this task as quality instead of cycling."),
    resume: Optional[int] = typer.Option(None, "--resume", help="Continue the stored run with this id (its tasks and checkpoints are reused)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m", help="Policy model that runs with each adapter (hf:<path> or a model folder name)."),
    sandbox: str = typer.Option(DEFAULT_SANDBOX, "--sandbox", help="Sandbox backend for evaluation runs."),
    workers: int = typer.Option(2, "--workers", min=1, help="Evaluation episodes run in parallel."),
    image: Optional[str] = typer.Option(None, "--image", help="Sandbox image (default: the backend's)."),
    merge: bool = typer.Option(True, "--merge/--no-merge", help="Build the final merge of each archive's best elite."),
    promote: bool = typer.Option(True, "--promote/--no-promote", help="Commit the merge as the global adapter when it beats the current one on validation."),
    heatmaps: Optional[Path] = typer.Option(None, "--heatmaps", help="Folder for one heatmap PNG per archive (default: HOME/cycleqd/run<ID>)."),
    home: Optional[str] = HomeOption,
    store_url: Optional[str] = StoreOption,
    as_json: bool = JsonOption,
) -> None:
    """Run CycleQD over stored checkpoints: one MAP-Elites archive per task set, the quality task rotating
    every generation, children made by low-rank crossover and SVD mutation and scored by running the agent
    with them. Archives live in the store, so `--resume RUN_ID` continues a stopped run."""
    from agent.models.base import AdapterModel, ModelError
    from agent.models.factory import make_model
    from agent.task import TaskError
    from evolve.cycleqd import AgentEvaluator, CycleQDConfig, merge_and_promote, run_cycleqd, write_heatmaps
    from evolve.cycleqd.population import select_checkpoints
    from skills.errors import StoreError
    from skills.store import Store

    settings = settings_from(home, store_url)
    store = Store(settings.store_url, settings.artifacts)
    try:
        config = CycleQDConfig(generations=generations, children_per_generation=children, seed=seed, bins=bins,
                               rank=rank, sampling=sampling, mutation=mutation, crossover_granularity=crossover,
                               fixed_quality=fixed_quality)
        meta = {"tasks": [_absolute(t) for t in tasks], "validation": [_absolute(t) for t in validation], "model": model}
        if resume is not None:
            # A resumed run keeps its search settings and reads its task sets from the store
            # unless they are given again.
            run_config = store.qd_run(resume).config
            config = _resumed_config(ctx, run_config, config)
            stored = run_config.get("meta", {})
            tasks = tasks or stored.get("tasks", [])
            validation = validation or stored.get("validation", [])
        sets = _task_sets(tasks)
        if len(sets) < 2:
            raise ValueError("give at least two task sets with --tasks NAME=PATH")
        checks = _task_sets(validation) if validation else sets
        if set(checks) != set(sets):
            raise ValueError(f"--validation must name the same task sets as --tasks ({', '.join(sets)})")
        checkpoints = [] if resume is not None else select_checkpoints(store, population)
    except (ValueError, TaskError, StoreError) as exc:
        store.close()
        raise fail(str(exc), 2)

    try:
        # Built once here so a wrong model name fails before any search work; the first worker reuses it.
        spare = [make_model(model, models_dir=settings.models)]
    except ModelError as exc:
        store.close()
        raise fail(str(exc), 2)
    if not isinstance(spare[0], AdapterModel):
        store.close()
        raise fail(f"model {model!r} cannot take LoRA adapters; CycleQD scores adapters, so give hf:<path> or a model folder", 2)

    def factory():
        return spare.pop() if spare else make_model(model, models_dir=settings.models)

    evaluator = AgentEvaluator(task_sets=sets, model_factory=factory, sandbox=sandbox, workers=workers, image=image)
    validator = evaluator if not validation else AgentEvaluator(task_sets=checks, model_factory=factory, sandbox=sandbox,
                                                                workers=workers, image=image)
    names = list(sets)
    header = " | ".join(["gen", "quality", "kept", "evals", "QD score", "coverage", *[f"best {t}" for t in names]])
    try:
        with Progress(TextColumn("[bold]CycleQD"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True, disable=as_json) as progress:
            bar = progress.add_task("generations", total=generations + 1)
            if not as_json:
                progress.console.print(f"[bold]{header}[/]")

            def on_generation(stats) -> None:
                progress.update(bar, completed=stats.generation + 1)
                if not as_json:
                    progress.console.print(" | ".join(_row_cells(stats, names)))

            result = run_cycleqd(store, checkpoints, names, evaluator, config, run_id=resume,
                                 on_generation=on_generation, meta=meta)
            outcome = merge_and_promote(store, result, validator, promote=promote) if merge else None
        folder = heatmaps or settings.home / "cycleqd" / f"run{result.run_id}"
        pngs = write_heatmaps(result.archives, folder, prefix=f"run{result.run_id}")
    except (ValueError, StoreError, TaskError, ModelError) as exc:
        raise fail(str(exc), 1)
    finally:
        evaluator.close()
        if validator is not evaluator:
            validator.close()
        store.close()

    if as_json:
        print(json.dumps({"run_id": result.run_id, "generations": [s.to_dict() for s in result.history],
                          "merge": outcome.to_dict() if outcome else None, "heatmaps": [str(p) for p in pngs]},
                         default=str))
        return
    table = Table("archive", "elites", "coverage", "QD score", "best quality", "best adapter",
                  title=f"CycleQD run {result.run_id} after {result.generation} generations", show_edge=False)
    for task, archive in result.archives.items():
        st = archive.stats()
        table.add_row(task, str(st.elites), f"{st.coverage:.1%}", f"{st.qd_score:.3f}",
                      "-" if st.best_quality is None else f"{st.best_quality:.3f}", str(st.best_adapter_id or "-"))
    console.print(table)
    console.print(f"heatmaps in {folder}")
    if outcome is not None:
        verdict = "[green]promoted[/]" if outcome.accepted else "[yellow]not promoted[/]"
        console.print(f"final merge (adapter {outcome.merge_adapter_id}): {verdict}: {outcome.reason}")
