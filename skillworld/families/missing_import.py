"""A module that calls into the standard library without importing it."""
from __future__ import annotations

import importlib
import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import SCALAR_VARS, NamePool

# (module, function, argument the test passes): all results are exact, so the test can pin them.
CALLS = [
    ("math", "floor", 7.5), ("math", "ceil", 2.25), ("math", "sqrt", 49), ("math", "fabs", -3.5),
    ("statistics", "mean", [2, 4, 9]), ("statistics", "median", [7, 1, 4]),
    ("json", "dumps", {"a": 1}), ("string", "capwords", "red fox"),
]


def plant(rng: random.Random, pool: NamePool) -> Planted:
    f, x = pool.function(), rng.choice(SCALAR_VARS)
    module, func, arg = rng.choice(CALLS)
    result = getattr(importlib.import_module(module), func)(arg)
    if rng.random() < 0.5:
        lines, at = [f"def {f}({x}):", f"    return {module}.{func}({x})"], 1
    else:
        r = rng.choice(["r", "res", "value_out"])
        lines, at = [f"def {f}({x}):", f"    {r} = {module}.{func}({x})", f"    return {r}"], 1
    return Planted(
        family="missing_import", name=f, lookup=f"def {f}(",
        buggy=lines, fixed=list(lines),
        test=[f"def test_{f}():", f"    assert {f}({arg!r}) == {result!r}"],
        bug_line=at, insert_import=module, imports=[module],
        why=f"the function {f} uses {module}, which is never imported; add import {module} at the top.",
    )


FAMILY = Family("missing_import", "missing import", plant, filler=False, group="seen", order=4)
