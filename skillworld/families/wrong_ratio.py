"""A module constant holding the wrong fraction, which a test pins: wrong_constant with a float.

A learning family: never shipped with a skill and never trained on. The value to write is in
the test's failure message, as a seen family's whole number is."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted, pinned_constant
from skillgraft.skillworld.names import NamePool

NAMES = ["RATIO", "SHARE", "DISCOUNT", "WEIGHT", "DECAY", "MARGIN", "FRACTION", "TAX"]
VALUES = ["0.1", "0.15", "0.2", "0.25", "0.3", "0.4", "0.5", "0.75", "0.8", "0.9"]


def plant(rng: random.Random, pool: NamePool) -> Planted:
    name = pool.pick(NAMES)
    right, wrong = rng.sample(VALUES, 2)
    return pinned_constant("wrong_ratio", name, wrong, right)


FAMILY = Family("wrong_ratio", "wrong fraction pinned by a test", plant, filler=False, group="learning", order=15)
