"""Generator–verifier refinement of one skill's text.

Each round: draw a parent from the Pareto front of the candidates so far (per-task validation
scores), run it on a minibatch of training tasks keeping the runs, let the generator propose a
revision from those runs, run the revision on the same minibatch, and only if it solves more
there, score it on the held-out validation tasks. A candidate joins the pool only if its mean
validation score is strictly above its parent's; at the end the best candidate, if strictly
better than the starting text, is written to the store with the chain of revisions that led
to it (origin "refined") and every one's per-task scores.
"""
from __future__ import annotations

import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from skillgraft.agent.loadout import GivenSkill, Loadout, SkillMode, make_loadout
from skillgraft.agent.models.base import Model
from skillgraft.agent.seams import SkillCompiler
from skillgraft.agent.task import Task
from skillgraft.evolve.learn.episode import Episode, load_episode
from skillgraft.evolve.learn.evaluate import AgentScorer, mean
from skillgraft.evolve.learn.pareto import Candidate, CandidatePool
from skillgraft.evolve.learn.propose import Generator
from skillgraft.skills.schema import saved_id
from skillgraft.skills.store import Store


@runtime_checkable
class Verifier(Protocol):
    def run(self, skill_name: str, text: str, tasks: Sequence[Task], keep: bool = False) -> tuple[dict[str, float], list[Episode]]:
        """Per-task scores of the agent given this skill text, and the runs when keep=True."""
        ...


class AgentVerifier:
    """Runs the agent with the candidate text given the way the learner gives skills: in context,
    compiled into an adapter (joined with the current global adapter), or both."""

    def __init__(self, store: Store, model: Model, compiler: SkillCompiler | None = None, *, skill_mode: str = "context",
                 sandbox: str = "docker", image: str | None = None, use_global: bool = True, workdir: Path | None = None):
        self.store, self.model, self.compiler = store, model, compiler
        self.skill_mode, self.use_global = skill_mode, use_global
        self.scorer = AgentScorer(model, sandbox, image)
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="skillgraft-refine-"))

    def loadout(self, skill_name: str, text: str) -> Loadout:
        compiled = self.compiler is not None and SkillMode(self.skill_mode).compiled
        return make_loadout(self.store, self.model, [GivenSkill.of_text(skill_name, text)], self.skill_mode,
                            compiler=self.compiler, use_global=compiled and self.use_global, cache=self.workdir)

    def run(self, skill_name: str, text: str, tasks: Sequence[Task], keep: bool = False) -> tuple[dict[str, float], list[Episode]]:
        return self.scorer.run(tasks, self.loadout(skill_name, text), keep=keep)


@dataclass
class Attempt:
    parent: int
    text: str
    minibatch: dict[str, float]
    parent_minibatch: dict[str, float]
    validation: dict[str, float] | None = None
    kept: bool = False
    reason: str = ""


@dataclass
class RefineResult:
    skill: str
    start_version: int
    start_score: float
    pool: CandidatePool
    attempts: list[Attempt] = field(default_factory=list)
    written: list[int] = field(default_factory=list)  # ids of the skill versions written

    @property
    def best(self) -> Candidate:
        return self.pool.best()

    @property
    def improved(self) -> bool:
        return bool(self.written)

    def describe(self) -> str:
        if not self.improved:
            return (f"{self.skill}: no revision beat v{self.start_version} ({self.start_score:.2f}) on validation "
                    f"after {len(self.attempts)} proposals")
        return (f"{self.skill}: refined v{self.start_version} ({self.start_score:.2f}) → {len(self.written)} new "
                f"version(s), best {self.best.mean:.2f} on validation")


class Refiner:
    def __init__(self, store: Store, generator: Generator, verifier: Verifier, *, rounds: int = 4, minibatch: int = 3,
                 seed: int = 0, extra_successes: int = 3):
        self.store, self.generator, self.verifier = store, generator, verifier
        self.rounds, self.minibatch, self.seed = rounds, minibatch, seed
        self.extra_successes = extra_successes

    def refine(self, skill_name: str, tasks: Sequence[Task], validation: Sequence[Task], *,
               session_id: int | None = None) -> RefineResult:
        start = self.store.latest_version(skill_name)
        if start is None:
            raise LookupError(f"no skill named {skill_name!r} in the store")
        if not tasks or not validation:
            raise ValueError("refinement needs training tasks for minibatches and validation tasks to judge on")
        rng = random.Random(f"{self.seed}:{skill_name}:{start.id}")
        pool = CandidatePool()
        scores, _ = self.verifier.run(skill_name, start.text, validation)
        pool.add(start.text, scores, version_id=start.id)
        result = RefineResult(skill_name, start.number, mean(scores), pool)
        past_wins = self._past_successes(skill_name)
        for _ in range(self.rounds):
            parent = pool.select_parent(rng)
            batch = rng.sample(list(tasks), min(self.minibatch, len(tasks)))
            before, runs = self.verifier.run(skill_name, parent.text, batch, keep=True)
            if all(v >= 1.0 for v in before.values()):
                continue  # nothing on this minibatch for a revision to fix
            text = self.generator.propose(skill_name, parent.text, runs + past_wins, rng)
            if text is None or any(c.text == text for c in pool.candidates):
                continue
            after, _ = self.verifier.run(skill_name, text, batch)
            attempt = Attempt(parent.index, text, after, before)
            result.attempts.append(attempt)
            if sum(after.values()) <= sum(before.values()):
                attempt.reason = f"minibatch {sum(after.values()):g} not above the parent's {sum(before.values()):g}"
                continue
            attempt.validation, _ = self.verifier.run(skill_name, text, validation)
            if not mean(attempt.validation) > parent.mean:
                attempt.reason = f"validation {mean(attempt.validation):.3f} not above the parent's {parent.mean:.3f}"
                continue
            attempt.kept, attempt.reason = True, "strictly better on validation"
            pool.add(text, attempt.validation, parent=parent.index)
        self._record(result, validation, session_id)
        return result

    def _past_successes(self, skill_name: str) -> list[Episode]:
        """Successful runs with this skill from the store: material for offline edits."""
        wins: list[Episode] = []
        for row in self.store.trajectories(skill=skill_name, limit=50):
            if row.reward >= 1.0 and len(wins) < self.extra_successes:
                try:
                    wins.append(load_episode(self.store.trajectory_path(row)))
                except (OSError, ValueError):
                    continue
        return wins

    def _record(self, result: RefineResult, validation: Sequence[Task], session_id: int | None) -> None:
        pool, start = result.pool, result.pool.candidates[0]
        assert start.version_id is not None  # the pool starts from the stored version
        self._scores(start.version_id, start.scores, validation, session_id)
        best = pool.best()
        if best.index == 0:
            return
        chain = []
        c = best
        while c.parent is not None:
            chain.append(c)
            c = pool.candidates[c.parent]
        parent_id = start.version_id
        for cand in reversed(chain):  # each link strictly better than the one before
            v = self.store.add_version(result.skill, cand.text, origin="refined", parent_id=parent_id, session_id=session_id)
            cand.version_id = parent_id = saved_id(v.id)
            result.written.append(parent_id)
            self._scores(parent_id, cand.scores, validation, session_id)

    def _scores(self, version_id: int, scores: dict[str, float], validation: Sequence[Task], session_id: int | None) -> None:
        families = {t.id: t.family or "-" for t in validation}
        for task_id, score in scores.items():
            self.store.add_score("skill_version", version_id, families.get(task_id, "-"), score, 1,
                                 condition=f"refine:{task_id}"[:64], session_id=session_id)
        fams = sorted(set(families.values()))
        self.store.add_score("skill_version", version_id, fams[0] if len(fams) == 1 else "mixed", mean(scores),
                             len(scores), condition="refine-validation", session_id=session_id)
