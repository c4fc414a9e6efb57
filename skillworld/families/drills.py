"""Drill families: training-only bugs whose fix only their skill gives.

A policy that has memorised the seen families' edits has no reason to read a skill: with or
without one in context, the same edit works. Drills remove that shortcut. Each drill is a
one-token swap (`min(` where `max(` is needed, `.strip()` where `.rstrip()` is, ...), and there
are many of them, so in training the edit can only be found by copying it out of the skill in
context. That is what a skill-only family asks of the policy at test time. No drill swaps what
a skill-only family swaps (or/and, upper/lower, :.1f/:.2f, a default of 1/0), so reading, not
recall, is what carries over.

The expected value a drill's test pins is computed by running the fixed code, so every drill is
right by construction; `plant` keeps drawing arguments until the buggy code gets them wrong.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from skillworld.families.base import Family, Planted, skill_why
from skillworld.names import LIST_VARS, NamePool

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


DRILLS: list[Drill] = [
    Drill("min_max", "min(", "max(", "{A}{v})", tuple(LIST_VARS), ([4, 9, 2], [1, 7, 3], [8, 5, 6])),
    Drill("max_min", "max(", "min(", "{A}{v})", tuple(LIST_VARS), ([4, 9, 2], [1, 7, 3], [8, 5, 6])),
    Drill("sum_len", "sum(", "len(", "{A}{v})", tuple(LIST_VARS), ([4, 9, 2], [5, 5], [3, 1, 1, 2])),
    Drill("len_sum", "len(", "sum(", "{A}{v})", tuple(LIST_VARS), ([4, 9, 2], [5, 5], [3, 1, 1, 2])),
    Drill("any_all", "any(", "all(", "{A}{v})", tuple(LIST_VARS), ([0, 3, 5], [2, 0], [0, 0, 1])),
    Drill("all_any", "all(", "any(", "{A}{v})", tuple(LIST_VARS), ([0, 3, 5], [2, 0], [0, 0, 1])),
    Drill("strip_rstrip", ".strip()", ".rstrip()", "{v}{A}", tuple(TEXT_VARS), ("  red fox  ", " blue sky ")),
    Drill("strip_lstrip", ".strip()", ".lstrip()", "{v}{A}", tuple(TEXT_VARS), ("  red fox  ", " blue sky ")),
    Drill("rstrip_strip", ".rstrip()", ".strip()", "{v}{A}", tuple(TEXT_VARS), ("  red fox  ", " blue sky ")),
    Drill("lstrip_strip", ".lstrip()", ".strip()", "{v}{A}", tuple(TEXT_VARS), ("  red fox  ", " blue sky ")),
    Drill("title_capitalize", ".title()", ".capitalize()", "{v}{A}", tuple(TEXT_VARS), ("red fox", "old map")),
    Drill("capitalize_title", ".capitalize()", ".title()", "{v}{A}", tuple(TEXT_VARS), ("red fox", "old map")),
    Drill("keys_values", ".keys()", ".values()", "sorted({v}{A})", tuple(MAP_VARS), ({"a": 3, "b": 1}, {"x": 9, "y": 4})),
    Drill("values_keys", ".values()", ".keys()", "sorted({v}{A})", tuple(MAP_VARS), ({"a": 3, "b": 1}, {"x": 9, "y": 4})),
    Drill("startswith_endswith", ".startswith(", ".endswith(", '{v}{A}"log")', tuple(TEXT_VARS), ("server.log", "catalog")),
    Drill("endswith_startswith", ".endswith(", ".startswith(", '{v}{A}"tmp")', tuple(TEXT_VARS), ("tmp_file", "tmp.txt")),
    Drill("reverse_true_false", "reverse=True", "reverse=False", "sorted({v}, {A})", tuple(LIST_VARS), ([4, 9, 2], [1, 7, 3])),
    Drill("reverse_false_true", "reverse=False", "reverse=True", "sorted({v}, {A})", tuple(LIST_VARS), ([4, 9, 2], [1, 7, 3])),
    Drill("floor_ceil", "math.floor(", "math.ceil(", "{A}{v})", tuple(NUM_VARS), (2.5, 7.2, 3.9), ("math",)),
    Drill("ceil_floor", "math.ceil(", "math.floor(", "{A}{v})", tuple(NUM_VARS), (2.5, 7.2, 3.9), ("math",)),
    Drill("int_round", "int(", "round(", "{A}{v})", tuple(NUM_VARS), (2.7, 5.6, 8.9)),
    Drill("abs_int", "abs(", "int(", "{A}{v})", tuple(NUM_VARS), (-3, -8, -5)),
    Drill("count_index", ".count(", ".index(", "{v}{A}3)", tuple(LIST_VARS), ([5, 3, 7, 3, 3], [3, 8, 3, 1, 3])),
    Drill("index_count", ".index(", ".count(", "{v}{A}3)", tuple(LIST_VARS), ([5, 3, 7, 3, 3], [3, 8, 3, 1, 3])),
    Drill("is_none_is_not_none", " is None", " is not None", "{v}{A}", tuple(NUM_VARS), (5, 0, 12)),
    Drill("mod_ten_hundred", " % 10", " % 100", "{v}{A}", tuple(NUM_VARS), (1234, 5678, 4321)),
]


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

        buggy, fixed = render(drill.old), render(drill.new)
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
            bug_line=1, old=drill.old, new=drill.new, imports=list(drill.imports),
            why=skill_why(f),
        )

    return plant


def _title(drill: Drill) -> str:
    return f"{drill.old.strip()} where {drill.new.strip()} is needed"


DRILL_FAMILIES: dict[str, Family] = {
    f"drill_{d.slug}": Family(f"drill_{d.slug}", _title(d), _planter(d), filler=False) for d in DRILLS
}
BY_FAMILY: dict[str, Drill] = {f"drill_{d.slug}": d for d in DRILLS}
