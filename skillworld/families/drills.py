"""Drill families: training-only bugs whose fix only their skill gives.

A policy that has memorised the seen families' edits has no reason to read a skill: with or
without one in context, the same edit works. Drills remove that shortcut. Each drill is a
one-call swap inside a group of interchangeable calls (`min(` where `sum(` is needed,
`.strip()` where `.title()` is, ...), every ordered pair of the group a drill of its own. The
buggy code shows which call is wrong but not which one is right: `min(` may have to become
`max(`, `sum(`, `len(`, `any(` or `all(`, so in training the edit can only be found by copying
it out of the skill in context. Four more drills draw their two values per task (a number, a
string, a format precision, a `.get` default), so that not even the drill's name tells the fix.
That is what a skill-only family asks of the policy at test time. No drill makes a skill-only
family's edit (or/and, upper/lower, :.1f/:.2f, a default of 1/0; the drawn precisions and
defaults skip exactly those pairs), so reading, not recall, is what carries over.

The expected value a drill's test pins is computed by running the fixed code, so every drill is
right by construction; `plant` keeps drawing arguments until the buggy code gets them wrong.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from itertools import permutations

from skillgraft.skillworld.families.base import Family, Planted, skill_why
from skillgraft.skillworld.names import LIST_VARS, NamePool

TEXT_VARS = ["text", "name", "label", "word", "line"]
MAP_VARS = ["counts", "table", "prices", "stock"]
NUM_VARS = ["x", "value", "amount", "n"]


@dataclass(frozen=True)
class Drill:
    slug: str
    old: str  # as it appears in the code, and in the skill's sed script
    new: str
    expr: str  # the expression the function returns, with {v} for its parameter and {A} for old/new
    variables: tuple[str, ...]
    args: tuple[object, ...]  # candidate arguments for the test
    imports: tuple[str, ...] = ()
    draw: Callable[[random.Random], tuple[str, str]] | None = None  # old and new drawn per task instead

    def values(self, rng: random.Random) -> tuple[str, str]:
        return self.draw(rng) if self.draw else (self.old, self.new)


@dataclass(frozen=True)
class Group:
    """Calls that fit the same place in the same expression; each ordered pair is a drill."""

    calls: dict[str, str]  # short name (for the slug) -> the call as written in code
    expr: str
    variables: tuple[str, ...]
    args: tuple[object, ...]
    imports: tuple[str, ...] = ()

    def drills(self) -> list[Drill]:
        return [Drill(f"{a}_{b}", self.calls[a], self.calls[b], self.expr, self.variables, self.args, self.imports)
                for a, b in permutations(self.calls, 2)]


GROUPS: list[Group] = [
    Group({"min": "min(", "max": "max(", "sum": "sum(", "len": "len(", "any": "any(", "all": "all("},
          "{A}{v})", tuple(LIST_VARS), ([0, 3, 5], [4, 9, 2], [2, 0], [1, 1, 1, 6])),
    Group({"strip": ".strip()", "rstrip": ".rstrip()", "lstrip": ".lstrip()", "title": ".title()",
           "capitalize": ".capitalize()", "swapcase": ".swapcase()"},
          "{v}{A}", tuple(TEXT_VARS), ("  red fox  ", " blue Sky ", "old map", "Tea Cup ")),
    Group({"floor": "math.floor(", "ceil": "math.ceil(", "round": "round(", "int": "int(", "abs": "abs("},
          "{A}{v})", tuple(NUM_VARS), (2.6, -2.6, 7.2, -3.4, 2.5), ("math",)),
    Group({"keys": ".keys()", "values": ".values()", "items": ".items()"},
          "sorted({v}{A})", tuple(MAP_VARS), ({"a": 3, "b": 1}, {"x": 9, "y": 4})),
    Group({"startswith": ".startswith(", "endswith": ".endswith("}, '{v}{A}"log")', tuple(TEXT_VARS),
          ("server.log", "catalog", "log_file")),
    Group({"count": ".count(", "index": ".index("}, "{v}{A}3)", tuple(LIST_VARS), ([5, 3, 7, 3, 3], [3, 8, 3, 1, 3])),
    Group({"reverse_true": "reverse=True", "reverse_false": "reverse=False"}, "sorted({v}, {A})",
          tuple(LIST_VARS), ([4, 9, 2], [1, 7, 3])),
    Group({"is_none": " is None", "is_not_none": " is not None"}, "{v}{A}", tuple(NUM_VARS), (5, 0, 12)),
    Group({"mod_ten": " % 10", "mod_hundred": " % 100"}, "{v}{A}", tuple(NUM_VARS), (1234, 5678, 4321)),
]
WORDS = ["red", "blue", "green", "north", "south", "cold", "warm", "left", "right", "fast", "slow", "dark"]


def _two(rng: random.Random, values: list, forbidden: tuple = ()) -> tuple:
    while True:
        a, b = rng.sample(values, 2)
        if (a, b) != forbidden:
            return a, b


def _number(rng: random.Random) -> tuple[str, str]:
    op = rng.choice([" + ", " - "])
    a, b = _two(rng, list(range(2, 100)))
    return f"{op}{a}", f"{op}{b}"


def _word(rng: random.Random) -> tuple[str, str]:
    a, b = _two(rng, WORDS)
    return f'"{a}"', f'"{b}"'


def _precision(rng: random.Random) -> tuple[str, str]:
    a, b = _two(rng, list(range(7)), forbidden=(1, 2))  # :.1f -> :.2f is the skill-only wrong_format
    return f":.{a}f", f":.{b}f"


def _default(rng: random.Random) -> tuple[str, str]:
    a, b = _two(rng, list(range(10)), forbidden=(1, 0))  # a default of 1 -> 0 is the skill-only wrong_default
    return f", {a})", f", {b})"


# Drills whose two values are drawn per task, so that not even the drill's name tells the fix:
# the skill that goes with a task is written from that task's own values (library.for_task).
LITERALS: list[Drill] = [
    Drill("number", "", "", "{v}{A}", tuple(NUM_VARS), (3, 10, 25), draw=_number),
    Drill("word", "", "", "{v} + {A}", tuple(TEXT_VARS), ("red fox", "old map"), draw=_word),
    Drill("precision", "", "", 'f"{{{v}{A}}}"', tuple(NUM_VARS), (3.14159, 2.71828), draw=_precision),
    Drill("default", "", "", '{v}.get("z"{A}', tuple(MAP_VARS), ({"a": 3}, {"b": 1}), draw=_default),
]
DRILLS: list[Drill] = [drill for group in GROUPS for drill in group.drills()] + LITERALS


def _run(lines: list[str], name: str, arg: object, imports: tuple[str, ...]) -> object:
    scope: dict = {}
    exec("\n".join([*(f"import {m}" for m in imports), *lines]), scope)  # noqa: S102 - our own generated code
    return scope[name](arg)


def _planter(drill: Drill):
    def plant(rng: random.Random, pool: NamePool) -> Planted:
        f = pool.function()
        v = rng.choice(drill.variables)
        tail = rng.random() < 0.5  # `return EXPR`, or `out = EXPR` then `return out`

        def render(token: str) -> list[str]:
            expr = drill.expr.format(v=v, A=token)
            return [f"def {f}({v}):", f"    out = {expr}", "    return out"] if tail else [f"def {f}({v}):", f"    return {expr}"]

        old, new = drill.values(rng)
        buggy, fixed = render(old), render(new)
        args = list(drill.args)
        rng.shuffle(args)
        for arg in args:
            expect = _run(fixed, f, arg, drill.imports)
            if _run(buggy, f, arg, drill.imports) != expect:
                break
        else:
            raise ValueError(f"drill {drill.slug}: no argument tells the bug from the fix")
        return Planted(
            family=f"drill_{drill.slug}", name=f, lookup=f"def {f}(", buggy=buggy, fixed=fixed,
            test=[f"def test_{f}():", f"    assert {f}({arg!r}) == {expect!r}"],
            bug_line=1, old=old, new=new, imports=list(drill.imports),
            why=skill_why(f),
        )

    return plant


def _title(drill: Drill) -> str:
    if drill.draw:
        return f"a {drill.slug} where another is needed"
    return f"{drill.old.strip()} where {drill.new.strip()} is needed"


DRILL_FAMILIES: dict[str, Family] = {
    f"drill_{d.slug}": Family(f"drill_{d.slug}", _title(d), _planter(d), filler=False, group="drill") for d in DRILLS
}
BY_FAMILY: dict[str, Drill] = {f"drill_{d.slug}": d for d in DRILLS}
LITERAL_FAMILIES: list[str] = [f"drill_{d.slug}" for d in LITERALS]
