"""RayEpisodes: the EpisodeRunner whose workers are Ray actors across a cluster.

Each actor holds one model and runs one episode at a time. The driver hands a job to an idle
actor, with its adapter as a content hash (agent.cluster.artifacts), and turns the answer back
into the RunResult and trajectory file a local run would have left. When a worker dies mid-episode
(its process or its node), Ray restarts the actor; the job goes to another worker, at most
`retries` more times, and yields one result however often it ran. The dead worker's node is
swept of sandboxes whose owner is gone before the job is handed on (every node left, when that
node itself is gone).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillgraft.agent.cluster.artifacts import AdapterShipper
from skillgraft.agent.cluster.connect import ClusterError
from skillgraft.agent.cluster.worker import EpisodeWorker, WireJob, WireResult, reap_here
from skillgraft.agent.episodes import EpisodeJob
from skillgraft.agent.models.base import Model
from skillgraft.agent.runner import RunResult
from skillgraft.agent.trajectory import TrajectoryWriter, write_json_atomic

WORKER_LOST = "WorkerLost"  # the exit status of an episode whose every try lost its worker


@dataclass
class Tally:
    """What the progress bar shows across the cluster."""

    done: int = 0
    retried: int = 0
    failed: int = 0
    reaped: int = 0
    on_event: Callable[["Tally"], None] = field(default=lambda tally: None, repr=False)

    def count(self, kind: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        self.on_event(self)

    def describe(self) -> str:
        return f"{self.done} done · {self.failed} failed · {self.retried} retried"


def _remote_worker():
    import ray

    # Ray brings a dead actor back (re-running __init__, which reaps its node); a call in flight
    # on it fails instead of being re-run, so the pool decides where a job goes next.
    return ray.remote(max_restarts=-1, max_task_retries=0)(EpisodeWorker)


def _reap_after_loss(node_id: str, sandbox: str) -> int:
    """Sweeps the lost worker's node of sandboxes whose owner is gone. When the node itself is
    gone, every node left is swept instead: its sandboxes went with it unless it shared a
    machine (and so a Docker engine) with another node, and only a dead owner's go."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    sweep = ray.remote(num_cpus=0, max_retries=0)(reap_here)
    refs = [sweep.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(sandbox)
            for node in ([node_id] if node_id in alive else alive)]
    try:
        return sum(ray.get(refs, timeout=120))
    except (ray.exceptions.RayError, TimeoutError):
        return 0


class RayEpisodes:
    def __init__(self, model_factory: Callable[[], Model], workers: int = 2, *, sandbox: str = "docker",
                 image: str | None = None, retries: int = 2, cpus_per_worker: float = 1.0,
                 adapter_cache: str | None = None, on_event: Callable[[Tally], None] = lambda tally: None,
                 restart_timeout: float = 600.0):
        """Needs a connected Ray (connect()); starts `workers` actors, each loading its model once.
        `restart_timeout`: how long to wait for a dead worker to come back when no other is left."""
        import ray

        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.workers = max(1, workers)
        self.sandbox, self.retries = sandbox, retries
        self.tally = Tally(on_event=on_event)
        self.shipper = AdapterShipper()
        self.restart_timeout = restart_timeout
        remote = _remote_worker().options(num_cpus=cpus_per_worker)
        self.actors = [remote.remote(model_factory, sandbox, image, adapter_cache) for _ in range(self.workers)]
        try:  # each has loaded its model once this answers; a model that cannot load is said here
            where = ray.get([a.where.remote() for a in self.actors])
        except ray.exceptions.RayError as exc:
            self.close()
            raise ClusterError(f"the Ray workers could not start: {exc}") from None
        self.nodes: dict[int, str] = {i: node for i, (node, _) in enumerate(where)}  # actor -> its last node
        self.gone: set[int] = set()  # actors Ray could not bring back

    # ---------------------------------------------------------------- the wire
    def _wire(self, job: EpisodeJob) -> WireJob:
        loadout = job.loadout
        adapter = self.shipper.ship(loadout.adapter_dir) if loadout.adapter_dir is not None else None
        skills = tuple((s.name, s.text, s.body) for s in loadout.skills)
        return WireJob(job.task, loadout.mode, skills, adapter, dict(job.info) if job.info else None,
                       job.trajectory_path is not None, job.sampling, job.unstick)

    @staticmethod
    def _landed(job: EpisodeJob, answer: WireResult) -> RunResult:
        """The result as a local run returns it, its trajectory file where the caller asked for it."""
        result = answer.result
        if job.trajectory_path is not None and answer.trajectory is not None:
            write_json_atomic(job.trajectory_path, answer.trajectory)
            result.trajectory_path = job.trajectory_path
        return result

    @staticmethod
    def _lost(job: EpisodeJob, why: str) -> RunResult:
        """An episode no worker could finish: unsolved, with a trajectory that says so."""
        writer = TrajectoryWriter(job.trajectory_path, {**(job.info or {}), "task": {"id": job.task.id, "family": job.task.family},
                                                        "exit_status": WORKER_LOST, "exit_detail": why, "reward": 0.0,
                                                        "success": False})
        writer.write([])
        return RunResult(job.task.id, False, 0.0, WORKER_LOST, "", "", 0, 0.0, 0.0, job.trajectory_path, exit_detail=why)

    # ---------------------------------------------------------------- scheduling
    def run_all(self, jobs: Sequence[EpisodeJob]) -> Iterator[tuple[EpisodeJob, RunResult]]:
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError, WorkerCrashedError

        lost_worker = (RayActorError, ActorDiedError, ActorUnavailableError, WorkerCrashedError)
        wires = [self._wire(job) for job in jobs]
        queue = deque(range(len(jobs)))
        tries = [0] * len(jobs)
        idle = deque(i for i in range(len(self.actors)) if i not in self.gone)
        running: dict[Any, tuple[str, int, int]] = {}  # ref -> ("run" | "probe", actor, job)
        while queue or any(kind == "run" for kind, _, _ in running.values()):
            while queue and idle:
                actor, i = idle.popleft(), queue.popleft()
                running[self.actors[actor].run.remote(wires[i])] = ("run", actor, i)
            if not running:
                raise ClusterError("every worker of the Ray cluster is gone; no episode can run")
            waiting = any(kind == "run" for kind, _, _ in running.values())
            ready, _ = ray.wait(list(running), num_returns=1, timeout=None if waiting else self.restart_timeout)
            if not ready:
                raise ClusterError(f"no Ray worker came back within {self.restart_timeout:.0f} s of dying; "
                                   f"{len(queue)} episodes were not run")
            ref = ready[0]
            kind, actor, i = running.pop(ref)
            try:
                answer = ray.get(ref)
            except lost_worker as exc:
                if kind == "probe":
                    self.gone.add(actor)  # it cannot come back: it leaves the pool
                    continue
                self._after_loss(actor)
                tries[i] += 1
                if tries[i] <= self.retries:
                    queue.appendleft(i)
                    self.tally.count("retried")
                else:
                    self.tally.count("failed")
                    yield jobs[i], self._lost(jobs[i], f"the worker died {tries[i]} times running it: {exc}")
                # Back in the pool once Ray has restarted it; meanwhile the job goes elsewhere.
                running[self.actors[actor].where.remote()] = ("probe", actor, -1)
                continue
            except ray.exceptions.RayTaskError as exc:
                raise exc.as_instanceof_cause() from None  # the run itself failed, as it would have here
            idle.append(actor)
            if kind == "run":
                self.nodes[actor] = answer.node
                self.tally.count("done")
                yield jobs[i], self._landed(jobs[i], answer)
            else:
                self.nodes[actor] = answer[0]

    def _after_loss(self, actor: int) -> None:
        node = self.nodes.get(actor)
        if node is not None:
            self.tally.reaped += _reap_after_loss(node, self.sandbox)

    def stats(self) -> list[dict[str, Any]]:
        """Each worker's node, process, episodes run and adapters fetched (not cached)."""
        import ray

        return ray.get([a.stats.remote() for a in self.actors])

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
