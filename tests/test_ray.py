"""Episodes, evaluations and learning sessions on a real local Ray cluster (a head and a second
node on loopback), with real Docker sandboxes, a real PostgreSQL store, the replay model and a
real tiny Llama; one test kills a worker mid-episode."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from functools import partial

import docker
import pytest
import yaml
from typer.testing import CliRunner

from learn_support import parts  # noqa: F401  (fixture)
from pg_server import pg_url, postgres_server  # noqa: F401  (fixtures)
from ray_support import TASK, ray_cluster, replay_file, solving  # noqa: F401  (fixture)
from skillgraft.agent.episodes import EpisodeJob
from skillgraft.agent.models.replay_model import ReplayModel
from skillgraft.agent.task import Task
from skillgraft.sandbox.base import LABEL
from skillgraft.sandbox.lifecycle import OWNER_PID

# A cluster that cannot be reached makes Ray wait without end; a test fails instead.
pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]


def pool(address: str, factory, workers: int = 2, **kw):
    from skillgraft.agent.cluster import RayEpisodes, connect

    assert connect(address) == 2
    return RayEpisodes(factory, workers, **kw)


def test_episodes_run_once_each_across_both_nodes_and_land_like_local_runs(ray_cluster, tmp_path):
    replies = replay_file(tmp_path, solving(), episodes=4)
    runner = pool(ray_cluster, partial(ReplayModel.from_file, replies))
    try:
        task = Task.from_dict(TASK)
        jobs = [EpisodeJob(task, trajectory_path=tmp_path / "out" / f"{i}.json", info={"session_id": 9}, tag=i)
                for i in range(4)]
        results = list(runner.run_all(jobs))
        stats = runner.stats()
    finally:
        runner.close()
    assert sorted(job.tag for job, _ in results) == [0, 1, 2, 3]
    assert all(r.success and r.exit_status == "Submitted" and r.steps == 3 for _, r in results)
    # both nodes ran episodes, and every episode ran exactly once
    assert len({s["node"] for s in stats}) == 2 and sum(s["episodes"] for s in stats) == 4
    assert all(s["episodes"] >= 1 for s in stats)
    for job, result in results:
        assert result.trajectory_path == job.trajectory_path
        doc = json.loads(job.trajectory_path.read_text())
        assert doc["info"]["session_id"] == 9 and doc["info"]["success"] is True
        assert doc["info"]["task"]["id"] == "make-two" and doc["messages"] == result.messages
        assert "+    return 2" in result.patch
    assert runner.tally.done == 4 and runner.tally.retried == runner.tally.failed == 0


def test_a_sqlite_store_is_refused_for_a_cluster_of_two_nodes(ray_cluster, tmp_path):
    from skillgraft.cli import app

    result = CliRunner().invoke(app, ["world", "eval", "--model", "replay:/nonexistent.json", "--ray", ray_cluster,
                                      "--home", str(tmp_path / "home"), "--families", "wrong_boolean"])
    assert result.exit_code == 2
    assert "the Ray cluster has 2 nodes, but the store is a SQLite file" in result.output
    assert "postgresql+psycopg://" in result.output


def test_learn_on_the_cluster_records_every_run_once_and_learns_between_waves(ray_cluster, pg_url, tmp_path):
    from skillgraft.cli import app
    from skillgraft.skills.store import Store

    files = []
    for name, value in (("make-two", 2), ("make-two-again", 2)):
        task = {**TASK, "id": name, "family": "constants"}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(task))
        files.append(str(path))
    replies = replay_file(tmp_path, solving(), episodes=4)
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["learn", *files, "--sessions", "2", "--no-baseline", "--model", f"replay:{replies}",
                                      "--ray", ray_cluster, "--workers", "2", "--store", pg_url, "--home", str(home),
                                      "--curve", str(tmp_path / "curve.png"), "--json"])
    assert result.exit_code == 0, result.output
    sessions = json.loads(result.stdout)["sessions"]["on"]
    assert [s["successes"] for s in sessions] == [2, 2]
    store = Store(pg_url, home / "artifacts")
    first, second = (sorted(store.trajectories(session_id=s["session_id"]), key=lambda t: t.id) for s in sessions)
    # each task's run recorded once per session, in task order, its file in the store
    assert [t.task_id for t in first] == [t.task_id for t in second] == ["make-two", "make-two-again"]
    for row in first + second:
        doc = json.loads(store.trajectory_path(row).read_text())
        assert doc["info"]["success"] is True and doc["info"]["session_id"] == row.session_id
    # the first wave taught a skill; the second session's wave ran with it in context
    learned = store.latest_version("constants")
    assert learned is not None and learned.origin == "summarised"
    assert all(learned.id in row.skill_version_ids for row in second)
    assert all(row.skill_version_ids == [] for row in first)


def test_parametric_eval_with_a_tiny_llama_sends_each_adapter_once_per_worker(ray_cluster, parts, tmp_path):
    from skillgraft.agent.models.hf_model import HFModel
    from skillgraft.agent.episodes import ThreadModels
    from skillgraft.skillworld.evaluate import run_eval

    base, compiler = parts
    factory = partial(HFModel, base, max_new_tokens=8)
    runner = pool(ray_cluster, factory, adapter_cache=str(tmp_path / "adapters"))
    try:
        results = run_eval(ThreadModels(factory), "parametric", ["wrong_boolean"], 4, compiler=compiler, runner=runner)
        stats = runner.stats()
    finally:
        runner.close()
    assert [(r.family, r.condition) for r in results] == [("wrong_boolean", "parametric")] * 4
    assert sorted(r.seed for r in results) == [1_000_000 + i for i in range(4)]
    assert sum(s["episodes"] for s in stats) == 4
    # each episode's paraphrase compiles to an adapter of its own content, put once into the
    # cluster; a worker fetches a content only when its cache lacks it, never twice
    assert 1 <= len(runner.shipper.refs) <= 4
    for s in stats:
        assert len(s["adapters_fetched"]) == len(set(s["adapters_fetched"]))
    cached = sorted(p.name for p in (tmp_path / "adapters").iterdir() if not p.name.startswith("."))
    assert cached == sorted(runner.shipper.refs)


def test_a_learning_session_with_a_tiny_llama_runs_parametric_through_the_cluster(ray_cluster, parts, pg_url, tmp_path):
    from skillgraft.agent.models.hf_model import HFModel
    from skillgraft.evolve.learn import LearnConfig, Learner
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skills.store import Store
    from skillgraft.skillworld.generate import generate

    base, compiler = parts
    store = Store(pg_url, tmp_path / "artifacts")
    store.add_version("wrong-boolean", "---\nname: wrong-boolean\ndescription: Flip a wrong boolean operator.\n---\n"
                      "Run the tests, find the `and`, make it `or`.\n", origin="authored")
    factory = partial(HFModel, base, max_new_tokens=8)
    runner = pool(ray_cluster, factory)
    tasks = [generate("wrong_boolean", 1_000_000 + i).task() for i in range(2)]
    try:
        learner = Learner(store, factory(), compiler, OfflineSummariser(), LearnConfig(skill_mode="parametric"),
                          tmp_path / "work", episodes=runner)
        report = learner.run_session(tasks)
        fetched = [d for s in runner.stats() for d in s["adapters_fetched"]]
    finally:
        runner.close()
    rows = sorted(store.trajectories(session_id=report.session_id), key=lambda t: t.id)
    assert [r.task_id for r in rows] == [t.id for t in tasks]
    for row, outcome in zip(rows, report.outcomes):
        assert row.adapter_ids and row.skill_version_ids  # the compiled skill went with the run
        assert outcome.skills == ["wrong-boolean@v1"]
        doc = json.loads(store.trajectory_path(row).read_text())
        assert doc["info"]["adapters"] and doc["info"]["adapter_ids"] == row.adapter_ids
    # both runs joined the same compiled skill: one content, fetched at most once by each worker
    assert len(runner.shipper.refs) == 1 and 1 <= len(fetched) <= 2 and set(fetched) == set(runner.shipper.refs)


def test_a_worker_killed_mid_episode_is_retried_elsewhere_counted_once_and_its_sandbox_reaped(ray_cluster, pg_url, tmp_path):
    from skillgraft.evolve.learn import LearnConfig, Learner
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skills.store import Store

    replies = replay_file(tmp_path, solving(first="sleep 8; cat calc.py"), episodes=3)
    runner = pool(ray_cluster, partial(ReplayModel.from_file, replies))
    store = Store(pg_url, tmp_path / "artifacts")
    task = Task.from_dict(TASK)
    victim = runner.stats()[0]["pid"]  # the first idle worker takes the first job
    learner = Learner(store, ReplayModel.from_file(replies), None, OfflineSummariser(),
                      LearnConfig(skill_mode="context", learning=False), tmp_path / "work", episodes=runner)
    reports = []
    thread = threading.Thread(target=lambda: reports.append(learner.run_session([task])))
    client = docker.from_env()
    try:
        thread.start()
        deadline = time.monotonic() + 90
        while not client.containers.list(filters={"label": [f"{LABEL}=1", f"{OWNER_PID}={victim}"]}):
            assert time.monotonic() < deadline, "the worker never opened its sandbox"
            time.sleep(0.2)
        os.kill(victim, signal.SIGKILL)
        thread.join(timeout=240)
        assert not thread.is_alive()
        stats = runner.stats()
    finally:
        runner.close()
    [report] = reports
    assert [o.success for o in report.outcomes] == [True]
    assert (runner.tally.done, runner.tally.retried, runner.tally.failed) == (1, 1, 0)
    [row] = store.trajectories(session_id=report.session_id)
    assert row.task_id == "make-two" and row.reward == 1.0
    # the killed process's sandbox is gone; the job finished on a worker that is not the dead one
    assert not client.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"{OWNER_PID}={victim}"]})
    assert victim not in {s["pid"] for s in stats}
    assert runner.tally.reaped >= 1 or any(s["reaped"] for s in stats)


def sandboxes_created_since(client: docker.DockerClient, since: float) -> list[int]:
    """The owner process of every sandbox container created since then (the engine's own events)."""
    events = client.events(since=int(since), until=int(time.time()) + 1, decode=True,
                           filters={"type": "container", "event": "create", "label": f"{LABEL}=1"})
    return [int(e["Actor"]["Attributes"][OWNER_PID]) for e in events]


def test_cycleqd_scores_each_generation_on_the_cluster(ray_cluster, pg_url, tmp_path):
    from cycleqd_support import random_adapter_for, tiny_policy
    from skillgraft.cli import app
    from skillgraft.hypernet.peft_io import read_info
    from skillgraft.skills.store import Store

    home = tmp_path / "home"
    model = tiny_policy(tmp_path / "policy")
    store = Store(pg_url, home / "artifacts")
    parent = None
    for seed in (1, 2):
        folder = random_adapter_for(model, tmp_path / f"adapter{seed}", seed)
        parent = store.commit_global(folder, parent, {"method": "test"}, base_fingerprint=read_info(folder).fingerprint).id
    sets = {}
    for name, test in (("easy", "true"), ("hard", "false")):  # every adapter solves "easy" and fails "hard"
        path = tmp_path / "sets" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"id": f"{name}-1", "repo": {"files": {"README.md": "tiny\n"}},
                                        "instruction": "Nothing to do; submit.", "test": test, "limits": {"steps": 1}}))
        sets[name] = path
    client = docker.from_env()
    started = time.time()
    result = CliRunner().invoke(app, ["evolve", "cycleqd", "--home", str(home), "--store", pg_url, "--generations", "1",
                                      "--tasks", f"easy={sets['easy']}", "--tasks", f"hard={sets['hard']}",
                                      "--model", f"hf:{model}", "--children", "1", "--seed", "4", "--no-promote",
                                      "--ray", ray_cluster, "--workers", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    gens = report["generations"]
    assert gens[0]["evaluations"] == 4  # two checkpoints x two task sets
    assert gens[0]["archives"]["easy"]["best_quality"] == 1.0 and gens[0]["archives"]["hard"]["best_quality"] == 0.0
    assert Store(pg_url, home / "artifacts").qd_run(report["run_id"]).generation == 1
    # every episode ran in a worker process of the cluster, none in this one
    owners = sandboxes_created_since(client, started)
    assert len(owners) >= 6 and os.getpid() not in owners  # 4 + the child's 2 + the merge's validation


KILLED_DRIVER = """
    import sys, time
    from functools import partial
    from pathlib import Path
    from skillgraft.agent.cluster import RayEpisodes, connect
    from skillgraft.agent.models.replay_model import ReplayModel
    from skillgraft.agent.task import Task
    from skillgraft.evolve.learn.loop import LearnConfig, Learner
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skills.store import Store

    address, url, artifacts, work, replies, task = sys.argv[1:7]
    connect(address)
    runner = RayEpisodes(partial(ReplayModel.from_file, replies), 2)
    tasks = [Task.from_dict({**eval(task), "id": f"make-two-{i}"}) for i in range(4)]
    done = []

    def stop_after_the_first_wave(outcome):
        done.append(outcome.task_id)
        if len(done) == 2:
            print("wave done", flush=True)
            time.sleep(600)  # killed here, between the first wave and the second

    Learner(Store(url, Path(artifacts)), ReplayModel.from_file(replies), None, OfflineSummariser(),
            LearnConfig(skill_mode="context", learning=False), Path(work), episodes=runner).run_session(
        tasks, on_outcome=stop_after_the_first_wave, label="resumable")
"""


def test_a_learn_driver_killed_between_waves_is_carried_on_by_the_next_one(ray_cluster, pg_url, tmp_path):
    from learn_support import killed_at
    from skillgraft.evolve.learn import LearnConfig, Learner
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skills.store import Store

    replies = replay_file(tmp_path, solving(), episodes=4)
    artifacts = tmp_path / "artifacts"
    Store(pg_url, artifacts).close()
    killed_at(KILLED_DRIVER, [ray_cluster, pg_url, str(artifacts), str(tmp_path / "w1"), str(replies), repr(TASK)],
              "wave done")

    store = Store(pg_url, artifacts)
    (killed,) = store.sessions(kind="learn")
    assert sorted(t.task_id for t in store.trajectories(session_id=killed.id)) == ["make-two-0", "make-two-1"]
    assert store.check().interrupted == [killed.id]
    runner = pool(ray_cluster, partial(ReplayModel.from_file, replies))
    try:
        learner = Learner(store, ReplayModel.from_file(replies), None, OfflineSummariser(),
                          LearnConfig(skill_mode="context", learning=False), tmp_path / "w2", episodes=runner)
        report = learner.run_session([Task.from_dict({**TASK, "id": f"make-two-{i}"}) for i in range(4)], label="resumable")
    finally:
        runner.close()
    assert report.session_id == killed.id and report.successes == 4
    assert runner.tally.done == 2  # only the second wave ran again
    rows = sorted(store.trajectories(session_id=killed.id), key=lambda t: t.id)
    assert [r.task_id for r in rows] == [f"make-two-{i}" for i in range(4)]


def test_an_address_where_no_head_answers_is_refused_at_once(tmp_path):
    import socket

    from skillgraft.cli import app

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = CliRunner().invoke(app, ["world", "eval", "--ray", f"127.0.0.1:{port}", "--home", str(tmp_path / "home"),
                                      "--families", "wrong_boolean"])
    assert result.exit_code == 2 and f"no Ray head answers at 127.0.0.1:{port}" in " ".join(result.output.split())
    bad = CliRunner().invoke(app, ["world", "eval", "--ray", "127.0.0.1:http", "--home", str(tmp_path / "home")])
    assert bad.exit_code == 2 and "the port must be a number" in bad.output
