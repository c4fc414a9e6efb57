"""How skills reach the model; light, so a command line can offer it as an option."""
from __future__ import annotations

from enum import Enum


class SkillMode(str, Enum):
    """How skills reach the model: as text in the prompt, compiled into the weights, or both."""

    context = "context"
    parametric = "parametric"
    both = "both"

    @property
    def in_context(self) -> bool:
        return self is not SkillMode.parametric

    @property
    def compiled(self) -> bool:
        return self is not SkillMode.context
