"""A loop bound one short: `range(len(xs) - 1)` skips the last item."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import ACC_VARS, LIST_VARS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f, xs, acc = pool.function(), rng.choice(LIST_VARS), rng.choice(ACC_VARS)
    i, k = rng.choice(["i", "j", "k", "idx"]), rng.randint(2, 9)
    term, apply = rng.choice([
        (f"{xs}[{i}]", lambda v: v),
        (f"{xs}[{i}] * {k}", lambda v: v * k),
        (f"{xs}[{i}] + {k}", lambda v: v + k),
    ])
    data = [rng.randint(1, 20) for _ in range(rng.randint(3, 5))]
    head = [f"def {f}({xs}):", f"    {acc} = 0"]
    tail = [f"        {acc} += {term}", f"    return {acc}"]
    return Planted(
        family="off_by_one", name=f, lookup=f"def {f}(",
        buggy=head + [f"    for {i} in range(len({xs}) - 1):"] + tail,
        fixed=head + [f"    for {i} in range(len({xs})):"] + tail,
        test=[f"def test_{f}():", f"    assert {f}({data!r}) == {sum(apply(v) for v in data)}"],
        bug_line=2, old=" - 1)", new=")",
        why=f"the loop in {f} stops one item early; drop the - 1 from the range bound.",
    )


FAMILY = Family("off_by_one", "off-by-one loop bound", plant, group="seen", order=1)
