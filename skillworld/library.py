"""The world's skill library: the SKILL.md folders shipped beside this file, by family."""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

SKILLS_DIR = Path(__file__).with_name("skills")


@dataclass(frozen=True)
class WorldSkill:
    name: str
    family: str
    description: str
    body: str
    folder: Path

    @property
    def text(self) -> str:
        return (self.folder / "SKILL.md").read_text()


@lru_cache(maxsize=1)
def skills() -> tuple[WorldSkill, ...]:
    out = []
    for md in sorted(SKILLS_DIR.glob("*/SKILL.md")):
        _, front, body = md.read_text().split("---\n", 2)
        meta = yaml.safe_load(front)
        out.append(WorldSkill(meta["name"], meta["metadata"]["family"], meta["description"], body.strip(), md.parent))
    return tuple(out)


def for_family(family: str) -> list[WorldSkill]:
    found = [s for s in skills() if s.family == family]
    if not found:
        raise KeyError(f"no skill for family {family!r}")
    return found


def pick(family: str, rng: random.Random) -> WorldSkill:
    """One of the family's paraphrases, so a policy cannot lean on one exact text."""
    return rng.choice(for_family(family))
