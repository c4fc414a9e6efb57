"""The store: one database and one artifact folder holding everything skillgraft learns.

    store = Store("sqlite:///home/store.db", Path("home/artifacts"))
    v = store.import_skill(Path("skills/fix-imports"))
    hits = store.search("ImportError when running pytest", k=3)

Each area of the API lives in its own module (versions, adapters, runs, qd, maintenance), a
part built on StorePart (store_parts.py); Adapters builds on SkillVersions and Maintenance on
Runs, whose methods they call. Store puts the parts together over a shared Database and
ArtifactStore.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional, cast

from sqlmodel import col, func, select

from skillgraft.skills.adapters import Adapters
from skillgraft.skills.artifacts import ArtifactStore
from skillgraft.skills.db import Database
from skillgraft.skills.embedder import BATCH, Embedder, store_embedder
from skillgraft.skills.maintenance import Maintenance
from skillgraft.skills.qd import QualityDiversity
from skillgraft.skills.retrieval import Retriever, SearchHit
from skillgraft.skills.runs import Runs
from skillgraft.skills.schema import Score, Skill, SkillVersion, SubjectKind, Trajectory, TrajectorySkill
from skillgraft.skills.versions import SkillVersions


@dataclass(frozen=True)
class SkillSummary:
    name: str
    version: int
    versions: int
    description: str
    origin: str
    uses: int
    score: Optional[float]
    updated_at: datetime
    last_used: Optional[datetime]


class Store(Adapters, SkillVersions, Maintenance, Runs, QualityDiversity):
    def __init__(
        self,
        url: str,
        artifacts: Path,
        embedder: Embedder | Callable[[], Embedder] | None = None,
        busy_timeout_s: float = 30.0,
    ):
        """`url`: any SQLAlchemy URL; `artifacts`: the content-addressed folder (created if absent).

        `embedder` defaults to all-MiniLM-L6-v2, loaded the first time a search needs it; its
        exported graph is kept in `cache/encoders` beside the artifact folder (HOME/cache in the
        default layout) unless SKILLGRAFT_ENCODER_CACHE names another folder.
        """
        self.url = url
        self.db = Database(url, busy_timeout_s)
        self.artifacts = ArtifactStore(Path(artifacts))
        if embedder is None:
            factory: Callable[[], Embedder] = lambda: store_embedder(Path(artifacts))  # noqa: E731
        elif callable(embedder) and not hasattr(embedder, "encode"):
            factory = embedder
        else:
            instance = cast(Embedder, embedder)  # it has .encode: the embedder itself, not a factory
            factory = lambda: instance  # noqa: E731
        self.retriever = Retriever(self.db, factory)

    @classmethod
    def at(cls, home: Path, **kw) -> "Store":
        """The default layout: home/store.db beside home/artifacts/."""
        home = Path(home)
        home.mkdir(parents=True, exist_ok=True)
        return cls(f"sqlite:///{home / 'store.db'}", home / "artifacts", **kw)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- retrieval -------------------------------------------------------------------------
    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The k skills most relevant to the query, best first (latest version of each)."""
        ranked = self.retriever.rank(query, k)
        return self._hits(ranked)

    def embed_pending(self, batch_size: int = BATCH, progress: Optional[Callable[[int], None]] = None) -> int:
        """Embeds every skill whose latest version has no cached embedding yet; returns how many changed."""
        return self.retriever.refresh(batch_size=batch_size, progress=progress)

    def _hits(self, ranked: list[tuple[int, float, float, float]]) -> list[SearchHit]:
        if not ranked:
            return []
        with self.db.read() as s:
            rows = {v.id: v for v in s.exec(select(SkillVersion).where(col(SkillVersion.id).in_([r[0] for r in ranked])))}
        return [SearchHit(rows[vid].skill_name, rows[vid], score, sem, lex) for vid, score, sem, lex in ranked if vid in rows]

    # ---- summaries for people ----------------------------------------------------------------
    def skill_summaries(self, names: Optional[list[str]] = None) -> list[SkillSummary]:
        """One line per skill (or per named skill): latest version, how often runs used it, how it
        scored, when it last changed."""
        latest = {v.skill_name: v for v in self.latest_versions(names)}

        def only(q):  # noqa: ANN001, ANN202 - a select over SkillVersion, narrowed to the named skills
            return q if names is None else q.where(col(SkillVersion.skill_name).in_(names))

        with self.db.read() as s:
            counts = dict(s.exec(only(select(SkillVersion.skill_name, func.count())).group_by(SkillVersion.skill_name)).all())
            uses = dict(s.exec(only(
                select(SkillVersion.skill_name, func.count(func.distinct(TrajectorySkill.trajectory_id)))
                .join(TrajectorySkill, col(TrajectorySkill.skill_version_id) == SkillVersion.id))
                .group_by(SkillVersion.skill_name)).all())
            last_used = dict(s.exec(only(
                select(SkillVersion.skill_name, func.max(Trajectory.created_at))
                .join(TrajectorySkill, col(TrajectorySkill.skill_version_id) == SkillVersion.id)
                .join(Trajectory, col(Trajectory.id) == TrajectorySkill.trajectory_id))
                .group_by(SkillVersion.skill_name)).all())
            scored = s.exec(only(
                select(SkillVersion.skill_name, Score.score, Score.episodes)
                .join(Score, (col(Score.subject_id) == SkillVersion.id)
                      & (col(Score.subject_kind) == SubjectKind.skill_version.value)))).all()
        totals: dict[str, list[float]] = {}
        for name, score, episodes in scored:
            t = totals.setdefault(name, [0.0, 0.0])
            t[0] += score * max(episodes, 1)
            t[1] += max(episodes, 1)
        return [
            SkillSummary(
                name=name, version=v.number, versions=counts.get(name, 0), description=v.description, origin=v.origin,
                uses=uses.get(name, 0), score=(totals[name][0] / totals[name][1]) if name in totals else None,
                updated_at=v.created_at, last_used=last_used.get(name),
            )
            for name, v in latest.items()
        ]

    def skill_names(self, offset: int = 0, limit: Optional[int] = None) -> tuple[int, list[str]]:
        """How many skills the store holds, and one page of their names in order."""
        with self.db.read() as s:
            total = s.exec(select(func.count()).select_from(Skill)).one()
            names = list(s.exec(select(Skill.name).order_by(col(Skill.name)).offset(offset).limit(limit)).all())
        return int(total), names

    def version_scores(self, version_ids: list[int]) -> dict[int, tuple[float, int]]:
        """Episode-weighted mean score and total episodes per skill version that has scores."""
        out: dict[int, list[float]] = {}
        for row in self.scores(SubjectKind.skill_version, version_ids) if version_ids else []:
            t = out.setdefault(row.subject_id, [0.0, 0])
            t[0] += row.score * max(row.episodes, 1)
            t[1] += max(row.episodes, 1)
        return {vid: (total / n, int(n)) for vid, (total, n) in out.items()}
