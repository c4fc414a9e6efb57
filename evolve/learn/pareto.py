"""A pool of skill-text candidates with per-task scores, and parent selection from its Pareto front.

Picking the single best candidate as the next parent collapses the search onto one line of
descent; a candidate that is the only one to solve some task carries something the others lack,
so parents are drawn from every candidate that no other candidate dominates, weighted by how
many tasks it leads on.
"""
from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class Candidate:
    index: int
    text: str
    scores: dict[str, float]  # task id -> score on that task (validation set)
    parent: int | None = None
    version_id: int | None = None  # the store's skill version, once one is written
    meta: dict = field(default_factory=dict)

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / len(self.scores) if self.scores else 0.0


def dominates(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    """a is at least as good as b on every task and better on one (tasks missing count as 0)."""
    tasks = set(a) | set(b)
    at_least = all(a.get(t, 0.0) >= b.get(t, 0.0) for t in tasks)
    better = any(a.get(t, 0.0) > b.get(t, 0.0) for t in tasks)
    return at_least and better


class CandidatePool:
    """Every candidate tried for one skill, with its validation scores per task."""

    def __init__(self) -> None:
        self.candidates: list[Candidate] = []

    def __len__(self) -> int:
        return len(self.candidates)

    def add(self, text: str, scores: Mapping[str, float], parent: int | None = None, version_id: int | None = None,
            **meta) -> Candidate:
        cand = Candidate(index=len(self.candidates), text=text, scores=dict(scores), parent=parent,
                         version_id=version_id, meta=dict(meta))
        self.candidates.append(cand)
        return cand

    def leaders(self) -> dict[str, set[int]]:
        """For each task, the candidates that reach the best score on it (ties all lead)."""
        tasks = {t for c in self.candidates for t in c.scores}
        out: dict[str, set[int]] = {}
        for task in sorted(tasks):
            best = max(c.scores.get(task, 0.0) for c in self.candidates)
            out[task] = {c.index for c in self.candidates if c.scores.get(task, 0.0) == best}
        return out

    def front(self) -> list[Candidate]:
        """Candidates no other candidate dominates; among exact duplicates of scores, the oldest."""
        kept: list[Candidate] = []
        for c in self.candidates:
            if any(dominates(o.scores, c.scores) for o in self.candidates if o is not c):
                continue
            if any(k.scores == c.scores for k in kept):
                continue
            kept.append(c)
        return kept

    def select_parent(self, rng: random.Random) -> Candidate:
        """A front member drawn with weight 1 + the number of tasks it leads on."""
        if not self.candidates:
            raise ValueError("the pool is empty: add the starting text first")
        front = self.front()
        leads = self.leaders()
        weights = [1 + sum(c.index in idx for idx in leads.values()) for c in front]
        return rng.choices(front, weights=weights, k=1)[0]

    def best(self) -> Candidate:
        """Highest mean validation score; the earliest wins ties, so a newcomer must be strictly better."""
        return max(self.candidates, key=lambda c: (c.mean, -c.index))
