"""Task sets for CycleQD: a name and the evaluation tasks that score an adapter on it."""
from __future__ import annotations

from pathlib import Path

TASK_SUFFIXES = (".yaml", ".yml", ".json")


def load_task_set(path: str | Path) -> list:
    """The tasks in one task file, or in every task file directly inside a folder (sorted by name)."""
    from skillgraft.agent.task import TaskError, load_task

    path = Path(path).expanduser()
    if path.is_file():
        return [load_task(path)]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in TASK_SUFFIXES)
        if not files:
            raise TaskError(f"{path}: no task files ({', '.join(TASK_SUFFIXES)}) in this folder")
        return [load_task(p) for p in files]
    raise TaskError(f"{path}: no such task file or folder")


def parse_task_spec(spec: str) -> tuple[str, Path]:
    """`NAME=PATH` -> (NAME, PATH); a bare PATH is named after its file or folder stem."""
    if "=" in spec:
        name, _, where = spec.partition("=")
        name = name.strip()
        if not name:
            raise ValueError(f"task set {spec!r}: empty name before '='")
        return name, Path(where.strip())
    path = Path(spec)
    return path.stem if path.suffix in TASK_SUFFIXES else path.name, path
