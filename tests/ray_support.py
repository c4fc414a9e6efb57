"""A real Ray cluster for tests: a head and a second node, each a raylet of its own with one CPU,
every address on loopback. The driver joins it through the code under test (connect)."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillgraft.agent import prompts

# Ray would otherwise advertise the machine's outward address and report usage home; on
# loopback, a cluster of two nodes on one machine is still two raylets with their own resources.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}

TASK = {"id": "make-two", "family": "constants", "repo": {"files": {"calc.py": "def two():\n    return 1\n"}},
        "instruction": "two() must return 2.", "test": "python3 -c 'import calc; assert calc.two() == 2'",
        "test_files": [], "limits": {"steps": 5}}


def reply(command: str, thought: str = "Next.") -> str:
    return prompts.assistant_reply(thought, command)


def solving(first: str = "cat calc.py") -> list[str]:
    """One episode's replies that fix TASK."""
    return [reply(first), reply("sed -i 's/return 1/return 2/' calc.py", "Fix the value."), reply("submit", "Done.")]


def replay_file(folder: Path, replies: list[str], episodes: int) -> Path:
    """Enough replies for `episodes` runs by one model (a replay answers in order, across runs)."""
    path = folder / "replay.json"
    path.write_text(json.dumps(replies * episodes))
    return path


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """The head's address; the cluster and the driver's connection end with the module."""
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)  # before Ray is first imported: it reads them then
    ray = pytest.importorskip("ray") if not os.environ.get("CI") else __import__("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                            "include_dashboard": False})
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
