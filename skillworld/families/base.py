"""What a family plants: one block of code with one bug, its fix, and the test that pins it."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from skillworld.names import NamePool


@dataclass
class Planted:
    """A block (helper functions, a constant or a function) as it appears in a module.

    The fix is one sed script on one line of the buggy block: `{line}s/{old}/{new}/`, or, when
    `insert_import` is set, `1i import {module}` at the top of the file. `old` and `new` are
    written for sed (basic regex, `/` as delimiter) so the expert and the skills can quote them.
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
    why: str = ""  # the expert's one-line diagnosis, with {line} for the line number

    def sed_script(self, line: int) -> str:
        if self.insert_import:
            return f"1i import {self.insert_import}"
        return f"{line}s/{self.old}/{self.new}/"

    def check(self) -> None:
        for text in (self.old, self.new):
            if "/" in text or "&" in text or "'" in text:
                raise ValueError(f"{self.family}: {text!r} cannot be quoted in a sed script")
        if not self.insert_import and self.old.rstrip("$") not in self.buggy[self.bug_line]:
            raise ValueError(f"{self.family}: {self.old!r} is not on the buggy line")


@dataclass(frozen=True)
class Family:
    name: str  # snake_case id, also the task's `family`
    title: str
    plant: Callable[[random.Random, NamePool], Planted]
    filler: bool = True  # whether its fixed form may appear as background code in other tasks


def literal(value: object) -> str:
    """A Python literal as the tests and the failure messages print it."""
    return repr(value)
