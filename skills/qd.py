"""CycleQD state: runs, one MAP-Elites archive per task, and a score cache keyed by adapter content."""
from __future__ import annotations

import json
from typing import Optional, Sequence

from sqlmodel import col, select

from skillgraft.skills.db import retrying
from skillgraft.skills.errors import NotFound
from skillgraft.skills.schema import ArchiveEntry, QdRun, ScoreCache, utcnow
from skillgraft.skills.store_parts import StorePart


def cell_key(cell: Sequence[int]) -> str:
    return json.dumps([int(c) for c in cell])


class QualityDiversity(StorePart):
    """Store's CycleQD runs, archives and score cache."""

    def create_qd_run(self, config: dict) -> QdRun:
        with self.db.write() as s:
            row = QdRun(config=dict(config))
            s.add(row)
        return row

    def qd_run(self, run_id: int) -> QdRun:
        with self.db.read() as s:
            row = s.get(QdRun, run_id)
        if row is None:
            raise NotFound(f"no CycleQD run with id {run_id}")
        return row

    def qd_runs(self) -> list[QdRun]:
        with self.db.read() as s:
            return list(s.exec(select(QdRun).order_by(col(QdRun.id))).all())

    def update_qd_run(self, run_id: int, generation: int, state: dict) -> QdRun:
        """Saves the loop's position so a stopped run resumes where it was."""
        with self.db.write() as s:
            row = s.get(QdRun, run_id)
            if row is None:
                raise NotFound(f"no CycleQD run with id {run_id}")
            row.generation, row.state, row.updated_at = int(generation), dict(state), utcnow()
            s.add(row)
        return row

    def put_archive_entry(
        self, run_id: int, task: str, cell: tuple, adapter_id: int, quality: float, scores: dict
    ) -> ArchiveEntry:
        """Puts an elite in a cell of `task`'s archive, replacing the cell's previous occupant.

        Whether the newcomer deserves the cell is the caller's decision (it knows the rule).
        """
        key = cell_key(cell)

        def upsert() -> ArchiveEntry:
            with self.db.write() as s:
                row = s.exec(select(ArchiveEntry).where(ArchiveEntry.run_id == run_id, ArchiveEntry.task == task,
                                                        ArchiveEntry.cell_key == key)).first()
                if row is None:
                    row = ArchiveEntry(run_id=run_id, task=task, cell_key=key, cell=[int(c) for c in cell],
                                       adapter_id=adapter_id, quality=float(quality), scores=dict(scores))
                else:
                    row.adapter_id, row.quality, row.scores, row.updated_at = adapter_id, float(quality), dict(scores), utcnow()
                s.add(row)
            return row

        return retrying(upsert)

    def archive(self, run_id: int, task: str) -> list[ArchiveEntry]:
        with self.db.read() as s:
            q = select(ArchiveEntry).where(ArchiveEntry.run_id == run_id, ArchiveEntry.task == task).order_by(ArchiveEntry.cell_key)
            return list(s.exec(q).all())

    def cached_score(self, adapter_hash: str, task: str) -> Optional[float]:
        with self.db.read() as s:
            row = s.get(ScoreCache, (adapter_hash, task))
        return None if row is None else row.score

    def put_cached_score(self, adapter_hash: str, task: str, score: float, episodes: int = 0, detail: Optional[dict] = None) -> None:
        def upsert() -> None:
            with self.db.write() as s:
                row = s.get(ScoreCache, (adapter_hash, task)) or ScoreCache(adapter_hash=adapter_hash, task=task, score=0.0)
                row.score, row.episodes, row.detail = float(score), int(episodes), dict(detail or {})
                s.add(row)

        retrying(upsert)
