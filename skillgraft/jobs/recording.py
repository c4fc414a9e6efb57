"""The store a run is recorded in, when there is one: a run is never lost for lack of one."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skillgraft.settings import Settings

if TYPE_CHECKING:  # kept out of `skillgraft trajectories ls`'s start-up
    from skillgraft.agent.runner import RunResult
    from skillgraft.agent.task import Task
    from skillgraft.skills.store import Store


def existing_store(settings: Settings) -> Store | None:
    """The store, or None when there is none yet (a SQLite file not created)."""
    url = settings.store_url
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        return None
    from skillgraft.skills.store import Store

    return Store(url, settings.artifacts)


def record_in_store(store: Store | None, result: RunResult, task: Task, model_name: str,
                    skill_version_ids: Sequence[int] = (), adapter_ids: Sequence[int] = ()) -> None:
    """Registers a finished run in the store, when there is one."""
    if store is None or result.trajectory_path is None or not Path(result.trajectory_path).exists():
        return
    store.add_trajectory(
        result.trajectory_path, task.id, task.family, result.exit_status, result.reward, result.cost,
        result.steps, result.timings, list(skill_version_ids), list(adapter_ids), model=model_name,
    )
