"""Which draws a sampled reply gets: a seed from the conversation, blind to what varies by itself.

A local model seeds each reply's draws by the conversation so that a task run twice replays.
An observation often holds figures that differ from run to run with nothing else changed: a
test run's duration (`1 failed, 4 passed in 0.02s`), a timestamp, a process id. Seeded by the
exact text, the second run of a task would draw anew from its first observation on, and two
runs that should part only where learning changed what the model sees (a skill, an adapter)
would part everywhere. So the digits of observations do not count towards the seed; the
system prompt, the task and the model's own replies count in full.
"""
from __future__ import annotations

import hashlib
import re

FIGURES = re.compile(r"\d+")


def draw_seed(seed: int, stream: int, messages: list[dict]) -> int:
    """The generator seed for the reply that follows `messages`, from `stream` of `seed`'s draws.

    An observation is a user or tool message after the first user message (the task)."""
    seen_task = False
    parts = []
    for m in messages:
        role, content = m.get("role", ""), m.get("content") or ""
        if role in ("user", "tool"):
            if seen_task:
                content = FIGURES.sub("#", content)
            seen_task = True
        parts.append((role, content))
    key = (seed, stream, parts) if stream else (seed, parts)
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)
