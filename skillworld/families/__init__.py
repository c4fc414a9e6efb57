"""The families of planted bugs, and which of them the policy sees in training.

Seen families appear in the policy's training data (some episodes with their skill in
context, some without). Skill-only families never do: only their skill text exists, so
a policy can solve them only through the skill, which is what the evaluation measures.
Drill families (drills.py) are for training only: many one-token swaps that only their skill
explains, so that the policy learns to read a skill instead of recalling a family's edit.
"""
from __future__ import annotations

from skillworld.families import (
    inverted_comparison, missing_import, missing_return, misspelt_call, off_by_one,
    swapped_arguments, wrong_boolean, wrong_case_method, wrong_constant, wrong_default,
    wrong_dict_key, wrong_format, wrong_operator,
)
from skillworld.families.base import Family, Planted
from skillworld.families.drills import DRILL_FAMILIES

FAMILIES: dict[str, Family] = {m.FAMILY.name: m.FAMILY for m in (
    off_by_one, wrong_operator, inverted_comparison, missing_import, misspelt_call,
    swapped_arguments, missing_return, wrong_constant, wrong_dict_key,
    wrong_boolean, wrong_case_method, wrong_format, wrong_default,
)} | DRILL_FAMILIES
SEEN = ["off_by_one", "wrong_operator", "inverted_comparison", "missing_import", "misspelt_call",
        "swapped_arguments", "missing_return", "wrong_constant", "wrong_dict_key"]
SKILL_ONLY = ["wrong_boolean", "wrong_case_method", "wrong_format", "wrong_default"]
DRILL = list(DRILL_FAMILIES)
BENCHMARK = SEEN + SKILL_ONLY  # what "all" means: the families the evaluation reports on
GROUPS = {"seen": SEEN, "skill-only": SKILL_ONLY, "drill": DRILL}


def resolve(names: list[str] | None) -> list[str]:
    """Family names from a mix of family names and group names ("seen", "skill-only", "drill",
    "all"); "all", and no names at all, mean the seen and skill-only families."""
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


__all__ = ["FAMILIES", "SEEN", "SKILL_ONLY", "DRILL", "BENCHMARK", "GROUPS", "Family", "Planted", "resolve"]
