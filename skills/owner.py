"""Which process owns a piece of work (a partial write, an open session), and whether it is gone.

An owner is this host's name and a process id. Whether a process is gone can only be told on
its own host: work owned elsewhere is never taken for abandoned.
"""
from __future__ import annotations

import os
import socket


def this_process() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, under another user
    return False


def owner_gone(owner: dict | None) -> bool:
    """True when `owner` (from this_process) ran on this host and that process has ended."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    return isinstance(pid, int) and pid != os.getpid() and pid_gone(pid)
