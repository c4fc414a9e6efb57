"""A whole Ray node lost mid-episode: the episode runs again on the node that is left and is
recorded once. A cluster of its own, since the test takes a node away."""
from __future__ import annotations

import os
import threading
import time
from functools import partial

import docker
import pytest

from pg_server import pg_url, postgres_server  # noqa: F401  (fixtures)
from ray_support import RAY_ENV, TASK, replay_file, solving
from skillgraft.agent.models.replay_model import ReplayModel
from skillgraft.agent.task import Task
from skillgraft.sandbox.base import LABEL
from skillgraft.sandbox.lifecycle import OWNER_PID

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_node_lost_mid_episode_is_retried_on_the_node_left_and_recorded_once(pg_url, tmp_path, monkeypatch):
    for key, value in RAY_ENV.items():
        monkeypatch.setenv(key, value)
    ray = pytest.importorskip("ray") if not os.environ.get("CI") else __import__("ray")
    from ray.cluster_utils import Cluster

    from skillgraft.agent.cluster import RayEpisodes, connect
    from skillgraft.evolve.learn import LearnConfig, Learner
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skills.store import Store

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                            "include_dashboard": False})
    second = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    client = docker.from_env()
    try:
        assert connect(cluster.address) == 2
        replies = replay_file(tmp_path, solving(first="sleep 8; cat calc.py"), episodes=3)
        runner = RayEpisodes(partial(ReplayModel.from_file, replies), 2)  # one CPU each: one worker per node
        on_second = [s["pid"] for s in runner.stats() if s["node"] == second.node_id]
        assert len(on_second) == 1
        store = Store(pg_url, tmp_path / "artifacts")
        tasks = [Task.from_dict({**TASK, "id": f"make-two-{i}"}) for i in range(2)]  # one for each worker
        learner = Learner(store, ReplayModel.from_file(replies), None, OfflineSummariser(),
                          LearnConfig(skill_mode="context", learning=False), tmp_path / "work", episodes=runner)
        reports = []
        thread = threading.Thread(target=lambda: reports.append(learner.run_session(tasks)))
        thread.start()
        deadline = time.monotonic() + 90
        while not client.containers.list(filters={"label": [f"{LABEL}=1", f"{OWNER_PID}={on_second[0]}"]}):
            assert time.monotonic() < deadline, "the second node's worker never opened its sandbox"
            time.sleep(0.2)
        cluster.remove_node(second)
        thread.join(timeout=240)
        assert not thread.is_alive()
        runner.close()
        [report] = reports
        assert [o.success for o in report.outcomes] == [True, True]
        assert (runner.tally.done, runner.tally.retried, runner.tally.failed) == (2, 1, 0)
        rows = sorted(store.trajectories(session_id=report.session_id), key=lambda t: t.id)
        assert [r.task_id for r in rows] == ["make-two-0", "make-two-1"] and all(r.reward == 1.0 for r in rows)
        # the lost node shared this machine's engine, so the node left swept its sandbox away
        assert not client.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"{OWNER_PID}={on_second[0]}"]})
    finally:
        ray.shutdown()
        cluster.shutdown()
