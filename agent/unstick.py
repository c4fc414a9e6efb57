"""Breaking loops: going back when the agent proposes a command it already ran from the same files.

A small model told that the tests still fail often proposes the edit it has just made, the
tests fail again, and it proposes that edit once more until its steps run out. Its own earlier
attempt, there in its context, is what it copies: drawing the reply again at that point, even
sampled, mostly gives the same command. So with `Unstick` given, the loop names the state of
the repository's files (sandbox.snapshot) before every command, and when the model proposes a
command it already ran from that very state, the run goes back to before the last command that
changed the files (or, where none did, to before the first run of the repeated command): the
conversation is cut there, and the reply at that point is drawn again, sampled, up to `tries`
times. The first draw that proposes a command not yet run from there (and not `submit`) is
taken: the files are put back as they were then (sandbox.rewind) and the run goes on from it.
When every draw repeats, nothing is undone and the original reply stands.

A reply that holds no command is drawn again the same way, at the point it was asked (nothing to
undo there): greedy decoding can run on repeating a few tokens until its token limit (`"]"]/"/…`),
and asked once more, with that reply and the format error in its context, it repeats it. The
first draw that holds a command is taken; when none does, the malformed reply stands and the model
is told, as without `Unstick`.

The redraws are extra model calls (their cost and tokens count) but not extra steps; the steps
of an abandoned branch stay in the run's history and are listed in its trajectory's info, while
the conversation and the run's `kept` steps (what the summariser reads) hold only the branch the
run ended on.

Draws come from the model's streams REDRAW_STREAM, REDRAW_STREAM + 1, …: a local model seeds
them by the conversation, so a run replays exactly; a model that cannot sample is never redrawn.
"""
from __future__ import annotations

from dataclasses import dataclass, field

REDRAW_STREAM = 1_000  # streams below are left to the callers' sampled runs (practice uses 1, 2, …)


@dataclass(frozen=True)
class Unstick:
    tries: int = 3  # draws at the point gone back to, at most
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.tries < 1:
            raise ValueError(f"unstick needs at least one redraw, not {self.tries}")
        if not self.temperature > 0:
            raise ValueError(f"redraws are sampled: the temperature must be above 0, not {self.temperature}")


def same(command: str) -> str:
    """What two commands share when they differ only in spacing: the same command to the agent."""
    return " ".join(command.split())


@dataclass(frozen=True)
class Mark:
    """A command of the branch being followed: the files it ran on, where the conversation stood."""

    state: str  # sandbox.snapshot() before the command ran
    at: int  # messages before the reply that proposed it
    step: int
    command: str


@dataclass
class Trail:
    """Every command run so far by the state it ran from, and the marks of the current branch."""

    tried: dict[str, set[str]] = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)

    def before(self, state: str, command: str) -> bool:
        return same(command) in self.tried.get(state, ())

    def add(self, mark: Mark) -> None:
        self.tried.setdefault(mark.state, set()).add(same(mark.command))
        self.marks.append(mark)

    def back_to(self, state: str, command: str) -> int:
        """Which mark to go back to, now that `command` is proposed again from `state`: the last
        command that changed the files, else the first run of `command` in this branch, else (it
        ran in a branch since abandoned) the branch's first command. Needs a mark."""
        after = [m.state for m in self.marks[1:]] + [state]
        changed = [i for i, m in enumerate(self.marks) if after[i] != m.state]
        if changed:
            return changed[-1]
        return next((i for i, m in enumerate(self.marks) if same(m.command) == same(command)), 0)

    def cut(self, index: int) -> list[Mark]:
        """Drops the marks from `index` on (the abandoned branch) and returns them."""
        dropped, self.marks = self.marks[index:], self.marks[:index]
        return dropped
