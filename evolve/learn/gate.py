"""The learner's validation gate: what it would keep against what runs now, on held-out tasks.

A new skill version is weighed on the validation tasks of its family (all of them where the
family has none), a new global adapter on every validation task, seen families included, so
that an update which costs what the model already solves is not kept. Each side is scored as
runs get it; a score is kept by what it was taken of (a text's loadout, a global adapter's
weights), so a candidate that comes again while nothing moved is not run again.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

from skillgraft.agent.loadout import Loadout
from skillgraft.agent.task import Task
from skillgraft.evolve.learn.evaluate import AgentScorer, mean
from skillgraft.hypernet.peft_io import WEIGHTS_FILE


class ValidationGate:
    def __init__(self, tasks: Sequence[Task], scorer: AgentScorer):
        self.tasks, self.scorer = list(tasks), scorer
        self.verdict = ""  # the last weighing's figures, for the note that says why it refused
        self._scores: dict[Hashable, float] = {}

    def of_family(self, family: str | None) -> list[Task]:
        return [t for t in self.tasks if t.family == family] or self.tasks

    def score(self, key: Hashable, tasks: Sequence[Task], loadout: Callable[[], Loadout]) -> float:
        """The mean validation score of runs given `loadout()`, kept under `key`."""
        key = (key, tuple(t.id for t in tasks))
        if key not in self._scores:
            self._scores[key] = mean(self.scorer.scores(tasks, loadout()))
        return self._scores[key]

    def weigh(self, new: float, old: float, tasks: int) -> bool:
        """Keep the candidate unless it scores below what runs now."""
        self.verdict = f"{new:.0%} against {old:.0%} on {tasks} validation tasks"
        return new >= old

    def keeps_global(self, candidate: Path, current: Path | None, loadout: Callable[[Path | None], Loadout]) -> bool:
        """A new global version (`candidate`) against the current one (None: no adapter at all),
        each given alone as `loadout(folder)` makes it."""
        def score(folder: Path | None) -> float:
            weights = hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest() if folder is not None else None
            return self.score(("global", weights), self.tasks, lambda: loadout(folder))

        return self.weigh(score(candidate), score(current), len(self.tasks))

    def keeps_text(self, family: str | None, current_key: Hashable, current: Loadout, candidate: Loadout) -> bool:
        """A skill's new text against what runs get now (its score kept under `current_key`), on
        the family's tasks."""
        tasks = self.of_family(family)
        old = self.score(current_key, tasks, lambda: current)
        return self.weigh(mean(self.scorer.scores(tasks, candidate)), old, len(tasks))
