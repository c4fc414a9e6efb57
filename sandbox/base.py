"""The sandbox protocol: what the agent needs from an isolated place to run commands."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol, runtime_checkable

WORKDIR = "/repo"
DEFAULT_DISK = "4g"
LABEL = "skillgraft.sandbox"

# What every command in a sandbox sees, whatever the backend, besides its PATH and HOME.
AGENT_ENV = {
    "USER": "agent",
    "LOGNAME": "agent",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    # No .pyc files: Python checks them by the source's mtime in whole seconds and its size, so
    # a same-size edit (`<` to `>`) in the second after an import would run the stale bytecode.
    "PYTHONDONTWRITEBYTECODE": "1",
}


class SandboxError(RuntimeError):
    """A sandbox could not be created or used."""


class SandboxUnavailable(SandboxError):
    """The backend itself is missing (no engine, no bwrap); the message says how to fix it."""


UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_bytes(size: str | int) -> int:
    """'512m', '1g', '1024' -> bytes, the spellings Docker accepts for memory limits."""
    if isinstance(size, int):
        return size
    text = size.strip().lower().rstrip("b")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)


@dataclass(frozen=True)
class SandboxLimits:
    memory: str = "1g"
    cpus: float = 1.0
    pids: int = 256
    command_timeout: float = 60.0
    output_limit: int = 10_000  # characters kept of a command's output, head and tail
    network: bool = False
    # What the sandbox may write in all (the repository, /tmp, home): past it a write fails inside
    # the sandbox (no space left, or the disk quota exceeded) and the host's disk moves no further.
    disk: str = DEFAULT_DISK


@dataclass
class ExecResult:
    output: str
    returncode: int
    timed_out: bool = False
    elided: int = 0  # characters removed from the middle of the output


@runtime_checkable
class Sandbox(Protocol):
    """A repository copied into an isolated environment at WORKDIR.

    execute() runs one bash command in WORKDIR as a non-root user; diff() is the git diff of
    the repository against its state when the sandbox opened; restore(globs) puts the files
    matching the globs back as they were then and names those that had changed; snapshot()
    names the repository's files as they are now (equal names, equal files) and rewind(name)
    puts them back as they were then; close() removes everything and is safe to call twice.
    """

    def execute(self, command: str, timeout: float | None = None) -> ExecResult: ...

    def diff(self) -> str: ...

    def restore(self, globs: Sequence[str]) -> list[str]: ...

    def snapshot(self) -> str: ...

    def rewind(self, state: str) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> "Sandbox": ...

    def __exit__(self, *exc: object) -> None: ...


class SandboxKind(str, Enum):
    """The sandbox backends: a Docker container, or a bubblewrap jail on the host."""

    docker = "docker"
    bwrap = "bwrap"


def open_sandbox(kind: SandboxKind | str, repo: Path, limits: SandboxLimits | None = None, image: str | None = None) -> Sandbox:
    """Opens a sandbox of the named backend ("docker" or "bwrap") holding a copy of repo."""
    limits = limits or SandboxLimits()
    kind = kind.value if isinstance(kind, SandboxKind) else kind
    if kind == "docker":
        from skillgraft.sandbox.docker_backend import DockerSandbox

        return DockerSandbox(repo, limits, image=image)
    if kind == "bwrap":
        from skillgraft.sandbox.bwrap_backend import BwrapSandbox

        return BwrapSandbox(repo, limits)
    raise SandboxError(f"unknown sandbox backend {kind!r}: choose 'docker' or 'bwrap'")
