"""Which tasks each session gets, fixed by a seed, so learning on and off see the very same tasks."""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from skillgraft.agent.task import Task


def world_sessions(families: Sequence[str], sessions: int, per_session: int, first_seed: int,
                   make: Callable[[str, int], Task], shuffle_seed: int = 0) -> list[list[Task]]:
    """`sessions` lists of `per_session` tasks: families dealt round-robin (so every session sees
    them in equal measure), each task from its own seed counting up from `first_seed`."""
    if not families:
        raise ValueError("no families to draw tasks from")
    order = list(families)
    random.Random(shuffle_seed).shuffle(order)
    plan, n = [], 0
    for _ in range(sessions):
        batch = []
        for _ in range(per_session):
            batch.append(make(order[n % len(order)], first_seed + n))
            n += 1
        plan.append(batch)
    return plan


def world_validation(families: Sequence[str], seen: Sequence[str], first_seed: int, per_family: int,
                     seen_per_family: int, make: Callable[[str, int], Task]) -> list[Task]:
    """Held-out validation tasks: `per_family` of each learned family, and `seen_per_family` of
    each seen family that is not learned, so that a global version which costs what the model
    already solves does not pass. Seeds count up from `first_seed` within each family."""
    tasks = [make(f, first_seed + i) for i in range(per_family) for f in families]
    return tasks + [make(f, first_seed + i) for i in range(seen_per_family) for f in seen if f not in families]


def split_sessions(tasks: Sequence[Task], sessions: int, per_session: int | None) -> list[list[Task]]:
    """Given task files: each session runs `per_session` of them (default all), cycling through."""
    if not tasks:
        raise ValueError("no tasks given")
    per = per_session or len(tasks)
    return [[tasks[(s * per + j) % len(tasks)] for j in range(per)] for s in range(sessions)]
