"""The families of planted bugs, and which of them the policy sees in training.

Seen families appear in the policy's training data (some episodes with their skill in
context, some without). Skill-only families never do: only their skill text exists, so
a policy can solve them only through the skill, which is what the evaluation measures.
Drill families (drills.py) are for training only: many one-token swaps that only their skill
explains, so that the policy learns to read a skill instead of recalling a family's edit.
Learning families have no skill and no training data, yet are near enough to what the policy
knows that it solves some of their tasks: a success there is what online learning summarises
into a skill. They are not background code in other tasks, so adding one changes no other
family's tasks.

A family is one module of this package that declares FAMILY, with its group and its order; the
package finds them, and the lists below are derived from what they declare.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

from skillgraft.skillworld.families.base import GROUP_NAMES, Family, Planted
from skillgraft.skillworld.families.drills import DRILL_FAMILIES


def discover(path: Iterable[str], package: str) -> list[Family]:
    """The FAMILY that each module of a package declares, in the families' declared order."""
    found = []
    for info in pkgutil.iter_modules(path):
        module = importlib.import_module(f"{package}.{info.name}")
        if hasattr(module, "FAMILY"):
            found.append(module.FAMILY)
    for key in ("name", "order"):
        values = [getattr(f, key) for f in found]
        shared = sorted({v for v in values if values.count(v) > 1})
        if shared:
            raise ValueError(f"families of {package} share the {key} {shared}")
    unordered = [f.name for f in found if f.order < 1]
    if unordered:
        raise ValueError(f"families of {package} without an order (a number from 1): {unordered}")
    return sorted(found, key=lambda f: f.order)


FAMILIES: dict[str, Family] = {f.name: f for f in discover(__path__, __name__)} | DRILL_FAMILIES
GROUPS: dict[str, list[str]] = {g: [name for name, f in FAMILIES.items() if f.group == g] for g in GROUP_NAMES}
SEEN, SKILL_ONLY, DRILL, LEARNING = GROUPS["seen"], GROUPS["skill-only"], GROUPS["drill"], GROUPS["learning"]
BENCHMARK = SEEN + SKILL_ONLY  # what "all" means: the families the evaluation reports on


def resolve(names: list[str] | None) -> list[str]:
    """Family names from a mix of family names and group names ("seen", "skill-only", "drill",
    "learning", "all"); "all", and no names at all, mean the seen and skill-only families."""
    if not names:
        return list(BENCHMARK)
    out: list[str] = []
    for name in names:
        if name == "all":
            out += BENCHMARK
        elif name in GROUPS:
            out += GROUPS[name]
        elif name in FAMILIES:
            out.append(name)
        else:
            known = ", ".join(["all", *GROUPS, *FAMILIES])
            raise KeyError(f"unknown family {name!r}; known: {known}")
    return list(dict.fromkeys(out))


__all__ = ["FAMILIES", "SEEN", "SKILL_ONLY", "DRILL", "LEARNING", "BENCHMARK", "GROUPS", "Family", "Planted", "discover", "resolve"]
