"""The world's skill library, by family: the SKILL.md folders shipped beside this file, and the
drills' skills, which are written from each drill's edit (skillworld.families.drills)."""
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
    folder: Path | None  # None for a drill's skill, which exists only in memory

    @property
    def text(self) -> str:
        if self.folder is None:
            return f"---\nname: {self.name}\ndescription: {self.description}\n---\n\n{self.body}\n"
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
    from skillgraft.skillworld.families.drills import BY_FAMILY

    if family in BY_FAMILY:
        drill = BY_FAMILY[family]
        if drill.draw:
            raise KeyError(f"{family} draws its values per task: its skills are for_task(family, seed)")
        return drill_skills(family, drill.old, drill.new)
    found = [s for s in skills() if s.family == family]
    if not found:
        raise KeyError(f"no skill for family {family!r}")
    return found


def for_task(family: str, seed: int) -> list[WorldSkill]:
    """The skills that fit one task: its family's, or, for a drill whose values are drawn per
    task, skills written from that task's own values."""
    from skillgraft.skillworld.families.drills import BY_FAMILY
    from skillgraft.skillworld.generate import generate

    if family in BY_FAMILY and BY_FAMILY[family].draw:
        planted = generate(family, seed).planted
        return drill_skills(family, planted.old, planted.new)
    return for_family(family)


def every_skill() -> list[WorldSkill]:
    """The shipped skills and every drill's: all the skill text the world has (for a drill
    whose values are drawn per task, the skills of its first few tasks)."""
    from skillgraft.skillworld.families.drills import BY_FAMILY

    out = list(skills())
    for family, drill in BY_FAMILY.items():
        for seed in range(4) if drill.draw else [0]:
            out += for_task(family, seed)
    return out


def pick(family: str, rng: random.Random, seed: int = 0) -> WorldSkill:
    """One of the paraphrases that fit the family's task of this seed, so a policy cannot lean
    on one exact text."""
    return rng.choice(for_task(family, seed))


RUN = "`COLUMNS=150 python3 -m pytest -q --tb=no -rf | tail -n 2`"
FIND = '`grep -rn -B 3 -A 5 "def NAME(" --exclude-dir=tests .`'
CHECK = "`python3 -m pytest -q --tb=no | tail -n 1`"


@lru_cache(maxsize=None)
def drill_skills(family: str, old: str, new: str) -> list[WorldSkill]:
    """A drill's skill in the three styles of the shipped ones (recipe, steps, notes)."""
    sed = f"`sed -i '/def NAME(/,/^$/s/{old}/{new}/' FILE`"
    when = f"a function has `{old}` where the tests need `{new}`"
    slug = family.replace("_", "-")
    bodies = {
        "recipe": f"# `{old}` where `{new}` is needed\n\nUse when {when}.\n\n"
                  f"1. Run the tests: {RUN}. The FAILED line names test_NAME.\n"
                  f"2. Show the code with line numbers: {FIND}\n"
                  f"3. In NAME's block, replace `{old}` with `{new}`: {sed}\n"
                  f"4. Check: {CHECK}. When all tests pass, run `submit`.",
        "steps": f"# Recipe: `{new}`, not `{old}`\n\n## When\nThe suite fails because {when}.\n\n## Steps\n"
                 f"- {RUN} to get the failing test, test_NAME.\n- {FIND} prints FILE and the code of NAME.\n"
                 f"- The bug is the line with `{old}`; it must read `{new}`.\n- Edit it inside NAME's block only: {sed}\n"
                 f"- {CHECK} must say passed; then `submit`.",
        "notes": f"# `{old}` where `{new}` is needed: notes\n\nCause: {when}.\n\n"
                 f"Locate NAME (from test_NAME) with {FIND}, then the line with `{old}`.\n"
                 f"Fix: swap `{old}` for `{new}` with {sed} (FILE from the grep output).\n"
                 f"Verify with {CHECK} and finish with `submit`. Start from {RUN}.",
    }
    return [WorldSkill(f"fix-{slug}-{style}", family, f"How to fix a failing test when {when}.", body, None)
            for style, body in bodies.items()]
