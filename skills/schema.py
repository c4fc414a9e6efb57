"""The store's tables.

Rows that name an artifact (a skill version's resources, an adapter folder, a trajectory file)
carry its content hash; the files live in the artifact folder (see artifacts.py). Skill
versions and adapters are append-only: a change is a new row whose parent is the old one.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import JSON, Column, Index, LargeBinary, Text, UniqueConstraint, event
from sqlmodel import Field, SQLModel

from skillgraft.skills.kinds import AdapterKind, Origin, SubjectKind  # noqa: F401  (also named from here)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def saved_id(row_id: Optional[int]) -> int:
    """The id of a row read from (or flushed to) the database; only a row never saved has None."""
    if row_id is None:
        raise ValueError("this row has not been saved, so it has no id yet")
    return row_id


def _json(**kw: Any) -> Any:
    return Field(default_factory=kw.pop("default_factory", dict), sa_column=Column(JSON, nullable=False), **kw)


class Skill(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class SkillVersion(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("skill_id", "number", name="uq_skillversion_number"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    skill_id: int = Field(foreign_key="skill.id", index=True)
    skill_name: str = Field(index=True, max_length=64)
    number: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    body: str = Field(sa_column=Column(Text, nullable=False))
    description: str = Field(sa_column=Column(Text, nullable=False))
    frontmatter: dict = _json()
    content_hash: str = Field(index=True, max_length=64)
    resources_hash: Optional[str] = Field(default=None, max_length=64)
    parent_id: Optional[int] = Field(default=None, foreign_key="skillversion.id")
    origin: str = Field(default=Origin.authored.value, max_length=16)
    trajectory_id: Optional[int] = Field(default=None, foreign_key="trajectory.id", index=True)  # what a run taught
    run_id: Optional[int] = Field(default=None, foreign_key="qdrun.id")
    session_id: Optional[int] = Field(default=None, foreign_key="session.id")
    created_at: datetime = Field(default_factory=utcnow)


class Adapter(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("name", "version", name="uq_adapter_version"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(index=True, max_length=128)
    version: int
    kind: str = Field(index=True, max_length=16)
    base_fingerprint: str = Field(max_length=128)
    rank: int
    alpha: float
    target_modules: list = _json(default_factory=list)
    # What made it: {"skill_version_id", "hypernet_ckpt"} for a compiled skill, or
    # {"combined": [{"adapter_id", "weight"}, ...], "method": "ema"|"merge"|...} for a combination.
    provenance: dict = _json()
    skill_version_id: Optional[int] = Field(default=None, foreign_key="skillversion.id", index=True)
    hypernet_ckpt: Optional[str] = Field(default=None, max_length=128, index=True)
    artifact_hash: str = Field(index=True, max_length=64)
    parent_id: Optional[int] = Field(default=None, foreign_key="adapter.id")
    created_at: datetime = Field(default_factory=utcnow)


class Session(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    kind: str = Field(max_length=32)
    config: dict = _json()
    summary: Optional[dict] = Field(default=None, sa_column=Column(JSON, nullable=True))
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: Optional[datetime] = None


class Trajectory(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    task_id: str = Field(index=True, max_length=256)
    family: Optional[str] = Field(default=None, index=True, max_length=128)
    outcome: str = Field(max_length=32)
    reward: float = 0.0
    cost: float = 0.0
    steps: int = 0
    timings: dict = _json()
    model: Optional[str] = Field(default=None, max_length=256)
    artifact_hash: str = Field(index=True, max_length=64)
    file_name: str = Field(default="trajectory.json", max_length=256)
    skill_version_ids: list = _json(default_factory=list)
    adapter_ids: list = _json(default_factory=list)
    session_id: Optional[int] = Field(default=None, foreign_key="session.id", index=True)
    created_at: datetime = Field(default_factory=utcnow)


class TrajectorySkill(SQLModel, table=True):
    """Which skill versions a trajectory had; a join table so `--skill NAME` is one indexed query."""

    trajectory_id: int = Field(foreign_key="trajectory.id", primary_key=True)
    skill_version_id: int = Field(foreign_key="skillversion.id", primary_key=True, index=True)


class TrajectoryAdapter(SQLModel, table=True):
    trajectory_id: int = Field(foreign_key="trajectory.id", primary_key=True)
    adapter_id: int = Field(foreign_key="adapter.id", primary_key=True, index=True)


class Score(SQLModel, table=True):
    __table_args__ = (Index("ix_score_subject", "subject_kind", "subject_id"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    subject_kind: str = Field(max_length=16)
    subject_id: int
    family: str = Field(index=True, max_length=128)
    score: float
    episodes: int
    condition: Optional[str] = Field(default=None, max_length=64)
    session_id: Optional[int] = Field(default=None, foreign_key="session.id", index=True)
    created_at: datetime = Field(default_factory=utcnow)


class QdRun(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    config: dict = _json()
    generation: int = 0
    state: dict = _json()
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ArchiveEntry(SQLModel, table=True):
    """One occupied cell of one task's MAP-Elites archive; a better elite replaces the row."""

    __table_args__ = (UniqueConstraint("run_id", "task", "cell_key", name="uq_archive_cell"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="qdrun.id", index=True)
    task: str = Field(max_length=128)
    cell: list = _json(default_factory=list)
    cell_key: str = Field(max_length=256)
    adapter_id: int = Field(foreign_key="adapter.id")
    quality: float
    scores: dict = _json()
    updated_at: datetime = Field(default_factory=utcnow)


class ScoreCache(SQLModel, table=True):
    """Evaluations keyed by adapter content, so an identical merge is never evaluated twice."""

    adapter_hash: str = Field(primary_key=True, max_length=64)
    task: str = Field(primary_key=True, max_length=128)
    score: float
    episodes: int = 0
    detail: dict = _json()
    created_at: datetime = Field(default_factory=utcnow)


class Embedding(SQLModel, table=True):
    """Text embeddings keyed by the hash of the embedded text, so nothing is embedded twice."""

    content_hash: str = Field(primary_key=True, max_length=64)
    model: str = Field(primary_key=True, max_length=128)
    dim: int
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class ImmutableRowError(RuntimeError):
    pass


@event.listens_for(SkillVersion, "before_update")
def _skill_versions_are_immutable(mapper, connection, target) -> None:  # noqa: ANN001
    raise ImmutableRowError(f"skill version {target.id} is immutable; add a new version instead")


@event.listens_for(Adapter, "before_update")
def _adapters_are_immutable(mapper, connection, target) -> None:  # noqa: ANN001
    raise ImmutableRowError(f"adapter {target.id} is immutable; commit a new version instead")
