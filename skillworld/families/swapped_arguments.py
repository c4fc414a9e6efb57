"""A call that passes its two arguments in the wrong order to an asymmetric helper."""
from __future__ import annotations

import random

from skillgraft.skillworld.families.base import Family, Planted
from skillgraft.skillworld.names import HELPER_NAMES, NamePool


def plant(rng: random.Random, pool: NamePool) -> Planted:
    h, f = pool.pick(HELPER_NAMES), pool.function()
    k = rng.randint(2, 9)
    expr, fn = rng.choice([
        ("{p} * {k} - {q}", lambda p, q: p * k - q),
        ("{p} - {q} * {k}", lambda p, q: p - q * k),
        ("{p} * 10 + {q}", lambda p, q: p * 10 + q),
    ])
    p, q = rng.choice([("p", "q"), ("first", "second"), ("x", "y")])
    a, b = rng.choice([("a", "b"), ("left", "right"), ("m", "n")])
    x, y = rng.sample(range(1, 10), 2)
    helper = [f"def {h}({p}, {q}):", "    return " + expr.format(p=p, q=q, k=k), ""]
    call = lambda u, w: [f"def {f}({a}, {b}):", f"    return {h}({u}, {w})"]  # noqa: E731
    return Planted(
        family="swapped_arguments", name=f, lookup=f"def {f}(",
        buggy=helper + call(b, a), fixed=helper + call(a, b),
        test=[f"def test_{f}():", f"    assert {f}({x}, {y}) == {fn(x, y)}"],
        bug_line=len(helper) + 1, old=f"{h}({b}, {a})", new=f"{h}({a}, {b})",
        why=f"the function {f} passes the arguments of {h} in the wrong order; swap them.",
    )


FAMILY = Family("swapped_arguments", "swapped arguments", plant, group="seen", order=6)
