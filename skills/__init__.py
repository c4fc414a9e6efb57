"""The skill store: versioned SKILL.md skills, adapters, trajectories, scores and CycleQD state in one database.

Names are loaded on first use, so importing a light part (`skills.kinds`, `skills.errors`) does
not pay for SQLAlchemy; a command line that only shows help starts without it.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "ArtifactError": "errors", "NotFound": "errors", "Problem": "errors", "SkillFormatError": "errors",
    "StaleVersion": "errors", "StoreError": "errors",
    "AdapterKind": "kinds", "Origin": "kinds", "SubjectKind": "kinds",
    "SearchHit": "retrieval",
    "Adapter": "schema", "ArchiveEntry": "schema", "QdRun": "schema", "Score": "schema", "Session": "schema",
    "Skill": "schema", "SkillVersion": "schema", "Trajectory": "schema",
    "SkillSummary": "store", "Store": "store",
    "ImportReport": "versions",
}
_ALIASES = {"AdapterRecord": "Adapter"}

__all__ = [
    "Adapter", "AdapterKind", "AdapterRecord", "ArchiveEntry", "ArtifactError", "ImportReport", "NotFound", "Origin",
    "Problem", "QdRun", "Score", "SearchHit", "Session", "Skill", "SkillFormatError", "SkillSummary", "SkillVersion",
    "StaleVersion", "Store", "StoreError", "SubjectKind", "Trajectory",
]


def __getattr__(name: str) -> Any:
    target = _ALIASES.get(name, name)
    if target not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[target]}"), target)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from skillgraft.skills.errors import ArtifactError, NotFound, Problem, SkillFormatError, StaleVersion, StoreError
    from skillgraft.skills.kinds import AdapterKind, Origin, SubjectKind
    from skillgraft.skills.retrieval import SearchHit
    from skillgraft.skills.schema import Adapter, ArchiveEntry, QdRun, Score, Session, Skill, SkillVersion, Trajectory
    from skillgraft.skills.store import SkillSummary, Store
    from skillgraft.skills.versions import ImportReport

    AdapterRecord = Adapter
