"""A module constant whose value a test pins, set to the wrong number."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import CONSTANTS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    name = pool.pick(CONSTANTS)
    right = rng.randint(2, 60)
    wrong = rng.choice([v for v in range(1, 70) if v != right and str(v) not in str(right)])
    return Planted(
        family="wrong_constant", name=name, lookup=f"{name} =",
        buggy=[f"{name} = {wrong}"], fixed=[f"{name} = {right}"],
        test=[f"def test_{name}():", f"    assert {name} == {right}"],
        bug_line=0, old=f"{name} = {wrong}", new=f"{name} = {right}",
        why=f"the constant {name} is {wrong}; the test pins {right}.",
    )


FAMILY = Family("wrong_constant", "wrong constant pinned by a test", plant, group="seen", order=8)
