"""The kinds of things the store tells apart, light enough for a command line's options."""
from __future__ import annotations

from enum import Enum


class Origin(str, Enum):
    imported = "imported"
    authored = "authored"
    summarised = "summarised"
    refined = "refined"
    merged = "merged"


class AdapterKind(str, Enum):
    skill = "skill"
    global_ = "global"
    checkpoint = "checkpoint"


class SubjectKind(str, Enum):
    skill_version = "skill_version"
    adapter = "adapter"
    checkpoint = "checkpoint"
