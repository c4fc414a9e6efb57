"""Scoring a setup (skills in context, an adapter in the weights) by running the agent on tasks.

Used by the validation gate of the global adapter and by the refinement verifier; each task's
score is 1.0 when its tests pass after the run, else 0.0.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.runner import RunResult, run_task
from agent.task import Task
from evolve.learn.episode import Episode, load_episode


@dataclass
class AgentScorer:
    model: object
    sandbox: str = "docker"
    image: str | None = None
    on_result: Callable[[Task, RunResult], None] | None = None

    def run(self, tasks: Sequence[Task], *, skills: Sequence[tuple[str, str]] = (), adapter_dir: Path | None = None,
            keep: bool = False) -> tuple[dict[str, float], list[Episode]]:
        """Per-task scores, and (with keep=True) each run read back as an Episode for feedback."""
        scores: dict[str, float] = {}
        episodes: list[Episode] = []
        with tempfile.TemporaryDirectory(prefix="skillgraft-eval-") as tmp:
            for task in tasks:
                path = Path(tmp) / f"{task.id}.json" if keep else None
                result = run_task(task, self.model, sandbox=self.sandbox, skills=skills, adapter_dir=adapter_dir,
                                  trajectory_path=path, image=self.image)
                scores[task.id] = float(result.success)
                if self.on_result is not None:
                    self.on_result(task, result)
                if keep and path is not None and path.exists():
                    episodes.append(load_episode(path))
        return scores, episodes

    def scores(self, tasks: Sequence[Task], **kw) -> dict[str, float]:
        return self.run(tasks, **kw)[0]


def mean(scores: dict[str, float]) -> float:
    return sum(scores.values()) / len(scores) if scores else 0.0
