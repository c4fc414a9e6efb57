"""A dict lookup whose default for a missing key is 1 where the count of nothing is 0."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted, skill_why
from skillgraft.skillworld.names import NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f = pool.function()
    counts, key = rng.choice([("counts", "key"), ("tally", "name"), ("seen", "word"), ("stock", "item")])
    k = rng.randint(2, 9)
    if rng.random() < 0.5:
        render = lambda d: [f"def {f}({counts}, {key}):", f"    return {counts}.get({key}, {d})"]  # noqa: E731
    else:
        n = rng.choice(["n", "found", "qty"])
        render = lambda d: [f"def {f}({counts}, {key}):",  # noqa: E731
                            f"    {n} = {counts}.get({key}, {d})", f"    return {n} * {k}"]
    return Planted(
        family="wrong_default", name=f, lookup=f"def {f}(",
        buggy=render(1), fixed=render(0),
        test=[f"def test_{f}():", f"    assert {f}({{'a': 2}}, 'zz') == 0"],
        bug_line=1, old=", 1)", new=", 0)",
        why=skill_why(f),
    )


FAMILY = Family("wrong_default", "wrong default for a missing key", plant, group="skill-only", order=13)
