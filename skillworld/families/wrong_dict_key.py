"""A lookup of a key the dict does not have: the singular of the key it does have."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import KEYS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f = pool.function()
    k1, k2 = rng.sample(KEYS, 2)
    d = rng.choice(["info", "row", "record", "fields", "table"])
    a, b = rng.choice([("a", "b"), ("x", "y"), ("first", "second")])
    x, y = rng.sample(range(1, 30), 2)
    scale = rng.choice([1, rng.randint(2, 5)])
    tail = "" if scale == 1 else f" * {scale}"

    def render(key: str) -> list[str]:
        return [f"def {f}({a}, {b}):", f'    {d} = {{"{k1}s": {a}, "{k2}s": {b}}}',
                f'    return {d}["{key}"]{tail}']

    return Planted(
        family="wrong_dict_key", name=f, lookup=f"def {f}(",
        buggy=render(k1), fixed=render(k1 + "s"),
        test=[f"def test_{f}():", f"    assert {f}({x}, {y}) == {x * scale}"],
        bug_line=2, old=f'"{k1}"]', new=f'"{k1}s"]',
        why=f'the function {f} reads the key "{k1}" but the dict has "{k1}s".',
    )


FAMILY = Family("wrong_dict_key", "wrong dict key", plant, group="seen", order=9)
