"""`skillgraft evolve …`: searches over the agent's checkpoints."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from skillgraft.commands.common import (HomeOption, JsonOption, RayOption, RetriesOption, SandboxOption, StoreOption, console,
                                       job_exits, settings_from)
from skillgraft.sandbox.base import SandboxKind
from skillgraft.settings import DEFAULT_MODEL

app = typer.Typer(help="Evolve the agent's adapters: CycleQD quality-diversity search over stored checkpoints.",
                  no_args_is_help=True)


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
    mutation: str = typer.Option("svd", "--mutation", help="How children are mutated: svd, the paper's, by default; `skillgraft evolve mutations` lists all."),
    crossover: str = typer.Option("model", "--crossover", help="Crossover weights per 'model' or per 'module'."),
    fixed_quality: Optional[str] = typer.Option(None, "--fixed-quality", help="Ablation: keep this task as quality instead of cycling."),
    resume: Optional[int] = typer.Option(None, "--resume", help="Continue the stored run with this id (its tasks and checkpoints are reused)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m", help="Policy model that runs with each adapter (hf:<path> or a model folder name)."),
    sandbox: SandboxKind = SandboxOption,
    workers: int = typer.Option(2, "--workers", min=1, help="Evaluation episodes run in parallel (with --ray: workers on the cluster)."),
    ray: Optional[str] = RayOption,
    retries: int = RetriesOption,
    image: Optional[str] = typer.Option(None, "--image", help="Sandbox image (default: the backend's)."),
    merge: bool = typer.Option(True, "--merge/--no-merge", help="Build the final merge of each archive's best elite."),
    merge_scale: List[float] = typer.Option([], "--merge-scale", min=0.01, help="A scale of the final merge's weights (which sum to 1 at scale 1); repeatable. Each is scored on the search's tasks and the best kept. Default: 1, 1.5, 2 and 3."),
    soup_size: int = typer.Option(8, "--soup-size", min=0, help="Then grow the merge as a greedy soup: from the scaled merge, or the best single elite where it scores higher (elites tied for best: their even mean), up to this many elites, best first, each added at weight 0.5 or 1 and kept when the sum scores higher on the search's tasks (0: the scaled merge alone)."),
    promote: bool = typer.Option(True, "--promote/--no-promote", help="Commit the merge as the global adapter when it beats the current one on validation."),
    heatmaps: Optional[Path] = typer.Option(None, "--heatmaps", help="Folder for one heatmap PNG per archive (default: HOME/cycleqd/run<ID>)."),
    home: Optional[str] = HomeOption,
    store_url: Optional[str] = StoreOption,
    as_json: bool = JsonOption,
) -> None:
    """Run CycleQD over stored checkpoints: one MAP-Elites archive per task set, the quality task rotating
    every generation, children made by low-rank crossover and SVD mutation and scored by running the agent
    with them. Archives live in the store, so `--resume RUN_ID` continues a stopped run."""
    from skillgraft.jobs.cycleqd import SEARCH_OPTIONS, CycleQDOptions, run_search, search_config

    settings = settings_from(home, store_url)
    # Compared by name: typer may bring its own copy of click's ParameterSource enum.
    typed = frozenset(o for o in [*SEARCH_OPTIONS, "merge_scale", "soup_size"]
                      if getattr(ctx.get_parameter_source(o), "name", None) == "COMMANDLINE")
    with job_exits(), Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                               console=console, transient=True, disable=as_json) as progress:
        config = search_config(generations=generations, children_per_generation=children, seed=seed, bins=bins, rank=rank,
                               sampling=sampling, mutation=mutation, crossover_granularity=crossover, fixed_quality=fixed_quality,
                               soup_size=soup_size, **({"merge_scales": tuple(merge_scale)} if merge_scale else {}))
        options = CycleQDOptions(config, tasks, validation, population, resume, typed, model, sandbox, workers, image,
                                 merge, promote, heatmaps, ray=ray, retries=retries)
        bar = progress.add_task("CycleQD", total=generations + 1)

        headed: list[bool] = []

        def on_generation(stats, names: list[str]) -> None:
            progress.update(bar, completed=stats.generation + 1)
            if as_json:
                return
            if not headed:  # once, above the first row (generation 0, or the first one after a resume)
                headed.append(True)
                progress.console.print("[bold]" + " | ".join(["gen", "quality", "kept", "evals", "QD score", "coverage",
                                                              *[f"best {t}" for t in names]]) + "[/]")
            progress.console.print(" | ".join(_row_cells(stats, names)))

        outcome = run_search(settings, options, on_generation,
                             on_cluster=lambda tally: progress.update(bar, description=f"CycleQD · {tally.describe()}"))
    result, folder = outcome.result, outcome.folder
    if as_json:
        print(json.dumps({"run_id": result.run_id, "generations": [s.to_dict() for s in result.history],
                          "merge": outcome.merge.to_dict() if outcome.merge else None,
                          "heatmaps": [str(p) for p in outcome.heatmaps]},
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
    if outcome.merge is not None:
        verdict = "[green]promoted[/]" if outcome.merge.accepted else "[yellow]not promoted[/]"
        added = sum(step["kept"] is not None for step in outcome.merge.soup)
        start = outcome.merge.soup_start
        tie = (f", started from the even mean of {len(start['tied'])} tied elites" if start.get("from") == "tied elites" else "")
        console.print(f"final merge (adapter {outcome.merge.merge_adapter_id}, weights scaled by {outcome.merge.scale:g}, "
                      f"{added} of {len(outcome.merge.soup)} elites tried added by the soup{tie}): {verdict}: {outcome.merge.reason}")


@app.command("mutations")
def mutations() -> None:
    """List the mutations `evolve cycleqd --mutation NAME` can use, with what each does."""
    from skillgraft.evolve.cycleqd.mutations import MUTATIONS

    table = Table("mutation", "what it does", show_edge=False)
    for name, registered in MUTATIONS.items():
        table.add_row(name, registered.summary or "-")
    console.print(table)
