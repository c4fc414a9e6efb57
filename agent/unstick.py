"""Breaking loops: a command the agent already ran from the very same repository state.

A small model told that the tests still fail often proposes the edit it has just made, the
tests fail again, and it proposes that edit once more until its steps run out. Run twice from
the same files, a command does what it did the first time, so the repetition can only end in
the same place. With `Unstick` given, the loop notes the state of the repository (its diff
against the start) before every command; when the model proposes a command it already ran
from that very state, its reply is drawn again, sampled, up to `tries` times, and the first
draw proposing something not yet tried from there replaces it. When every draw repeats, the
original reply stands. The redraws are extra model calls (their cost and tokens count) but
not extra steps.

Draws come from the model's streams REDRAW_STREAM, REDRAW_STREAM + 1, …: a local model seeds
them by the conversation, so a run replays exactly; a model that cannot sample is never redrawn.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

REDRAW_STREAM = 1_000  # streams below are left to the callers' sampled runs (practice uses 1, 2, …)


@dataclass(frozen=True)
class Unstick:
    tries: int = 3  # redraws of one reply at most
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.tries < 1:
            raise ValueError(f"unstick needs at least one redraw, not {self.tries}")
        if not self.temperature > 0:
            raise ValueError(f"redraws are sampled: the temperature must be above 0, not {self.temperature}")


class Tried:
    """The commands run so far, by the repository state each was run from."""

    def __init__(self) -> None:
        self._seen: dict[str, set[str]] = {}

    @staticmethod
    def state_of(diff: str) -> str:
        return hashlib.blake2b(diff.encode(), digest_size=16).hexdigest()

    def before(self, state: str, command: str) -> bool:
        return command.strip() in self._seen.get(state, ())

    def add(self, state: str, command: str) -> None:
        self._seen.setdefault(state, set()).add(command.strip())
