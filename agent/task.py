"""A repository task: what to fix, where the code comes from, and the command that judges it.

A task file is YAML:

    id: slugify-hyphens
    repo: slugify            # a folder (relative to this file), {git: URL, rev: REV}, or {files: {path: text}}
    instruction: Make slugify() collapse runs of separators into one hyphen.
    test: python3 -m pytest -q
    setup: [pip install -e .]            # optional, run in the sandbox before the agent starts
    family: strings                      # optional
    tags: [regex]                        # optional
    network: false                       # optional; sandboxes are offline unless a task asks
    test_files: ["tests/**", "test_*.py"]   # optional: globs of the files that define the verdict
    limits: {steps: 20, wall_time: 600, command_timeout: 60, cost: 1.0, disk: 4g}   # optional, each key too

The files matching test_files are put back as they were at the start before the test command
runs, so an agent cannot pass a task by editing its tests; the trajectory names any it touched.
Symbolic links in a repository folder are copied as links and never followed: a link pointing
out of the repository resolves, inside the sandbox, against the sandbox's own filesystem, never
this machine's files as they are outside it, and the trajectory lists it.

Unknown keys and missing fields raise TaskError naming the key and the file, because a typo in
a task file would otherwise silently fall back to a default and waste a run.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skillgraft.sandbox.base import DEFAULT_DISK, parse_bytes

_IGNORED_WHEN_COPYING = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", "*.pyc")
# A fixed identity and date make the start commit reproducible and independent of the user's git config.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "skillgraft",
    "GIT_AUTHOR_EMAIL": "skillgraft@localhost",
    "GIT_COMMITTER_NAME": "skillgraft",
    "GIT_COMMITTER_EMAIL": "skillgraft@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


class TaskError(ValueError):
    """A task file is malformed, or its repository cannot be produced."""


@dataclass(frozen=True)
class Limits:
    steps: int = 30  # model calls
    wall_time: float = 900.0  # seconds for the agent loop
    command_timeout: float = 60.0  # seconds per command, the test command included
    cost: float = 1.0  # USD; 0 means no limit
    disk: str = DEFAULT_DISK  # what the sandbox may write in all, as Docker spells sizes: 512m, 4g


@dataclass(frozen=True)
class GitRepo:
    git: str
    rev: str


@dataclass(frozen=True)
class InlineRepo:
    files: dict[str, str]


RepoSpec = Path | GitRepo | InlineRepo


@dataclass(frozen=True)
class Task:
    id: str
    repo: RepoSpec
    instruction: str
    test: str
    setup: list[str] = field(default_factory=list)
    family: str | None = None
    tags: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    network: bool = False
    test_files: list[str] = field(default_factory=list)
    source: str = "<inline>"

    @classmethod
    def from_dict(cls, d: dict, source: str = "<inline>") -> "Task":
        """Validates a parsed task; relative repo paths resolve against the source file's folder."""
        return _parse(d, source)

    def to_dict(self) -> dict:
        """The task as it would be written in a file (paths made absolute)."""
        if isinstance(self.repo, Path):
            repo: Any = str(self.repo)
        elif isinstance(self.repo, GitRepo):
            repo = {"git": self.repo.git, "rev": self.repo.rev}
        else:
            repo = {"files": dict(self.repo.files)}
        return {
            "id": self.id,
            "repo": repo,
            "instruction": self.instruction,
            "test": self.test,
            "setup": list(self.setup),
            "family": self.family,
            "tags": list(self.tags),
            "network": self.network,
            "test_files": list(self.test_files),
            "limits": asdict(self.limits),
        }

    def materialize(self, dest: Path) -> Path:
        """Writes the repository into dest (which must not exist or be empty) with one git commit
        of its start state, so that a diff later shows exactly what the agent changed."""
        dest = Path(dest)
        if dest.exists() and any(dest.iterdir()):
            raise TaskError(f"{self.source}: cannot materialize into non-empty folder {dest}")
        if isinstance(self.repo, GitRepo):
            _clone(self.repo, dest, self.source)
            return dest
        if isinstance(self.repo, InlineRepo):
            dest.mkdir(parents=True, exist_ok=True)
            for rel, text in self.repo.files.items():
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
        else:
            if not self.repo.is_dir():
                raise TaskError(f"{self.source}: repo folder {self.repo} does not exist")
            # The working tree as it is, uncommitted edits included, is the task's start state;
            # the source's own history is left behind so the agent cannot read a fix from it.
            # Links stay links: following one would copy whatever it points at on this machine.
            shutil.copytree(self.repo, dest, symlinks=True, ignore=_IGNORED_WHEN_COPYING, dirs_exist_ok=True)
        _commit_start(dest, self.source)
        return dest


def links_leaving(repo: Path) -> list[str]:
    """The symbolic links under repo (relative paths) whose target lies outside it."""
    root = Path(repo).resolve()
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            path = Path(folder, name)
            if not path.is_symlink():
                continue
            target = Path(os.path.normpath(Path(folder, os.readlink(path))))
            if not target.is_relative_to(root):
                out.append(str(path.relative_to(root)))
    return sorted(out)


def load_task(path: str | Path) -> Task:
    """Reads and validates one task file."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise TaskError(f"{path}: cannot read task file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not a UTF-8 text file (byte {exc.start} cannot be decoded); a task file is YAML") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TaskError(f"{path}: not valid YAML{where}: {problem}") from None
    return Task.from_dict(data, source=str(path))


_REQUIRED = ("id", "repo", "instruction", "test")
_OPTIONAL = ("setup", "family", "tags", "limits", "network", "test_files")
_LIMIT_TYPES = {"steps": int, "wall_time": float, "command_timeout": float, "cost": float}
# The largest value each limit may take: a week of wall time, a day per command, 10,000 steps.
_LIMIT_MAX = {"steps": 10_000, "wall_time": 7 * 86_400.0, "command_timeout": 86_400.0, "cost": 1e6}


def _parse(d: Any, source: str) -> Task:
    if not isinstance(d, dict):
        raise TaskError(f"{source}: a task must be a mapping of keys, got {type(d).__name__}")
    unknown = [k for k in d if k not in _REQUIRED + _OPTIONAL]
    if unknown:
        raise TaskError(f"{source}: unknown key {unknown[0]!r} (allowed: {', '.join(_REQUIRED + _OPTIONAL)})")
    missing = [k for k in _REQUIRED if d.get(k) in (None, "")]
    if missing:
        raise TaskError(f"{source}: missing required field {missing[0]!r}")
    task_id = _string(d, "id", source)
    if any(c.isspace() or c == "/" for c in task_id):
        raise TaskError(f"{source}: field 'id' must have no spaces or slashes, got {task_id!r}")
    setup = d.get("setup") or []
    if isinstance(setup, str):
        setup = [setup]
    tags = d.get("tags") or []
    family = d.get("family")
    network = d.get("network", False)
    if not isinstance(setup, list) or not all(isinstance(s, str) for s in setup):
        raise TaskError(f"{source}: field 'setup' must be a list of commands")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskError(f"{source}: field 'tags' must be a list of strings")
    if family is not None and not isinstance(family, str):
        raise TaskError(f"{source}: field 'family' must be a string")
    if not isinstance(network, bool):
        raise TaskError(f"{source}: field 'network' must be true or false")
    test_files = d.get("test_files") or []
    if isinstance(test_files, str):
        test_files = [test_files]
    if not isinstance(test_files, list) or not all(isinstance(g, str) and g.strip() for g in test_files):
        raise TaskError(f"{source}: field 'test_files' must be a list of globs")
    for glob in test_files:
        if Path(glob).is_absolute() or ".." in Path(glob).parts:
            raise TaskError(f"{source}: test_files glob {glob!r} must stay inside the repository")
    return Task(
        id=task_id,
        repo=_repo(d["repo"], source),
        instruction=_string(d, "instruction", source),
        test=_string(d, "test", source),
        setup=list(setup),
        family=family,
        tags=list(tags),
        limits=_limits(d.get("limits"), source),
        network=network,
        test_files=list(test_files),
        source=source,
    )


def _string(d: dict, key: str, source: str) -> str:
    value = d[key]
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"{source}: field {key!r} must be a non-empty string")
    return value


def _repo(value: Any, source: str) -> RepoSpec:
    if isinstance(value, str):
        base = Path(source).parent if source != "<inline>" else Path.cwd()
        return (base / os.path.expanduser(value)).resolve()
    if not isinstance(value, dict):
        raise TaskError(f"{source}: field 'repo' must be a path, {{git, rev}} or {{files}}")
    if "files" in value:
        _only_keys(value, ("files",), "repo", source)
        files = value["files"]
        if not isinstance(files, dict) or not files:
            raise TaskError(f"{source}: repo.files must be a non-empty mapping of path to text")
        for rel, text in files.items():
            if not isinstance(rel, str) or not isinstance(text, str):
                raise TaskError(f"{source}: repo.files entry {rel!r} must map a path to text")
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                raise TaskError(f"{source}: repo.files path {rel!r} must stay inside the repository")
        return InlineRepo(dict(files))
    if "git" in value:
        _only_keys(value, ("git", "rev"), "repo", source)
        if not isinstance(value.get("rev"), str) or not value["rev"]:
            raise TaskError(f"{source}: missing required field 'repo.rev' (a git repo needs a revision)")
        if not isinstance(value["git"], str) or not value["git"]:
            raise TaskError(f"{source}: field 'repo.git' must be a URL")
        return GitRepo(value["git"], value["rev"])
    raise TaskError(f"{source}: field 'repo' needs a 'git' or 'files' key, got {sorted(value)}")


def _only_keys(value: dict, allowed: tuple[str, ...], where: str, source: str) -> None:
    for key in value:
        if key not in allowed:
            raise TaskError(f"{source}: unknown key {where}.{key!r} (allowed: {', '.join(allowed)})")


def _limits(value: Any, source: str) -> Limits:
    if value is None:
        return Limits()
    if not isinstance(value, dict):
        raise TaskError(f"{source}: field 'limits' must be a mapping")
    _only_keys(value, (*_LIMIT_TYPES, "disk"), "limits", source)
    parsed: dict[str, Any] = {}
    if "disk" in value:
        parsed["disk"] = _size(value["disk"], f"{source}: limits.disk")
    for key, kind in _LIMIT_TYPES.items():
        if key not in value:
            continue
        raw = value[key]
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (kind is int and not isinstance(raw, int)):
            raise TaskError(f"{source}: limits.{key} must be a {'whole ' if kind is int else ''}number")
        if not math.isfinite(raw) or raw > _LIMIT_MAX[key]:
            raise TaskError(f"{source}: limits.{key} must be a finite number no larger than {_LIMIT_MAX[key]:g} (got {raw!r})")
        if raw < 0 or (raw == 0 and key != "cost"):
            raise TaskError(f"{source}: limits.{key} must be positive")
        parsed[key] = kind(raw)
    return Limits(**parsed)


def _size(raw: Any, where: str) -> str:
    """A size as Docker spells it ("512m", "4g") or a number of bytes; at least a mebibyte."""
    try:
        size = parse_bytes(raw) if isinstance(raw, (str, int)) and not isinstance(raw, bool) else None
    except ValueError:
        size = None
    if size is None or size < 2**20:
        raise TaskError(f"{where} must be a size of at least 1m, such as 512m or 4g (got {raw!r})")
    return str(raw).strip().lower() if isinstance(raw, str) else str(size)


def _git(args: list[str], cwd: Path, source: str) -> None:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **_GIT_ENV}, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise TaskError(f"{source}: git {args[0]} failed: {(proc.stderr or proc.stdout).strip()}")


def _commit_start(dest: Path, source: str) -> None:
    _git(["init", "-q", "-b", "main"], dest, source)
    _git(["add", "-A"], dest, source)
    _git(["commit", "-q", "--allow-empty", "--no-verify", "-m", "task start state"], dest, source)


def _clone(repo: GitRepo, dest: Path, source: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    _git(["clone", "-q", "--no-checkout", repo.git, str(dest)], dest.parent, source)
    _git(["checkout", "-q", "--detach", repo.rev], dest, source)
