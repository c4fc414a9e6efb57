"""CycleQD over the store's checkpoints: `skillgraft evolve cycleqd`.

    outcome = run_search(settings, CycleQDOptions(tasks=["a=tasks/a", "b=tasks/b"], generations=5))
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillgraft.agent.models.base import AdapterModel, Model, ModelError
from skillgraft.agent.task import Task, TaskError
from skillgraft.jobs.errors import BAD_INPUT, FAILED, JobError
from skillgraft.sandbox.base import SandboxKind
from skillgraft.settings import DEFAULT_MODEL, Settings
from skillgraft.skills.errors import StoreError

if TYPE_CHECKING:
    from skillgraft.agent.cluster.pool import Tally
    from skillgraft.agent.episodes import EpisodeRunner
    from skillgraft.evolve.cycleqd import CycleQDConfig
    from skillgraft.evolve.cycleqd.final_merge import MergeOutcome
    from skillgraft.evolve.cycleqd.search import CycleQDResult, GenerationStats

# The search's own settings: the option name on the command line → the key in CycleQDConfig.
SEARCH_OPTIONS = {"children": "children_per_generation", "seed": "seed", "bins": "bins", "rank": "rank",
                  "sampling": "sampling", "mutation": "mutation", "crossover": "crossover_granularity",
                  "fixed_quality": "fixed_quality"}


@dataclass(frozen=True)
class CycleQDOptions:
    config: CycleQDConfig
    tasks: Sequence[str] = ()  # NAME=PATH, one per task set
    validation: Sequence[str] = ()
    population: Sequence[str] = ()
    resume: int | None = None
    typed: frozenset[str] = frozenset()  # options given on the command line: SEARCH_OPTIONS (checked against a resumed run), merge_scale, soup_size
    model: str = DEFAULT_MODEL
    sandbox: SandboxKind = SandboxKind.docker
    workers: int = 2
    image: str | None = None
    merge: bool = True
    promote: bool = True
    heatmaps: Path | None = None
    ray: str | None = None  # a Ray cluster's address: each generation's evaluations run on its workers
    retries: int = 2


@dataclass
class SearchOutcome:
    result: CycleQDResult
    merge: MergeOutcome | None
    heatmaps: list[Path]
    folder: Path
    task_names: list[str] = field(default_factory=list)


def search_config(**settings: Any) -> CycleQDConfig:
    """The search's settings as typed; a value the search does not know is bad input."""
    from skillgraft.evolve.cycleqd import CycleQDConfig

    try:
        return CycleQDConfig(**settings)
    except ValueError as exc:
        raise JobError(str(exc), BAD_INPUT) from exc


def _task_sets(specs: Sequence[str]) -> dict[str, list[Task]]:
    from skillgraft.evolve.cycleqd.task_sets import load_task_set, parse_task_spec

    sets: dict[str, list[Task]] = {}
    for spec in specs:
        name, path = parse_task_spec(spec)
        if name in sets:
            raise ValueError(f"task set {name!r} named twice")
        sets[name] = load_task_set(path)
    return sets


def _absolute(spec: str) -> str:
    """NAME=PATH with PATH made absolute, so a resumed run finds the task sets from any folder."""
    from skillgraft.evolve.cycleqd.task_sets import parse_task_spec

    name, path = parse_task_spec(spec)
    return f"{name}={path.expanduser().resolve()}"


def _resumed_config(stored: Mapping[str, Any], given: CycleQDConfig, typed: frozenset[str]) -> CycleQDConfig:
    """The stored run's settings with the new generation count; a differing setting typed on the command line is an error."""
    from skillgraft.evolve.cycleqd import CycleQDConfig

    for option, key in SEARCH_OPTIONS.items():
        if option in typed and stored.get(key) != getattr(given, key):
            raise ValueError(f"--{option.replace('_', '-')} differs from the resumed run's ({stored.get(key)!r}); "
                             "only --generations may change")
    # The merge scales and the soup act after the search, so a resume may change them.
    later = {**({"merge_scales": given.merge_scales} if "merge_scale" in typed else {}),
             **({"soup_size": given.soup_size} if "soup_size" in typed else {})}
    return CycleQDConfig.from_dict({**stored, "generations": given.generations, **later})


def run_search(settings: Settings, options: CycleQDOptions,
               on_generation: Callable[[GenerationStats, list[str]], None] = lambda stats, names: None,
               on_cluster: Callable[[Tally], None] = lambda tally: None) -> SearchOutcome:
    """Runs (or resumes) the search, builds and maybe promotes the final merge, draws the heatmaps."""
    from skillgraft.jobs.cluster import ClusterOptions, cluster_episodes

    cluster = ClusterOptions(options.ray, options.workers, options.retries, options.sandbox, options.image)
    with cluster_episodes(settings, cluster, options.model, on_cluster) as episodes:
        return _search(settings, options, on_generation, episodes)


def _search(settings: Settings, options: CycleQDOptions, on_generation: Callable[[GenerationStats, list[str]], None],
            episodes: EpisodeRunner | None) -> SearchOutcome:
    from skillgraft.evolve.cycleqd import AgentEvaluator, merge_and_promote, run_cycleqd, write_heatmaps
    from skillgraft.evolve.cycleqd.population import select_checkpoints
    from skillgraft.model_defaults import load_model
    from skillgraft.skills.store import Store

    store = Store(settings.store_url, settings.artifacts)
    try:
        config, tasks, validation = options.config, list(options.tasks), list(options.validation)
        meta = {"tasks": [_absolute(t) for t in tasks], "validation": [_absolute(t) for t in validation], "model": options.model}
        if options.resume is not None:
            # A resumed run keeps its search settings and reads its task sets from the store
            # unless they are given again.
            run_config = store.qd_run(options.resume).config
            config = _resumed_config(run_config, config, options.typed)
            stored = run_config.get("meta", {})
            tasks = tasks or stored.get("tasks", [])
            validation = validation or stored.get("validation", [])
        sets = _task_sets(tasks)
        if len(sets) < 2:
            raise ValueError("give at least two task sets with --tasks NAME=PATH")
        checks = _task_sets(validation) if validation else sets
        if set(checks) != set(sets):
            raise ValueError(f"--validation must name the same task sets as --tasks ({', '.join(sets)})")
        checkpoints = [] if options.resume is not None else select_checkpoints(store, list(options.population))
        # Made once here so a wrong model name fails before any search work; the first worker reuses it.
        spare: list[Model] = [load_model(settings, options.model)]
    except (ValueError, TaskError, StoreError, ModelError) as exc:
        store.close()
        raise JobError(str(exc), BAD_INPUT) from exc
    if not isinstance(spare[0], AdapterModel):
        store.close()
        raise JobError(f"model {options.model!r} cannot take LoRA adapters; CycleQD scores adapters, "
                       "so give hf:<path> or a model folder", BAD_INPUT)

    def factory() -> Model:
        return spare.pop() if spare else load_model(settings, options.model, progress=False)

    def evaluator_for(task_sets: Mapping[str, Sequence[Task]]) -> AgentEvaluator:
        return AgentEvaluator(task_sets=task_sets, model_factory=factory, sandbox=options.sandbox.value,
                              workers=options.workers, image=options.image, episodes=episodes)

    evaluator = evaluator_for(sets)
    validator = evaluator if not validation else evaluator_for(checks)
    names = list(sets)
    try:
        result = run_cycleqd(store, checkpoints, names, evaluator, config, run_id=options.resume,
                             on_generation=lambda stats: on_generation(stats, names), meta=meta)
        merged = merge_and_promote(store, result, evaluator, validator, promote=options.promote) if options.merge else None
        folder = options.heatmaps or settings.home / "cycleqd" / f"run{result.run_id}"
        pngs = write_heatmaps(result.archives, folder, prefix=f"run{result.run_id}")
    except (ValueError, StoreError, TaskError, ModelError) as exc:
        raise JobError(str(exc), FAILED) from exc
    finally:
        evaluator.close()
        if validator is not evaluator:
            validator.close()
        store.close()
    return SearchOutcome(result, merged, pngs, folder, names)
