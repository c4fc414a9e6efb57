"""Errors the store raises; callers catch these by type rather than by message."""
from __future__ import annotations


class StoreError(Exception):
    """Base class for everything the store refuses."""


class NotFound(StoreError, LookupError):
    pass


class StaleVersion(StoreError):
    """Another writer committed a new version after the one this writer started from."""

    def __init__(self, name: str, expected_parent_id: int | None, actual_parent_id: int | None):
        self.name = name
        self.expected_parent_id = expected_parent_id
        self.actual_parent_id = actual_parent_id
        super().__init__(
            f"{name!r} moved on: expected to follow version id {expected_parent_id}, "
            f"but the latest is {actual_parent_id}; reload and retry"
        )


class ArtifactError(StoreError):
    pass


class SkillFormatError(StoreError, ValueError):
    """A SKILL.md that breaks the Agent Skills rules; `problems` holds every broken rule."""

    def __init__(self, problems: list["Problem"]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class Problem:
    """One broken rule: the file, the frontmatter field (or part of the file) and the rule."""

    __slots__ = ("path", "field", "rule")

    def __init__(self, path: str, field: str, rule: str):
        self.path, self.field, self.rule = path, field, rule

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.rule}"

    def __repr__(self) -> str:
        return f"Problem({self.path!r}, {self.field!r}, {self.rule!r})"
