"""Choosing two parents from the quality task's archive."""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

import numpy as np

from skillgraft.evolve.cycleqd.archive import Archive, Elite

# The paper's elite-sampling weight per dimension is LOW + SPAN * (min-max normalised value),
# i.e. it runs from 0.5 for the worst elite to 0.8 for the best.
LOW = 0.5
SPAN = 0.3


class ParentSampler(Protocol):
    def probabilities(self, archive: Archive) -> tuple[list[Elite], np.ndarray]: ...

    def sample(self, archive: Archive, rng: np.random.Generator, pool: Sequence[Elite]) -> tuple[Elite, Elite]: ...


def _normalised(column: np.ndarray) -> np.ndarray:
    lo, hi = float(column.min()), float(column.max())
    if hi == lo:
        # A constant column cannot tell elites apart; any constant factor leaves the distribution unchanged.
        return np.ones_like(column)
    return (column - lo) / (hi - lo)


def elite_weights(archive: Archive, elites: Sequence[Elite]) -> np.ndarray:
    """prod over (quality, coordinate scores) of 0.5 + 0.3 * min-max normalised value, over this archive.

    The coordinates are the raw scores on the other tasks (the values the grid bins), so two
    elites in the same row still differ by how far into their bin they reach.
    """
    columns = [archive.task, *archive.coordinate_tasks]
    values = np.array([[e.score(t) for t in columns] for e in elites], dtype=np.float64)
    weights = np.ones(len(elites))
    for j in range(values.shape[1]):
        weights *= LOW + SPAN * _normalised(values[:, j])
    return weights


class _Base:
    def _weights(self, archive: Archive, elites: Sequence[Elite]) -> np.ndarray:
        raise NotImplementedError

    def probabilities(self, archive: Archive) -> tuple[list[Elite], np.ndarray]:
        elites = [e for _, e in sorted(archive.elites.items())]
        if not elites:
            return [], np.zeros(0)
        w = self._weights(archive, elites)
        return elites, w / w.sum()

    def sample(self, archive: Archive, rng: np.random.Generator, pool: Sequence[Elite]) -> tuple[Elite, Elite]:
        elites, p = self.probabilities(archive)
        distinct = {e.adapter_id for e in elites}
        if len(distinct) >= 2:
            first = int(rng.choice(len(elites), p=p))
            # Second parent: the same distribution with the first parent (and any cell holding the
            # same adapter) removed, i.e. sampling without replacement.
            rest = np.array([e.adapter_id != elites[first].adapter_id for e in elites], dtype=float) * p
            second = int(rng.choice(len(elites), p=rest / rest.sum()))
            return elites[first], elites[second]
        return _fallback(archive, elites, pool, rng)


class EliteSampler(_Base):
    """The paper's elite sampling: favours elites that are good on the quality task and on the others."""

    def _weights(self, archive: Archive, elites: Sequence[Elite]) -> np.ndarray:
        return elite_weights(archive, elites)


class UniformSampler(_Base):
    """Every elite equally likely (the ablation the paper compares elite sampling to)."""

    def _weights(self, archive: Archive, elites: Sequence[Elite]) -> np.ndarray:
        return np.ones(len(elites))


def _fallback(archive: Archive, elites: Sequence[Elite], pool: Sequence[Elite], rng: np.random.Generator) -> tuple[Elite, Elite]:
    """Fewer than two distinct elites here: borrow the strongest on this task from the other archives.

    With a single checkpoint in the whole run both parents are that checkpoint; crossover then
    returns it unchanged and mutation alone makes the child differ.
    """
    ranked = sorted(pool, key=lambda e: (-e.score(archive.task), e.adapter_id))
    if not ranked and not elites:
        raise ValueError("no elites to sample parents from")
    first = elites[0] if elites else ranked[0]
    others = [e for e in ranked if e.adapter_id != first.adapter_id]
    second = others[0] if others else first
    if rng.random() < 0.5:
        first, second = second, first
    return first, second


SAMPLERS: dict[str, Callable[[], ParentSampler]] = {"elite": EliteSampler, "uniform": UniformSampler}


def make_sampler(name: str) -> ParentSampler:
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampling {name!r}")
    return SAMPLERS[name]()
