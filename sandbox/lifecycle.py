"""Who owns a sandbox container, and removing open sandboxes when the process ends.

Containers carry their owner's host, pid and process start time as labels, so that a later
`skillgraft sandbox reap` can tell a leftover of a crashed run (owner gone) from a live one.
"""
from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
from collections.abc import Sequence

from skillgraft.sandbox.base import LABEL, ExecResult, SandboxLimits
from skillgraft.sandbox.git_state import read_diff, restore_files, rewind_tree, snapshot_tree

OWNER_PID = "skillgraft.owner.pid"
OWNER_HOST = "skillgraft.owner.host"
OWNER_START = "skillgraft.owner.start"

# Strong references: a sandbox dropped without close() must still be removed at exit.
live_sandboxes: set = set()
_installed = False


def process_start(pid: int) -> str:
    """The start time of a process in clock ticks since boot ("" if unknown): with the pid, it
    names a process even after the pid number is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode(errors="replace")
        return raw[raw.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return ""


def owner_labels() -> dict[str, str]:
    pid = os.getpid()
    return {LABEL: "1", OWNER_PID: str(pid), OWNER_HOST: socket.gethostname(), OWNER_START: process_start(pid)}


def owner_alive(labels: dict[str, str]) -> bool | None:
    """True or False for a container made on this host; None when another host made it."""
    if labels.get(OWNER_HOST) != socket.gethostname():
        return None
    try:
        pid = int(labels.get(OWNER_PID, ""))
    except ValueError:
        return False
    started = process_start(pid)
    if not started:
        return False
    recorded = labels.get(OWNER_START, "")
    return not recorded or recorded == started


def close_all() -> None:
    for sandbox in list(live_sandboxes):
        try:
            sandbox.close()
        except Exception:  # at exit, one failure must not keep the others alive
            pass


def _exit_on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
    # Raising unwinds `with` blocks and runs atexit, which a default SIGTERM would skip.
    raise SystemExit(128 + signum)


def register(sandbox) -> None:
    """Tracks an open sandbox so that interpreter exit or SIGTERM removes it."""
    global _installed
    if not _installed:
        _installed = True
        _install()
    live_sandboxes.add(sandbox)


def _install() -> None:
    atexit.register(close_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        # Only where nobody chose a handler: an application's own handling wins.
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _exit_on_signal)


class TrackedSandbox:
    """What both backends share: the diff through their `_run`, closing exactly once, and
    removal at interpreter exit. A backend supplies `_run`, `limits` and `_release()`."""

    _closed = False
    limits: SandboxLimits

    def _run(self, command: str, timeout: float, output_limit: int) -> ExecResult:
        raise NotImplementedError

    @property
    def _git_timeout(self) -> float:  # the git scripts get at least a minute, whatever the command timeout
        return max(60.0, self.limits.command_timeout)

    def diff(self) -> str:
        return read_diff(self._run, self._git_timeout)

    def restore(self, globs: Sequence[str]) -> list[str]:
        return restore_files(self._run, self._git_timeout, globs)

    def snapshot(self) -> str:
        return snapshot_tree(self._run, self._git_timeout)

    def rewind(self, state: str) -> None:
        rewind_tree(self._run, self._git_timeout, state)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        live_sandboxes.discard(self)
        self._release()

    def _release(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
