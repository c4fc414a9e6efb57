"""A filter whose comparison points the wrong way: keeps items below a limit, not above."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import ACC_VARS, ITEM_VARS, LIST_VARS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f, xs, out = pool.function(), rng.choice(LIST_VARS), rng.choice(ACC_VARS)
    x = rng.choice([v for v in ITEM_VARS if v != xs])
    lim = rng.choice(["limit", "cutoff", "floor", "bound", "low"])
    count = rng.random() < 0.5
    limit = rng.randint(5, 15)
    data = [limit + d for d in rng.sample([-4, -3, -2, -1, 1, 2, 3, 4, 6], 5)]
    above = [v for v in data if v > limit]
    expect = len(above) if count else above
    start, keep = ("0", f"{out} += 1") if count else ("[]", f"{out}.append({x})")

    def render(op: str) -> list[str]:
        return [f"def {f}({xs}, {lim}):", f"    {out} = {start}", f"    for {x} in {xs}:",
                f"        if {x} {op} {lim}:", f"            {keep}", f"    return {out}"]

    return Planted(
        family="inverted_comparison", name=f, lookup=f"def {f}(",
        buggy=render("<"), fixed=render(">"),
        test=[f"def test_{f}():", f"    assert {f}({data!r}, {limit}) == {expect!r}"],
        bug_line=3, old=" < ", new=" > ",
        why=f"the comparison in {f} is inverted; change < to >.",
    )


FAMILY = Family("inverted_comparison", "inverted comparison", plant, group="seen", order=3)
