"""A module constant with the wrong sign, which a test pins: wrong_constant with a negative number.

A learning family: never shipped with a skill and never trained on. The value to write is in
the test's failure message, minus sign and all."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted, pinned_constant
from skillgraft.skillworld.names import CONSTANTS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    name = pool.pick(CONSTANTS)  # wrong_constant's names: the policy may take it for one
    value = rng.randint(2, 60)
    return pinned_constant("wrong_sign", name, str(value), f"-{value}")


FAMILY = Family("wrong_sign", "wrong sign pinned by a test", plant, filler=False, group="learning", order=16)
