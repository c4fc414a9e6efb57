"""The worker actor: one model, loaded once, running episodes in sandboxes on its node."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillgraft.agent.loadout import GivenSkill, Loadout
from skillgraft.agent.models.base import Model, Sampling
from skillgraft.agent.runner import RunResult, run_task
from skillgraft.agent.skill_mode import SkillMode
from skillgraft.agent.task import Task
from skillgraft.agent.trajectory import read_trajectory
from skillgraft.agent.unstick import Unstick
from skillgraft.agent.cluster.artifacts import AdapterCache


@dataclass(frozen=True)
class WireJob:
    """What a worker needs of a job: the task, the skills the prompt shows, the adapter by hash."""

    task: Task
    mode: SkillMode
    skills: tuple[tuple[str, str, str], ...]  # (name, text, body)
    adapter: tuple[str, list[Any]] | None  # (content hash, [object ref])
    info: dict[str, Any] | None
    keep_trajectory: bool
    sampling: Sampling | None = None
    unstick: Unstick | None = None


@dataclass
class WireResult:
    result: RunResult
    trajectory: dict | None  # the trajectory document a local run would have written
    node: str
    pid: int


def reap_here(sandbox: str) -> int:
    """Removes this node's sandboxes whose owning process is gone (a worker killed mid-episode)."""
    if sandbox != "docker":
        return 0  # a bubblewrap sandbox dies with the process that started it
    from skillgraft.sandbox.base import SandboxUnavailable
    from skillgraft.sandbox.reap import reap

    try:
        return sum(1 for left in reap() if left.removed)
    except SandboxUnavailable:
        return 0


class EpisodeWorker:
    """Made a Ray actor by pool.py; restarted by Ray when its process dies, reaping what it left."""

    def __init__(self, model_factory: Callable[[], Model], sandbox: str, image: str | None, cache: str | None):
        import ray

        self.node = ray.get_runtime_context().get_node_id()
        self.sandbox, self.image = sandbox, image
        self.reaped = reap_here(sandbox)
        self.model = model_factory()
        root = Path(cache) if cache else Path(tempfile.gettempdir()) / f"skillgraft-adapters-{os.getuid()}"
        self.adapters = AdapterCache(root)
        self.episodes = 0

    def where(self) -> tuple[str, int]:
        return self.node, os.getpid()

    def stats(self) -> dict[str, Any]:
        return {"node": self.node, "pid": os.getpid(), "episodes": self.episodes, "adapters_fetched": list(self.adapters.fetched),
                "reaped": self.reaped}

    def run(self, job: WireJob) -> WireResult:
        skills = tuple(GivenSkill(name, text, body) for name, text, body in job.skills)
        adapter_dir = self.adapters.folder(*job.adapter) if job.adapter is not None else None
        loadout = Loadout(mode=job.mode, skills=skills, adapter_dir=adapter_dir)
        with tempfile.TemporaryDirectory(prefix="skillgraft-episode-") as tmp:
            path = Path(tmp) / "trajectory.json" if job.keep_trajectory else None
            result = run_task(job.task, self.model, sandbox=self.sandbox, loadout=loadout, trajectory_path=path,
                              info=job.info, image=self.image, sampling=job.sampling, unstick=job.unstick)
            document = read_trajectory(path) if path is not None and path.is_file() else None
        self.episodes += 1
        return WireResult(replace(result, trajectory_path=None), document, self.node, os.getpid())
