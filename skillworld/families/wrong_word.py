"""A module constant holding the wrong word, which a test pins: wrong_constant with a string.

A learning family: never shipped with a skill and never trained on. The word to write is in the
test's failure message, as a seen family's number is, but Python prints it in single quotes
while the code (and so the edit) has double quotes."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted, pinned_constant
from skillgraft.skillworld.names import CONSTANTS, NamePool

WORDS = ["north", "south", "amber", "green", "metric", "daily", "weekly", "silver", "coastal", "quiet"]


def plant(rng: random.Random, pool: NamePool) -> Planted:
    name = pool.pick(CONSTANTS)  # wrong_constant's names: the policy may take it for one
    right, wrong = rng.sample(WORDS, 2)
    return pinned_constant("wrong_word", name, f'"{wrong}"', f'"{right}"')


FAMILY = Family("wrong_word", "wrong word pinned by a test", plant, filler=False, group="learning", order=14)
