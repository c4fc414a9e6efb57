"""Confidence intervals for success rates measured on few episodes."""
from __future__ import annotations

import math


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval: unlike the normal one it stays inside [0, 1] for small n."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def rate_text(successes: int, n: int) -> str:
    """"3/6 = 50% [19%, 81%]": a success count, its rate and the rate's 95% Wilson interval."""
    lo, hi = wilson(successes, n)
    return f"{successes}/{n} = {successes / n if n else 0.0:.0%} [{lo:.0%}, {hi:.0%}]"


class SuccessRate:
    """For records with `successes` and `episodes`: the rate and its 95% interval."""

    successes: int
    episodes: int

    @property
    def rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.successes, self.episodes)
