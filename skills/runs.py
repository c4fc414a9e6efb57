"""What happened: sessions, trajectories (file in the artifact store, facts in the row), scores."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from sqlalchemy import case
from sqlmodel import col, func, select

from skillgraft.skills.errors import NotFound
from skillgraft.skills.owner import owner_gone, this_process
from skillgraft.skills.schema import (
    Score, Session, SkillVersion, SubjectKind, Trajectory, TrajectoryAdapter, TrajectorySkill, saved_id, utcnow,
)
from skillgraft.skills.store_parts import StorePart


OWNER = "owner"


class Runs(StorePart):
    """Store's sessions, trajectories and scores."""

    # ---- sessions ----------------------------------------------------------------------------
    # A session's config records its owner (host and process, under OWNER). A session with no end
    # whose owner is gone was interrupted: `interrupted_sessions` finds it, `close_interrupted`
    # ends it with what it had finished, and `resumable_session` hands it to the next run of the
    # same config, which carries on where it stopped.
    def start_session(self, kind: str, config: dict) -> Session:
        with self.db.write() as s:
            row = Session(kind=kind, config={**config, OWNER: this_process()})
            s.add(row)
        return row

    def interrupted_sessions(self) -> list[Session]:
        """Sessions never ended whose owning process (on this host) is gone."""
        with self.db.read() as s:
            open_rows = list(s.exec(select(Session).where(col(Session.ended_at).is_(None)).order_by(col(Session.id))).all())
        return [row for row in open_rows if owner_gone((row.config or {}).get(OWNER))]

    def close_interrupted(self, session_id: int) -> Session:
        """Ends a session as interrupted; its summary counts the runs it had finished."""
        done = self.trajectories(session_id=session_id)
        successes = sum(1 for t in done if t.reward > 0)
        return self.end_session(session_id, {"interrupted": True, "episodes": len(done), "successes": successes,
                                             "rate": successes / len(done) if done else 0.0})

    def resumable_session(self, kind: str, config: dict) -> Optional[Session]:
        """The newest interrupted session of this kind and config (owner aside), taken over by this
        process and reopened; None when there is none."""
        def same(row: Session) -> bool:
            return {k: v for k, v in (row.config or {}).items() if k != OWNER} == {k: v for k, v in config.items() if k != OWNER}

        for row in reversed(self.sessions(kind=kind)):
            if not same(row):
                continue
            interrupted = row.ended_at is not None and (row.summary or {}).get("interrupted")
            if not (interrupted or (row.ended_at is None and owner_gone((row.config or {}).get(OWNER)))):
                return None  # the newest run of this config finished (or is running): nothing to resume
            with self.db.write() as s:
                row = _session_row(s, saved_id(row.id))
                row.config, row.summary, row.ended_at = {**row.config, OWNER: this_process()}, None, None
                s.add(row)
            return row
        return None

    def end_session(self, session_id: int, summary: dict) -> Session:
        with self.db.write() as s:
            row = _session_row(s, session_id)
            row.summary, row.ended_at = dict(summary), utcnow()
            s.add(row)
        return row

    def session(self, session_id: int) -> Session:
        with self.db.read() as s:
            row = s.get(Session, session_id)
        if row is None:
            raise NotFound(f"no session with id {session_id}")
        return row

    def sessions(self, kind: Optional[str] = None) -> list[Session]:
        q = select(Session).order_by(col(Session.id))
        if kind is not None:
            q = q.where(Session.kind == kind)
        with self.db.read() as s:
            return list(s.exec(q).all())

    # ---- trajectories ------------------------------------------------------------------------
    def add_trajectory(
        self,
        json_path: Path,
        task_id: str,
        family: Optional[str],
        outcome: str,
        reward: float,
        cost: float,
        steps: int,
        timings: dict,
        skill_version_ids: Sequence[int],
        adapter_ids: Sequence[int],
        session_id: Optional[int] = None,
        model: Optional[str] = None,
    ) -> Trajectory:
        """Copies the trajectory file into the artifact store and records the run."""
        json_path = Path(json_path)
        artifact = self.artifacts.put_files({json_path.name: json_path})
        with self.db.write() as s:
            row = Trajectory(
                task_id=task_id, family=family, outcome=outcome, reward=float(reward), cost=float(cost),
                steps=int(steps), timings=dict(timings), model=model, artifact_hash=artifact, file_name=json_path.name,
                skill_version_ids=[int(i) for i in skill_version_ids], adapter_ids=[int(i) for i in adapter_ids],
                session_id=session_id,
            )
            s.add(row)
            s.flush()
            row_id = saved_id(row.id)
            s.add_all(TrajectorySkill(trajectory_id=row_id, skill_version_id=int(v)) for v in dict.fromkeys(skill_version_ids))
            s.add_all(TrajectoryAdapter(trajectory_id=row_id, adapter_id=int(a)) for a in dict.fromkeys(adapter_ids))
        return row

    def trajectory(self, trajectory_id: int) -> Trajectory:
        with self.db.read() as s:
            row = s.get(Trajectory, trajectory_id)
        if row is None:
            raise NotFound(f"no trajectory with id {trajectory_id}")
        return row

    def trajectory_path(self, trajectory: Trajectory | int) -> Path:
        """The stored trajectory JSON file (read it, never write it)."""
        row = self.trajectory(trajectory) if isinstance(trajectory, int) else trajectory
        return self.artifacts.path(row.artifact_hash) / row.file_name

    def trajectories(
        self, skill: Optional[str] = None, session_id: Optional[int] = None, limit: Optional[int] = None, offset: int = 0,
    ) -> list[Trajectory]:
        """Newest first; `skill` keeps runs that had any version of that skill."""
        q = _filtered(select(Trajectory).order_by(col(Trajectory.id).desc()), skill, session_id).offset(offset)
        if limit is not None:
            q = q.limit(limit)
        with self.db.read() as s:
            return list(s.exec(q).all())

    def count_trajectories(self, skill: Optional[str] = None, session_id: Optional[int] = None) -> int:
        with self.db.read() as s:
            return int(s.exec(_filtered(select(func.count()).select_from(Trajectory), skill, session_id)).one())

    def version_record(self, version_id: int, also: Optional[int] = None) -> tuple[int, int]:
        """(solved, runs) over the session runs that were given a skill version, and the run
        `also` if it was given it too (a practice run, say, which belongs to no session)."""
        given = select(TrajectorySkill.trajectory_id).where(TrajectorySkill.skill_version_id == version_id)
        counted = col(Trajectory.session_id).is_not(None) | (col(Trajectory.id) == also)
        q = (select(func.count(), func.coalesce(func.sum(case((col(Trajectory.reward) > 0, 1), else_=0)), 0))
             .where(col(Trajectory.id).in_(given), counted))
        with self.db.read() as s:
            runs, solved = s.exec(q).one()
        return int(solved), int(runs)

    # ---- scores ------------------------------------------------------------------------------
    def add_score(
        self,
        subject_kind: str | SubjectKind,
        subject_id: int,
        family: str,
        score: float,
        episodes: int,
        condition: Optional[str] = None,
        session_id: Optional[int] = None,
    ) -> Score:
        """Records that a skill version, adapter or checkpoint scored `score` over `episodes` on a family."""
        with self.db.write() as s:
            row = Score(subject_kind=SubjectKind(subject_kind).value, subject_id=int(subject_id), family=family,
                        score=float(score), episodes=int(episodes), condition=condition, session_id=session_id)
            s.add(row)
        return row

    def scores(
        self,
        subject_kind: Optional[str | SubjectKind] = None,
        subject_id: Optional[int | Sequence[int]] = None,
        family: Optional[str] = None,
        condition: Optional[str] = None,
        session_id: Optional[int] = None,
    ) -> list[Score]:
        q = select(Score).order_by(col(Score.id))
        if subject_kind is not None:
            q = q.where(Score.subject_kind == SubjectKind(subject_kind).value)
        if subject_id is not None:
            ids = [subject_id] if isinstance(subject_id, int) else list(subject_id)
            q = q.where(col(Score.subject_id).in_(ids))
        if family is not None:
            q = q.where(Score.family == family)
        if condition is not None:
            q = q.where(Score.condition == condition)
        if session_id is not None:
            q = q.where(Score.session_id == session_id)
        with self.db.read() as s:
            return list(s.exec(q).all())


def _session_row(s, session_id: int) -> Session:  # noqa: ANN001
    row = s.get(Session, session_id)
    if row is None:
        raise NotFound(f"no session with id {session_id}")
    return row


def _filtered(q, skill: Optional[str], session_id: Optional[int]):  # noqa: ANN001, ANN202 - a select over Trajectory
    if skill is not None:
        used = (
            select(TrajectorySkill.trajectory_id)
            .join(SkillVersion, col(SkillVersion.id) == TrajectorySkill.skill_version_id)
            .where(SkillVersion.skill_name == skill)
        )
        q = q.where(col(Trajectory.id).in_(used))
    if session_id is not None:
        q = q.where(Trajectory.session_id == session_id)
    return q
