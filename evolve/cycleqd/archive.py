"""One MAP-Elites archive per task: quality is that task's score, the grid is the other tasks' scores."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

Cell = tuple[int, ...]


class AddStatus(enum.IntEnum):
    NOT_ADDED = 0
    IMPROVED = 1  # replaced a worse elite
    NEW = 2  # took an empty cell


@dataclass(frozen=True)
class Elite:
    """A checkpoint held by an archive; it points at a stored adapter, never at a copy of weights."""

    adapter_id: int | str
    scores: Mapping[str, float]  # every task's score, so the same elite can sit in every archive

    def score(self, task: str) -> float:
        return float(self.scores[task])


@dataclass(frozen=True)
class Binning:
    """Maps a task score to a bin: `bins` equal bins over [lo, hi], values outside clipped to the ends."""

    ranges: Mapping[str, tuple[float, float]]
    bins: int = 15

    def bin(self, task: str, value: float) -> int:
        lo, hi = self.ranges[task]
        index = int((value - lo) / (hi - lo) * self.bins) if hi > lo else 0
        return min(max(index, 0), self.bins - 1)

    def to_dict(self) -> dict:
        return {"bins": self.bins, "ranges": {k: list(v) for k, v in self.ranges.items()}}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Binning":
        return cls(ranges={k: (float(v[0]), float(v[1])) for k, v in d["ranges"].items()}, bins=int(d["bins"]))

    @classmethod
    def from_starting_scores(
        cls,
        scores: Sequence[Mapping[str, float]],
        tasks: Sequence[str],
        *,
        bins: int,
        low: float,
        high: float,
        explicit: Mapping[str, tuple[float, float]] | None = None,
    ) -> "Binning":
        """Each range runs from `low` x the weakest to `high` x the strongest starting score."""
        ranges: dict[str, tuple[float, float]] = {}
        for task in tasks:
            if explicit and task in explicit:
                ranges[task] = tuple(explicit[task])  # type: ignore[assignment]
                continue
            values = [float(s[task]) for s in scores]
            lo, hi = low * min(values), high * max(values)
            if not hi > lo:
                # Every starting checkpoint scored 0 (or the same negative value): scores are
                # success rates, so the natural span is up to 1.
                hi = lo + 1.0
            ranges[task] = (lo, hi)
        return cls(ranges=ranges, bins=bins)


@dataclass
class ArchiveStats:
    task: str
    elites: int
    cells: int
    coverage: float  # fraction of cells holding an elite
    qd_score: float  # sum of elite qualities
    best_quality: float | None
    best_adapter_id: int | str | None


@dataclass
class Archive:
    """The grid for one quality task. Insertion takes a cell that is empty or held by a worse elite."""

    task: str
    coordinate_tasks: tuple[str, ...]
    binning: Binning
    elites: dict[Cell, Elite] = field(default_factory=dict)

    @classmethod
    def for_task(cls, task: str, tasks: Sequence[str], binning: Binning) -> "Archive":
        return cls(task=task, coordinate_tasks=tuple(t for t in tasks if t != task), binning=binning)

    @property
    def cells(self) -> int:
        return self.binning.bins ** len(self.coordinate_tasks)

    def cell_of(self, scores: Mapping[str, float]) -> Cell:
        return tuple(self.binning.bin(t, float(scores[t])) for t in self.coordinate_tasks)

    def quality(self, elite: Elite) -> float:
        return elite.score(self.task)

    def accepts(self, scores: Mapping[str, float]) -> bool:
        """Whether a candidate with these scores would take a cell (the test `offer` applies)."""
        held = self.elites.get(self.cell_of(scores))
        return held is None or float(scores[self.task]) > self.quality(held)

    def offer(self, elite: Elite) -> AddStatus:
        cell = self.cell_of(elite.scores)
        held = self.elites.get(cell)
        if held is None:
            self.elites[cell] = elite
            return AddStatus.NEW
        # Strictly better only: a tie keeps the incumbent, so re-offering an elite changes nothing.
        if self.quality(elite) > self.quality(held):
            self.elites[cell] = elite
            return AddStatus.IMPROVED
        return AddStatus.NOT_ADDED

    def place(self, cell: Cell, elite: Elite) -> None:
        """Puts a stored elite back in its cell when a run resumes (no comparison: the store is the truth)."""
        self.elites[tuple(cell)] = elite

    def best(self) -> Elite | None:
        if not self.elites:
            return None
        return max(self.elites.values(), key=self.quality)

    def __len__(self) -> int:
        return len(self.elites)

    def __iter__(self):
        return iter(self.elites.items())

    def stats(self) -> ArchiveStats:
        best = self.best()
        return ArchiveStats(
            task=self.task,
            elites=len(self.elites),
            cells=self.cells,
            coverage=len(self.elites) / self.cells,
            qd_score=sum(self.quality(e) for e in self.elites.values()),
            best_quality=None if best is None else self.quality(best),
            best_adapter_id=None if best is None else best.adapter_id,
        )


def make_archives(tasks: Sequence[str], binning: Binning) -> dict[str, Archive]:
    return {t: Archive.for_task(t, tasks, binning) for t in tasks}


def offer_to_all(archives: Mapping[str, Archive], elite: Elite) -> dict[str, AddStatus]:
    """A child scored on every task is offered to every archive (MAP-Elites insertion)."""
    return {task: archive.offer(elite) for task, archive in archives.items()}


def distinct_elites(archives: Iterable[Archive]) -> list[Elite]:
    """Every elite held anywhere, once, in a stable order."""
    seen: dict[int | str, Elite] = {}
    for archive in archives:
        for _, elite in sorted(archive.elites.items()):
            seen.setdefault(elite.adapter_id, elite)
    return list(seen.values())
