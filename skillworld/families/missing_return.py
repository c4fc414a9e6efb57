"""A function that builds its result and then returns nothing."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import ACC_VARS, ITEM_VARS, LIST_VARS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f, xs, acc = pool.function(), rng.choice(LIST_VARS), rng.choice(ACC_VARS)
    v = rng.choice([w for w in ITEM_VARS if w != xs])
    k = rng.randint(2, 6)
    data = [rng.randint(1, 9) for _ in range(3)]
    if rng.random() < 0.5:
        start, step, expect = "0", f"{acc} += {v} * {k}", sum(d * k for d in data)
    else:
        start, step, expect = "[]", f"{acc}.append({v} + {k})", [d + k for d in data]
    head = [f"def {f}({xs}):", f"    {acc} = {start}", f"    for {v} in {xs}:", f"        {step}"]
    return Planted(
        family="missing_return", name=f, lookup=f"def {f}(",
        buggy=head + ["    return"], fixed=head + [f"    return {acc}"],
        test=[f"def test_{f}():", f"    assert {f}({data!r}) == {expect!r}"],
        bug_line=4, old="return$", new=f"return {acc}",
        why=f"the function {f} returns nothing; return {acc}.",
    )


FAMILY = Family("missing_return", "missing return", plant, group="seen", order=7)
