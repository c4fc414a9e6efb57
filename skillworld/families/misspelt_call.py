"""A call to a helper whose name is misspelt: one letter dropped."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import HELPER_NAMES, ITEM_VARS, LIST_VARS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    h, f = pool.pick(HELPER_NAMES), pool.function()
    drop = rng.randrange(1, len(h) - 1)
    typo = h[:drop] + h[drop + 1:]
    while typo == h or typo in pool.used:
        drop = rng.randrange(1, len(h) - 1)
        typo = h[:drop] + h[drop + 1:]
    k, c = rng.randint(2, 7), rng.randint(1, 9)
    p = rng.choice(["x", "n", "v"])
    helper = [f"def {h}({p}):", f"    return {p} * {k} + {c}", ""]
    if rng.random() < 0.5:
        xs = rng.choice(LIST_VARS)
        v = rng.choice([w for w in ITEM_VARS if w != xs])
        call = lambda name: [f"def {f}({xs}):", f"    return [{name}({v}) for {v} in {xs}]"]  # noqa: E731
        data = [rng.randint(1, 9) for _ in range(3)]
        test_line = f"    assert {f}({data!r}) == {[d * k + c for d in data]!r}"
    else:
        a = rng.choice(["a", "m", "base"])
        call = lambda name: [f"def {f}({a}):", f"    return {name}({a}) + 1"]  # noqa: E731
        d = rng.randint(1, 20)
        test_line = f"    assert {f}({d}) == {d * k + c + 1}"
    return Planted(
        family="misspelt_call", name=f, lookup=f"def {f}(",
        buggy=helper + call(typo), fixed=helper + call(h),
        test=[f"def test_{f}():", test_line],
        bug_line=len(helper) + 1, old=f"{typo}(", new=f"{h}(",
        why=f"the function {f} calls {typo}, a misspelling of {h}.",
    )


FAMILY = Family("misspelt_call", "misspelt call", plant, group="seen", order=5)
