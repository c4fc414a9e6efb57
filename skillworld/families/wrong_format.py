"""A number formatted with one decimal where the tests pin two."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted, skill_why
from skillgraft.skillworld.names import LABELS, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f = pool.function()
    v = rng.choice(["v", "value", "amount", "num"])
    label = rng.choice(LABELS)
    number = rng.randint(100, 9999) / 1000 + 0.0004  # the third decimal never rounds up into the second
    if rng.random() < 0.5:
        render = lambda d: [f"def {f}({v}):", f'    return f"{label}: {{{v}:.{d}f}}"']  # noqa: E731
        expect = f"{label}: {number:.2f}"
    else:
        unit = rng.choice(["kg", "km", "s", "m"])
        render = lambda d: [f"def {f}({v}):", f'    return "{{:.{d}f}} {unit}".format({v})']  # noqa: E731
        expect = f"{number:.2f} {unit}"
    return Planted(
        family="wrong_format", name=f, lookup=f"def {f}(",
        buggy=render(1), fixed=render(2),
        test=[f"def test_{f}():", f"    assert {f}({number!r}) == {expect!r}"],
        bug_line=1, old=":.1f", new=":.2f",
        why=skill_why(f),
    )


FAMILY = Family("wrong_format", "wrong string format", plant, group="skill-only", order=12)
