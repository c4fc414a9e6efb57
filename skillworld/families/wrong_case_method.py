"""Text upper-cased where the tests expect lower case."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted, skill_why
from skillgraft.skillworld.names import NamePool

WORDS = ["Red Fox", "Blue Sky", "Green Tea", "Old Map", "Tall Tree", "Cold Rain", "Big Cat"]


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f = pool.function()
    s = rng.choice(["text", "name", "label", "word"])
    word = rng.choice(WORDS)
    if rng.random() < 0.5:
        render = lambda m: [f"def {f}({s}):", f"    return {s}.strip().{m}()"]  # noqa: E731
        arg, expect = f"  {word} ", word.lower()
    else:
        render = lambda m: [f"def {f}({s}):", f'    return {s}.{m}().replace(" ", "_")']  # noqa: E731
        arg, expect = word, word.lower().replace(" ", "_")
    return Planted(
        family="wrong_case_method", name=f, lookup=f"def {f}(",
        buggy=render("upper"), fixed=render("lower"),
        test=[f"def test_{f}():", f"    assert {f}({arg!r}) == {expect!r}"],
        bug_line=1, old=".upper()", new=".lower()",
        why=skill_why(f),
    )


FAMILY = Family("wrong_case_method", "upper where lower is needed", plant, group="skill-only", order=11)
