"""The summariser seam: a successful episode in, the text of a skill (a whole SKILL.md) out.

Every summariser must hand back text the store accepts, so the check lives here, once, and
uses the store's own SKILL.md rules rather than a second opinion of them.
"""
from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from skillgraft.evolve.learn.episode import Episode
from skillgraft.skills.errors import Problem, SkillFormatError
from skillgraft.skills.skillmd import NAME_MAX, parse

_NOT_NAME = re.compile(r"[^a-z0-9]+")


class SummaryError(RuntimeError):
    """No valid skill text could be produced from the episode."""


@runtime_checkable
class Summariser(Protocol):
    name: str

    def summarise(self, episode: Episode, skill_name: str, previous: str | None = None) -> str:
        """SKILL.md text for `skill_name` that captures what solved `episode`.

        `previous` is the current text of that skill when it exists, so the result can be a new
        version of it rather than a stranger to it.
        """
        ...


def check_skill_text(text: str, skill_name: str) -> str:
    """Returns the text when the store would accept it as `skill_name`; SkillFormatError otherwise."""
    doc = parse(text, path=f"{skill_name}/SKILL.md", folder_name=skill_name)
    if not doc.body.strip():
        raise SkillFormatError([Problem(f"{skill_name}/SKILL.md", "body", "must not be empty: the body is the recipe")])
    return text


def skill_name_for(label: str) -> str:
    """A valid skill name made from a family or task id ("Off by one!" -> "off-by-one")."""
    slug = _NOT_NAME.sub("-", label.lower()).strip("-")[:NAME_MAX].strip("-")
    return slug or "skill"


def name_for_episode(episode: Episode) -> str:
    """Where a summary of this episode belongs when no skill was used: its family, else its task."""
    return skill_name_for(episode.family or episode.task_id)
