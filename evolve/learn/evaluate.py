"""Scoring a setup (skills in context, an adapter in the weights) by running the agent on tasks.

Used by the validation gate of the global adapter and by the refinement verifier; each task's
score is 1.0 when its tests pass after the run, else 0.0.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from skillgraft.agent.episodes import EpisodeJob, EpisodeRunner
from skillgraft.agent.loadout import NOTHING, Loadout
from skillgraft.agent.models.base import Model
from skillgraft.agent.runner import RunResult, run_task
from skillgraft.agent.task import Task
from skillgraft.evolve.learn.episode import Episode, episode_from_run


@dataclass
class AgentScorer:
    model: Model
    sandbox: str = "docker"
    image: str | None = None
    on_result: Callable[[Task, RunResult], None] | None = None
    episodes: EpisodeRunner | None = None  # runs the tasks `episodes.workers` at a time; else one after another

    def _results(self, tasks: Sequence[Task], loadout: Loadout) -> Iterator[tuple[Task, RunResult]]:
        if self.episodes is None:
            for task in tasks:
                yield task, run_task(task, self.model, sandbox=self.sandbox, loadout=loadout, image=self.image)
            return
        jobs = [EpisodeJob(task, loadout) for task in tasks]
        done = {id(job): result for job, result in self.episodes.run_all(jobs)}
        for job in jobs:  # in task order, whatever order they finished in
            yield job.task, done[id(job)]

    def run(self, tasks: Sequence[Task], loadout: Loadout = NOTHING, *, keep: bool = False) -> tuple[dict[str, float], list[Episode]]:
        """Per-task scores, and (with keep=True) each run as an Episode for feedback."""
        scores: dict[str, float] = {}
        episodes: list[Episode] = []
        for task, result in self._results(tasks, loadout):
            scores[task.id] = float(result.success)
            if self.on_result is not None:
                self.on_result(task, result)
            if keep:
                episodes.append(episode_from_run(task, result))
        return scores, episodes

    def scores(self, tasks: Sequence[Task], loadout: Loadout = NOTHING) -> dict[str, float]:
        return self.run(tasks, loadout)[0]


def mean(scores: dict[str, float]) -> float:
    return sum(scores.values()) / len(scores) if scores else 0.0
