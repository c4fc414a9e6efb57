"""Many episodes at once: the seam between what decides the runs and where they run.

    runner = LocalEpisodes(model_factory, workers=2)           # threads on this machine
    connect("auto"); runner = RayEpisodes(model_factory, workers=8)  # actors on a Ray cluster
    for job, result in runner.run_all(jobs):
        ...

A job is a task with its loadout (made by the caller, where the store is), the path its
trajectory is to be written to, and the info the trajectory records. Results come back as
each episode ends, in any order; every job yields exactly one result.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from skillgraft.agent.loadout import NOTHING, Loadout
from skillgraft.agent.models.base import Model, Sampling
from skillgraft.agent.runner import RunResult, run_task
from skillgraft.agent.task import Task
from skillgraft.agent.unstick import Unstick


@dataclass(frozen=True)
class EpisodeJob:
    task: Task
    loadout: Loadout = NOTHING
    trajectory_path: Path | None = None
    info: Mapping[str, Any] | None = None
    tag: Any = None  # the caller's handle on the job (a family and seed, a candidate and task set…)
    sampling: Sampling | None = None  # how this run draws its replies, where not as the model does
    unstick: Unstick | None = None  # go back and redraw when a command is proposed again on the same files


class EpisodeRunner(Protocol):
    workers: int  # episodes that run at once

    def run_all(self, jobs: Sequence[EpisodeJob]) -> Iterator[tuple[EpisodeJob, RunResult]]: ...

    def close(self) -> None: ...


class ThreadModels:
    """One model per worker thread: a model holds one adapter at a time, so threads never share one."""

    def __init__(self, make: Callable[[], Model]):
        self.make = make
        self.local = threading.local()

    def __call__(self, _task: object = None) -> Model:  # a per-task factory's signature, the task unused
        if not hasattr(self.local, "model"):
            self.local.model = self.make()
        return self.local.model


class LocalEpisodes:
    """Episodes in threads of this process, each thread with its own model and sandbox."""

    def __init__(self, model_factory: Callable[[], Model], workers: int = 1, *, sandbox: str = "docker",
                 image: str | None = None):
        self.models = ThreadModels(model_factory)
        self.workers = max(1, workers)
        self.sandbox, self.image = sandbox, image
        self._pool: ThreadPoolExecutor | None = None

    def _one(self, job: EpisodeJob) -> RunResult:
        return run_task(job.task, self.models(), sandbox=self.sandbox, loadout=job.loadout,
                        trajectory_path=job.trajectory_path, info=job.info, image=self.image, sampling=job.sampling,
                        unstick=job.unstick)

    def run_all(self, jobs: Sequence[EpisodeJob]) -> Iterator[tuple[EpisodeJob, RunResult]]:
        if self._pool is None:  # kept across calls, so each thread keeps its model
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="episode")
        futures = {self._pool.submit(self._one, job): job for job in jobs}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
