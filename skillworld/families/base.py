"""What a family plants: one block of code with one bug, its fix, and the test that pins it."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from skillgraft.skillworld.names import NamePool


@dataclass
class Planted:
    """A block (helper functions, a constant or a function) as it appears in a module.

    The fix is one sed script whose address is the block itself, from the line the expert
    grepped for to the next blank line: `/{lookup}/,/^$/s/{old}/{new}/`, or, when
    `insert_import` is set, `1i import {module}` at the top of the file. Addressing the block by
    what the failing test names, rather than by a line number, spares the policy a lookup (find
    the buggy line, then read back the number printed before it). `old` and `new` are written
    for sed (basic regex, `/` as delimiter) so the expert and the skills can quote them.
    """

    family: str
    name: str  # what the failing test is named after: a function or a constant
    lookup: str  # what the expert greps for to find the block: "def name(" or "NAME ="
    buggy: list[str]
    fixed: list[str]
    test: list[str]  # the test function's lines, calling or reading `name`
    bug_line: int = 0  # index into `buggy` of the line that the fix edits
    old: str = ""
    new: str = ""
    insert_import: str = ""  # a module the buggy file forgot to import
    imports: list[str] = field(default_factory=list)  # modules the fixed block needs
    why: str = ""  # the expert's one-line diagnosis

    def sed_script(self) -> str:
        if self.insert_import:
            return f"1i import {self.insert_import}"
        return f"/{self.lookup}/,/^$/s/{self.old}/{self.new}/"

    def check(self) -> None:
        for text in (self.old, self.new, self.lookup):
            if "/" in text or "&" in text or "'" in text:
                raise ValueError(f"{self.family}: {text!r} cannot be quoted in a sed script")
        if self.insert_import:
            return
        if self.old.rstrip("$") not in self.buggy[self.bug_line]:
            raise ValueError(f"{self.family}: {self.old!r} is not on the buggy line")
        start = next(i for i, line in enumerate(self.buggy) if self.lookup in line)
        block = self.buggy[start:]
        block = block[:block.index("")] if "" in block else block
        hits = [start + i for i, line in enumerate(block) if self.old.rstrip("$") in line]
        if hits != [self.bug_line]:
            raise ValueError(f"{self.family}: the block of {self.lookup!r} must hold {self.old!r} on the buggy line only")


# Seen families appear in the policy's training data; skill-only ones never do (only their skill
# text exists); drills are for training only; learning families have neither training data nor a
# skill: what online learning is for (see skillworld.families).
GROUP_NAMES = ("seen", "skill-only", "drill", "learning")
TRAINED_ON = ("seen", "skill-only", "drill")  # what the default model's recipe digest covers


@dataclass(frozen=True)
class Family:
    name: str  # snake_case id, also the task's `family`
    title: str
    plant: Callable[[random.Random, NamePool], Planted]
    filler: bool = True  # whether its fixed form may appear as background code in other tasks
    _: KW_ONLY
    group: str  # one of GROUP_NAMES
    # Its place among the families of the package's modules: a task's background code is drawn
    # from the filler families in this order, so a new family takes the next number and an
    # existing one never moves (that would change every generated task).
    order: int = 0

    def __post_init__(self) -> None:
        if self.group not in GROUP_NAMES:
            raise ValueError(f"family {self.name}: unknown group {self.group!r}; use one of {GROUP_NAMES}")


def skill_why(name: str, what: str = "function") -> str:
    """The diagnosis that defers to a skill: the expert's thought for a bug that only a skill
    explains (skill-only families and drills), and for every family's bug when its skill is in
    context. It names no edit: the edit that follows is copied from the skill's own sed script,
    whose text up to `s/` the command repeats, which is the easiest thing for a small model to
    copy."""
    return f"the {what} {name} has the bug the skill describes; make the skill's edit."


def pinned_constant(family: str, name: str, wrong: str, right: str) -> Planted:
    """A module constant `name = wrong` that a test pins to `right` (both as written in code).
    The edit is anchored at the line's end, so a value that begins another (0.1, 0.15) is safe."""
    return Planted(
        family=family, name=name, lookup=f"{name} =",
        buggy=[f"{name} = {wrong}"], fixed=[f"{name} = {right}"],
        test=[f"def test_{name}():", f"    assert {name} == {right}"],
        bug_line=0, old=f"{name} = {wrong}$", new=f"{name} = {right}",
        why=f"the constant {name} is {wrong}; the test pins {right}.",
    )


def literal(value: object) -> str:
    """A Python literal as the tests and the failure messages print it."""
    return repr(value)
