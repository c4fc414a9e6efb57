"""The skill store: versioned SKILL.md skills, adapters, trajectories, scores and CycleQD state in one database."""
from skillgraft.skills.errors import ArtifactError, NotFound, Problem, SkillFormatError, StaleVersion, StoreError
from skillgraft.skills.retrieval import SearchHit
from skillgraft.skills.schema import (
    Adapter,
    AdapterKind,
    ArchiveEntry,
    Origin,
    QdRun,
    Score,
    Session,
    Skill,
    SkillVersion,
    SubjectKind,
    Trajectory,
)
from skillgraft.skills.store import SkillSummary, Store
from skillgraft.skills.versions import ImportReport

AdapterRecord = Adapter

__all__ = [
    "Adapter", "AdapterKind", "AdapterRecord", "ArchiveEntry", "ArtifactError", "ImportReport", "NotFound", "Origin",
    "Problem", "QdRun", "Score", "SearchHit", "Session", "Skill", "SkillFormatError", "SkillSummary", "SkillVersion",
    "StaleVersion", "Store", "StoreError", "SubjectKind", "Trajectory",
]
