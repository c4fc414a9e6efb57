"""A subtraction where the code must add."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import SCALAR_VARS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f = pool.function()
    a, b = rng.sample(SCALAR_VARS, 2)
    r = rng.choice([v for v in ("r", "res", "combined", "joined") if v not in (a, b)])
    k = rng.randint(2, 6)
    x, y = rng.randint(2, 30), rng.randint(1, 20)
    shape = rng.randrange(3)
    if shape == 0:
        body, expect, at = ["    return {a} {op} {b}"], x + y, 1
    elif shape == 1:
        body, expect, at = ["    {r} = {a} {op} {b}", "    return {r} * {k}"], (x + y) * k, 1
    else:
        body, expect, at = ["    {a} = {a} * {k}", "    return {a} {op} {b}"], x * k + y, 2

    def render(op: str) -> list[str]:
        return [f"def {f}({a}, {b}):"] + [line.format(a=a, b=b, r=r, k=k, op=op) for line in body]

    return Planted(
        family="wrong_operator", name=f, lookup=f"def {f}(",
        buggy=render("-"), fixed=render("+"),
        test=[f"def test_{f}():", f"    assert {f}({x}, {y}) == {expect}"],
        bug_line=at, old=" - ", new=" + ",
        why=f"the function {f} subtracts where it must add; change - to +.",
    )


FAMILY = Family("wrong_operator", "wrong arithmetic operator", plant, group="seen", order=2)
