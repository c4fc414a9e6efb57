"""How a candidate adapter gets a score on a task.

`Evaluator` is the seam: the search hands it (candidate, task) requests it has no cached score
for and receives one float per request. `AgentEvaluator` runs the agent with the adapter on the
task's evaluation set in parallel sandboxes; `SyntheticEvaluator` is a known fitness over the
task vector for exercising the search itself.
"""
from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Protocol, Sequence

import numpy as np
import torch

from skillgraft.agent.episodes import EpisodeJob, EpisodeRunner
from skillgraft.agent.loadout import Loadout, SkillMode, make_loadout
from skillgraft.evolve.cycleqd.candidate import Candidate
from skillgraft.hypernet.lora import LoraDelta, LowRank

Request = tuple[Candidate, str]


class Evaluator(Protocol):
    # True when the evaluator loads the candidate's PEFT folder; the search writes one only then.
    needs_folder: ClassVar[bool]

    def evaluate(self, requests: Sequence[Request]) -> list[float]:
        """One score per (candidate, task) request, higher is better, typically a success rate in [0, 1]."""
        ...


# ---------------------------------------------------------------- synthetic


def inner(a: LowRank, b: LowRank) -> float:
    """<B_a A_a, B_b A_b>_F = sum((B_aᵀ B_b) ∘ (A_a A_bᵀ)): r×r work, no d×d product."""
    return float(((a.B.double().T @ b.B.double()) * (a.A.double() @ b.A.double().T)).sum())


@dataclass
class SyntheticEvaluator:
    """score_t(τ) = exp(−‖τ|_t − T_t‖²_F / ‖T_t‖²_F), with τ|_t the modules task t's target covers.

    Each task lives in its own modules, so an expert for one task scores e⁻¹ ≈ 0.37 on the
    others while a good merge can approach 1 on all: the landscape rewards exactly what CycleQD
    looks for, and every value can be checked by hand.
    """

    needs_folder: ClassVar[bool] = False
    targets: Mapping[str, LoraDelta]
    calls: int = 0  # how many (candidate, task) pairs were actually scored; tests check the cache with it

    def score(self, delta: Mapping[str, LowRank], task: str) -> float:
        target = self.targets[task]
        dist = 0.0
        norm = 0.0
        for name, t in target.items():
            tt = inner(t, t)
            norm += tt
            if name in delta:
                d = delta[name]
                dist += inner(d, d) - 2 * inner(d, t) + tt
            else:
                dist += tt
        return math.exp(-max(dist, 0.0) / norm)

    def evaluate(self, requests: Sequence[Request]) -> list[float]:
        self.calls += len(requests)
        return [self.score(c.delta, task) for c, task in requests]


def _random_lowrank(out_dim: int, in_dim: int, rank: int, gen: torch.Generator, scale: float) -> LowRank:
    return LowRank(
        B=torch.randn(out_dim, rank, generator=gen) * scale / rank**0.5,
        A=torch.randn(rank, in_dim, generator=gen) / in_dim**0.5,
    )


@dataclass
class SyntheticWorld:
    """Targets per task plus one expert per task (its target, noised) and optional generalists."""

    evaluator: SyntheticEvaluator
    experts: dict[str, LoraDelta] = field(default_factory=dict)
    generalists: list[LoraDelta] = field(default_factory=list)


def synthetic_world(
    tasks: Sequence[str],
    *,
    modules_per_task: int = 2,
    dim: int = 16,
    rank: int = 4,
    noise: float = 0.3,
    generalists: int = 0,
    seed: int = 0,
) -> SyntheticWorld:
    """A small world for tests and benchmarks: each task owns `modules_per_task` dim×dim modules.

    Expert t carries T_t on task t's modules plus `noise`-sized random deltas on its own modules;
    it leaves the other tasks' modules at zero. Generalists carry a third of each target.
    """
    gen = torch.Generator().manual_seed(seed)
    targets: dict[str, LoraDelta] = {}
    for i, task in enumerate(tasks):
        targets[task] = {
            f"model.layers.{i * modules_per_task + j}.self_attn.q_proj": _random_lowrank(dim, dim, rank, gen, 1.0)
            for j in range(modules_per_task)
        }
    experts: dict[str, LoraDelta] = {}
    for task in tasks:
        expert = {}
        for name, t in targets[task].items():
            n = _random_lowrank(dim, dim, rank, gen, noise)
            # Stacking the target with noise keeps the expert exactly low rank (2·rank).
            expert[name] = LowRank(B=torch.cat([t.B, n.B], 1), A=torch.cat([t.A, n.A], 0))
        experts[task] = expert
    mixes = []
    for _ in range(generalists):
        mix = {}
        for task in tasks:
            for name, t in targets[task].items():
                w = float(torch.rand(1, generator=gen)) * 0.5
                mix[name] = LowRank(B=t.B * w, A=t.A.clone())
        mixes.append(mix)
    return SyntheticWorld(evaluator=SyntheticEvaluator(targets=targets), experts=experts, generalists=mixes)


# ---------------------------------------------------------------- the agent


@dataclass
class AgentEvaluator:
    """Runs the agent with the candidate adapter on each task's evaluation set, in parallel sandboxes.

    The score of a task is the fraction of its evaluation tasks the agent solves (or the mean
    reward with metric="reward"). A model holds one adapter at a time, so each worker thread
    builds its own model with `model_factory`.
    """

    needs_folder: ClassVar[bool] = True
    task_sets: Mapping[str, Sequence[Any]]  # task name -> list of agent.task.Task
    model_factory: Callable[[], Any]
    sandbox: str = "docker"
    workers: int = 2
    image: str | None = None
    metric: str = "success"
    run: Callable[..., Any] | None = None  # agent.runner.run_task unless given
    episodes: EpisodeRunner | None = None  # runs the episodes (on a Ray cluster, say) instead of this process's threads
    _local: threading.local = field(default_factory=threading.local, init=False, repr=False)
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.metric not in ("success", "reward"):
            raise ValueError("metric must be 'success' or 'reward'")
        empty = [name for name, tasks in self.task_sets.items() if not tasks]
        if empty:
            raise ValueError(f"task sets with no evaluation tasks: {', '.join(empty)}")

    def _model(self) -> Any:
        model = getattr(self._local, "model", None)
        if model is None:
            model = self._local.model = self.model_factory()
        return model

    @staticmethod
    def loadout(model: Any, candidate: Candidate) -> Loadout:
        """A candidate merge is activated as it is, with no skills besides."""
        if candidate.folder is None:
            raise ValueError("the agent evaluator needs the candidate's adapter folder")
        return make_loadout(None, model, mode=SkillMode.parametric, adapters=[candidate.folder])

    def _episode(self, candidate: Candidate, task: Any) -> float:
        from skillgraft.agent.runner import run_task

        run = self.run or run_task
        model = self._model()
        result = run(task, model, sandbox=self.sandbox, loadout=self.loadout(model, candidate), image=self.image)
        return self._value(result)

    def _value(self, result: Any) -> float:
        return float(result.success) if self.metric == "success" else float(result.reward)

    def evaluate(self, requests: Sequence[Request]) -> list[float]:
        jobs = [(i, candidate, task) for i, (candidate, name) in enumerate(requests) for task in self.task_sets[name]]
        totals = np.zeros(len(requests))
        if self.episodes is not None:
            model = self._model()  # only to build the loadouts; the runner's workers hold their own
            runs = [EpisodeJob(task, self.loadout(model, candidate), tag=i) for i, candidate, task in jobs]
            for job, result in self.episodes.run_all(runs):
                totals[job.tag] += self._value(result)
        else:
            if self._pool is None:
                # Kept across calls: each worker thread keeps its model, built once per search.
                self._pool = ThreadPoolExecutor(max_workers=max(1, self.workers), thread_name_prefix="cycleqd-eval")
            for (i, _, _), value in zip(jobs, self._pool.map(lambda j: self._episode(j[1], j[2]), jobs)):
                totals[i] += value
        return [float(totals[i] / len(self.task_sets[name])) for i, (_, name) in enumerate(requests)]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
