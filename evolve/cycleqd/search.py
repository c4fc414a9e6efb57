"""The CycleQD loop: archives per task, the quality task rotating each generation.

A generation: take the quality task's archive, draw two parents per child by elite sampling,
cross them over and mutate in low rank, score every child on every task (cache first), and
offer each child to every archive. The store holds the run, the archive cells and the kept
children, and a run resumes from it: every random draw is seeded by (seed, generation, child),
so a resumed run makes exactly the children an uninterrupted one would.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from skillgraft.evolve.cycleqd.archive import Archive, ArchiveStats, Binning, Elite, distinct_elites, make_archives
from skillgraft.evolve.cycleqd.candidate import Candidate
from skillgraft.evolve.cycleqd.config import CycleQDConfig
from skillgraft.evolve.cycleqd.mutations import make_mutator, uses_expert
from skillgraft.evolve.cycleqd.operators import crossover
from skillgraft.evolve.cycleqd.persistence import RunRecorder, score_candidates
from skillgraft.evolve.cycleqd.sampling import make_sampler
from skillgraft.hypernet.lora import svd

if TYPE_CHECKING:
    from skillgraft.evolve.cycleqd.evaluators import Evaluator
    from skillgraft.skills.store import Store


@dataclass
class GenerationStats:
    generation: int  # 1-based number of the generation just finished; 0 is the starting population
    quality_task: str | None
    children: int
    insertions: int  # (child, archive) pairs where the child took a cell
    evaluations: int  # (candidate, task) scores computed, not read from the cache
    archives: dict[str, ArchiveStats]

    @property
    def qd_score(self) -> float:
        return sum(a.qd_score for a in self.archives.values())

    @property
    def coverage(self) -> float:
        return sum(a.coverage for a in self.archives.values()) / max(1, len(self.archives))

    def to_dict(self) -> dict:
        return {
            "generation": self.generation,
            "quality_task": self.quality_task,
            "children": self.children,
            "insertions": self.insertions,
            "evaluations": self.evaluations,
            "qd_score": self.qd_score,
            "coverage": self.coverage,
            "archives": {
                t: {"elites": a.elites, "coverage": a.coverage, "qd_score": a.qd_score, "best_quality": a.best_quality,
                    "best_adapter_id": a.best_adapter_id}
                for t, a in self.archives.items()
            },
        }


@dataclass
class CycleQDResult:
    run_id: int
    tasks: list[str]
    config: CycleQDConfig
    binning: Binning
    archives: dict[str, Archive]
    generation: int  # generations completed, counting those before a resume
    history: list[GenerationStats] = field(default_factory=list)  # this call's generations only

    def best(self) -> dict[str, Elite]:
        return {t: best for t, a in self.archives.items() if (best := a.best()) is not None}


def quality_task(tasks: Sequence[str], generation: int, config: CycleQDConfig) -> str:
    """Generation g (1-based) optimises tasks[(g-1) mod K]; the ablation pins one task."""
    if config.fixed_quality is not None:
        return config.fixed_quality
    return tasks[(generation - 1) % len(tasks)]


def _stats(generation: int, q: str | None, children: int, insertions: int, evaluations: int,
           archives: Mapping[str, Archive]) -> GenerationStats:
    return GenerationStats(generation, q, children, insertions, evaluations, {t: a.stats() for t, a in archives.items()})


class _Search:
    def __init__(self, recorder: RunRecorder, tasks: list[str], evaluator: Evaluator, config: CycleQDConfig,
                 run_id: int, checkpoints: list[Any], rank: int, archives: dict[str, Archive], binning: Binning,
                 placed: list | None = None) -> None:
        self.recorder, self.tasks, self.evaluator, self.config = recorder, tasks, evaluator, config
        self.run_id, self.checkpoints, self.rank = run_id, checkpoints, rank
        self.archives, self.binning = archives, binning
        # Every elite placed, as [generation, task, cell, adapter_id, scores]: the archive rows
        # keep only each cell's current elite, and this log lets a reader rebuild any generation.
        self.placed: list = list(placed or [])
        self.like = recorder.info(checkpoints[0])
        self.sampler = make_sampler(config.sampling)
        self.mutate = make_mutator(config.mutation, rank=rank, w_max=config.mutation_w_max, noise_std=config.noise_std)
        self._expert_svd: dict[Any, Any] = {}

    def state(self) -> dict:
        return {"tasks": self.tasks, "checkpoints": self.checkpoints, "rank": self.rank, "binning": self.binning.to_dict(),
                "placed": self.placed}

    def _expert(self, archive: Archive):
        if not uses_expert(self.config.mutation):
            return None
        best = archive.best()
        if best is None:
            return None
        held = self._expert_svd.get(archive.task)
        if held is None or held[0] != best.adapter_id:
            # One SVD per archive's current best elite, recomputed only when that elite changes.
            held = self._expert_svd[archive.task] = (best.adapter_id, svd(self.recorder.delta(best.adapter_id)))
        return held[1]

    def _child(self, generation: int, index: int, archive: Archive, pool: list[Elite], expert) -> tuple[Candidate, list]:
        rng = np.random.default_rng([self.config.seed, generation, index])
        p1, p2 = self.sampler.sample(archive, rng, pool)
        parents = [self.recorder.delta(p1.adapter_id), self.recorder.delta(p2.adapter_id)]
        child = crossover(parents, rng, rank=self.rank, mu=self.config.crossover_mu, sigma=self.config.crossover_sigma,
                          granularity=self.config.crossover_granularity)
        child = self.mutate(child, rng, expert)
        return Candidate.of(child), [p1.adapter_id, p2.adapter_id]

    def offer(self, candidate: Candidate, scores: dict[str, float], provenance: dict, generation: int) -> int:
        """Offers a scored candidate to every archive; stores it (once) if any archive takes it."""
        takers = [a for a in self.archives.values() if a.accepts(scores)]
        if not takers:
            return 0
        if candidate.adapter_id is None:
            candidate.adapter_id = self.recorder.add_child(candidate, self.like, provenance, name=f"cycleqd-run{self.run_id}")
        elite = Elite(adapter_id=candidate.adapter_id, scores=scores)
        for archive in takers:
            archive.offer(elite)
            cell = archive.cell_of(scores)
            self.recorder.put_entry(self.run_id, archive.task, cell, elite)
            self.placed.append([generation, archive.task, list(cell), elite.adapter_id, dict(scores)])
        return len(takers)

    def generation(self, g: int) -> GenerationStats:
        q = quality_task(self.tasks, g, self.config)
        archive = self.archives[q]
        pool = distinct_elites(self.archives.values())
        expert = self._expert(archive)
        made = [self._child(g, i, archive, pool, expert) for i in range(self.config.children_per_generation)]
        candidates = [c for c, _ in made]
        scores, fresh = score_candidates(self.recorder, self.evaluator, candidates, self.tasks, self.like)
        insertions = 0
        for (candidate, parents), s in zip(made, scores):
            provenance = {"method": "cycleqd", "run_id": self.run_id, "generation": g, "quality_task": q,
                          "parents": parents, "mutation": self.config.mutation, "content_hash": candidate.content_hash}
            insertions += self.offer(candidate, s, provenance, g)
        for c in candidates:
            if c.folder is not None and c.adapter_id is None:
                # An evaluated child no archive took: its scores stay cached, its folder goes.
                shutil.rmtree(c.folder, ignore_errors=True)
                c.folder = None
        self.recorder.finish_generation(self.run_id, g, self.state())
        return _stats(g, q, len(candidates), insertions, fresh, self.archives)


def _start(recorder: RunRecorder, checkpoints: list[Any], tasks: list[str], evaluator: Evaluator,
           config: CycleQDConfig, meta: Mapping[str, Any]) -> tuple[_Search, GenerationStats]:
    """Scores the starting checkpoints, sets the bin ranges from them and fills the archives."""
    deltas = [recorder.delta(c) for c in checkpoints]
    bases = {fp for c in checkpoints if (fp := recorder.info(c).fingerprint) is not None}
    if len(bases) > 1:
        raise ValueError(f"the starting checkpoints belong to different base models ({', '.join(sorted(bases))})")
    rank = config.rank or max(lr.rank for d in deltas for lr in d.values())
    candidates = [Candidate.of(d, adapter_id=c) for c, d in zip(checkpoints, deltas)]
    like = recorder.info(checkpoints[0])
    scores, fresh = score_candidates(recorder, evaluator, candidates, tasks, like)
    binning = Binning.from_starting_scores(scores, tasks, bins=config.bins, low=config.range_low,
                                           high=config.range_high, explicit=config.ranges)
    archives = make_archives(tasks, binning)
    run_id = recorder.create_run({**config.to_dict(), "tasks": tasks, "checkpoints": checkpoints, "meta": dict(meta)})
    search = _Search(recorder, tasks, evaluator, config, run_id, checkpoints, rank, archives, binning)
    insertions = 0
    for c, s in zip(candidates, scores):
        insertions += search.offer(c, s, {}, 0)
    recorder.finish_generation(run_id, 0, search.state())
    return search, _stats(0, None, len(candidates), insertions, fresh, archives)


def archives_at(state: Mapping[str, Any], generation: int) -> dict[str, Archive]:
    """A stored run's archives as they stood after `generation` (0: the starting checkpoints),
    rebuilt from its log of placements."""
    archives = make_archives(list(state["tasks"]), Binning.from_dict(state["binning"]))
    for g, task, cell, adapter_id, scores in state.get("placed", []):
        if g <= generation:
            archives[task].place(tuple(cell), Elite(adapter_id=adapter_id, scores=scores))
    return archives


def _resume(recorder: RunRecorder, run_id: int, evaluator: Evaluator, config: CycleQDConfig) -> tuple[_Search, int]:
    stored_config, done, state = recorder.load_run(run_id)
    if "binning" not in state:
        raise RuntimeError(f"CycleQD run {run_id} never finished scoring its starting checkpoints; start a new run")
    previous = CycleQDConfig.from_dict(stored_config)
    if previous.search_identity() != config.search_identity():
        changed = sorted(k for k, v in config.search_identity().items() if previous.search_identity().get(k) != v)
        raise ValueError(f"run {run_id} was started with different settings ({', '.join(changed)}); only --generations may change")
    tasks = list(state["tasks"])
    binning = Binning.from_dict(state["binning"])
    archives = make_archives(tasks, binning)
    for task in tasks:
        for entry in recorder.entries(run_id, task):
            archives[task].place(entry.cell, entry.elite)
    search = _Search(recorder, tasks, evaluator, config, run_id, list(state["checkpoints"]), int(state["rank"]),
                     archives, binning, state.get("placed"))
    return search, done


def run_cycleqd(
    store: Store,
    checkpoints: Sequence[Any],
    tasks: Sequence[str],
    evaluator: Evaluator,
    config: CycleQDConfig | None = None,
    *,
    run_id: int | None = None,
    on_generation: Callable[[GenerationStats], None] | None = None,
    scratch: Path | None = None,
    meta: Mapping[str, Any] | None = None,
) -> CycleQDResult:
    """Runs (or, given run_id, resumes) a CycleQD search over stored adapters.

    `checkpoints` are adapter ids in `store`; `tasks` name the task sets the evaluator scores.
    A resumed run takes its tasks and checkpoints from the store and runs on until
    `config.generations` generations are done. `meta` is stored with a new run for its caller
    (the CLI keeps the task-set paths there). The final merge is `final_merge.merge_and_promote`.
    """
    config = config or CycleQDConfig()
    recorder = RunRecorder(store) if scratch is None else RunRecorder(store, scratch=Path(scratch))
    try:
        history: list[GenerationStats] = []
        if run_id is None:
            tasks = list(tasks)
            if len(tasks) < 2:
                raise ValueError("CycleQD needs at least two tasks (one quality, the others as coordinates)")
            if len(set(tasks)) != len(tasks):
                raise ValueError("task names must be distinct")
            if not checkpoints:
                raise ValueError("CycleQD needs at least one starting checkpoint")
            if config.fixed_quality is not None and config.fixed_quality not in tasks:
                raise ValueError(f"fixed quality task {config.fixed_quality!r} is not one of the tasks")
            search, start = _start(recorder, list(checkpoints), tasks, evaluator, config, meta or {})
            history.append(start)
            if on_generation:
                on_generation(start)
            done = 0
        else:
            search, done = _resume(recorder, run_id, evaluator, config)
        for g in range(done + 1, config.generations + 1):
            stats = search.generation(g)
            history.append(stats)
            if on_generation:
                on_generation(stats)
        return CycleQDResult(run_id=search.run_id, tasks=search.tasks, config=config, binning=search.binning,
                             archives=search.archives, generation=max(done, config.generations), history=history)
    finally:
        recorder.close()
