"""Word pools for the surface of generated repositories: package, module, function and
variable names. Varied on purpose so that a policy must read the repository, not memorise it."""
from __future__ import annotations

import random

PACKAGES = ["shop", "geo", "stats", "ledger", "inventory", "garden", "weather", "library", "orbit",
            "kitchen", "harbor", "studio", "fleet", "clinic", "market", "archive", "canvas", "forest"]
MODULES = ["core", "calc", "items", "records", "tools", "metrics", "prices", "routes", "stock",
           "scores", "orders", "report", "units", "totals", "parts", "batch", "entries", "levels"]
VERBS = ["total", "scale", "count", "merge", "pick", "sum", "rank", "shift", "keep", "clip",
         "label", "score", "weigh", "tally", "blend", "trim", "boost", "split"]
NOUNS = ["prices", "values", "items", "points", "scores", "weights", "sizes", "orders", "parts",
         "levels", "steps", "units", "marks", "costs", "rates", "stocks", "loads", "ticks"]
LIST_VARS = ["xs", "values", "items", "nums", "data", "seq", "vals", "entries"]
SCALAR_VARS = ["a", "b", "x", "y", "n", "m", "p", "q", "left", "right", "base", "extra"]
ACC_VARS = ["total", "acc", "result", "out", "found", "kept", "picked", "summed"]
ITEM_VARS = ["v", "item", "x", "value", "elem", "entry", "num"]
HELPER_NAMES = ["scale", "double", "offset", "adjust", "combine", "weight", "spread", "measure",
                "convert", "shrink", "expand", "balance"]
CONSTANTS = ["MAX_ITEMS", "RATE", "LIMIT", "BATCH_SIZE", "TIMEOUT", "RETRIES", "WIDTH", "DEPTH",
             "THRESHOLD", "PAGE_SIZE", "MIN_SCORE", "BUDGET"]
KEYS = ["price", "name", "count", "total", "score", "item", "value", "label", "rate", "size"]
LABELS = ["mean", "cost", "rate", "load", "temp", "speed", "ratio", "share"]


class NamePool:
    """Draws names without repeats within one repository, so no two definitions collide."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def pick(self, pool: list[str]) -> str:
        choices = [w for w in pool if w not in self.used]
        word = self.rng.choice(choices)
        self.used.add(word)
        return word

    def function(self) -> str:
        while True:
            name = f"{self.rng.choice(VERBS)}_{self.rng.choice(NOUNS)}"
            if name not in self.used:
                self.used.add(name)
                return name

    def local(self, pool: list[str], *avoid: str) -> str:
        """A local variable name: may repeat across functions, not within one."""
        return self.rng.choice([w for w in pool if w not in avoid])
