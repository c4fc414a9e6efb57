"""A range check joined with `or` where both bounds must hold."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted, skill_why
from skillgraft.skillworld.names import NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f = pool.function()
    x, lo, hi = rng.choice([("x", "lo", "hi"), ("value", "low", "high"), ("n", "start", "stop")])
    low, high = rng.randint(0, 10), rng.randint(20, 40)
    probe = high + rng.randint(1, 9)
    if rng.random() < 0.5:
        render = lambda op: [f"def {f}({x}, {lo}, {hi}):", f"    return {x} >= {lo} {op} {x} <= {hi}"]  # noqa: E731
        at = 1
    else:
        ok = rng.choice(["inside", "ok", "fits"])
        render = lambda op: [f"def {f}({x}, {lo}, {hi}):",  # noqa: E731
                             f"    {ok} = {x} >= {lo} {op} {x} <= {hi}", f"    return {ok}"]
        at = 1
    return Planted(
        family="wrong_boolean", name=f, lookup=f"def {f}(",
        buggy=render("or"), fixed=render("and"),
        test=[f"def test_{f}():", f"    assert {f}({probe}, {low}, {high}) == False"],
        bug_line=at, old=" or ", new=" and ",
        why=skill_why(f),
    )


FAMILY = Family("wrong_boolean", "or where and is needed", plant, group="skill-only", order=10)
