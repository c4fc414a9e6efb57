"""Episodes on a Ray cluster: episodes per minute with 1 worker against 2, and what going
through Ray costs an episode against running it in this process.

    python -m bench.bench_ray [--episodes 6] [--overhead-episodes 10] [--ray ADDRESS]

Without --ray the bench starts a cluster of two nodes on this machine (each a raylet with one
CPU, all on loopback) and stops it at the end.

1. Overhead: the same scripted episode (the replay model, a one-file repository, three
   commands) alternately in this process (one thread) and on one Ray worker; the median wall
   time of each, so the difference is what Ray adds: the job and result over the wire, the
   trajectory sent back and written where a local run writes it.
2. Throughput: held-out SkillWorld episodes of the seen families (no skill) with the default
   model, on 1 worker and then on 2 (each worker an actor with one CPU and its own model,
   loaded before the clock starts); episodes per minute and the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

# Ray reads these when first imported: addresses on loopback, no reports home.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

TASK = {"id": "make-two", "repo": {"files": {"calc.py": "def two():\n    return 1\n"}}, "instruction": "two() must return 2.",
        "test": "python3 -c 'import calc; assert calc.two() == 2'", "limits": {"steps": 5}}


def local_cluster():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                            "include_dashboard": False})
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    return cluster


def overhead(episodes: int, folder: Path) -> tuple[list[float], list[float]]:
    from skillgraft.agent import prompts
    from skillgraft.agent.cluster import RayEpisodes
    from skillgraft.agent.episodes import EpisodeJob, LocalEpisodes
    from skillgraft.agent.models.replay_model import ReplayModel
    from skillgraft.agent.task import Task

    replies = [prompts.assistant_reply("Look.", "cat calc.py"),
               prompts.assistant_reply("Fix.", "sed -i 's/return 1/return 2/' calc.py"),
               prompts.assistant_reply("Done.", "submit")]
    replay = folder / "replay.json"
    replay.write_text(json.dumps(replies * (episodes + 1)))
    factory = partial(ReplayModel.from_file, replay)
    here, remote = LocalEpisodes(factory, 1), RayEpisodes(factory, 1)
    task = Task.from_dict(TASK)
    times: tuple[list[float], list[float]] = ([], [])
    try:
        for i in range(episodes + 1):  # the first round of each warms up and is not counted
            for runner, out in ((here, times[0]), (remote, times[1])):
                job = EpisodeJob(task, trajectory_path=folder / f"{id(runner)}-{i}.json")
                started = time.perf_counter()
                [(_, result)] = list(runner.run_all([job]))
                if not result.success:
                    raise RuntimeError(f"the scripted episode failed: {result.exit_status} {result.exit_detail}")
                if i:
                    out.append(time.perf_counter() - started)
    finally:
        here.close()
        remote.close()
    return times


def throughput(episodes: int, workers: int, max_new_tokens: int) -> tuple[float, int]:
    from skillgraft.agent.cluster import RayEpisodes
    from skillgraft.agent.episodes import EpisodeJob
    from skillgraft.agent.models.factory import make_model
    from skillgraft.settings import load_settings
    from skillgraft.skillworld.default_model import ensure_policy
    from skillgraft.skillworld.families import GROUPS
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    folder = ensure_policy(load_settings().models)
    seen = GROUPS["seen"]
    jobs = [EpisodeJob(generate(seen[i % len(seen)], HELDOUT_START + 900 + i // len(seen)).task()) for i in range(episodes)]
    runner = RayEpisodes(partial(make_model, f"hf:{folder}", max_new_tokens=max_new_tokens), workers)  # models load here
    try:
        started = time.monotonic()
        solved = sum(result.success for _, result in runner.run_all(jobs))
        return time.monotonic() - started, solved
    finally:
        runner.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=6, help="default-model episodes per worker count")
    ap.add_argument("--overhead-episodes", type=int, default=10, help="scripted episodes per path for the overhead")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--ray", default=None, help="an existing cluster's address (default: start two nodes here)")
    args = ap.parse_args()

    import ray

    from skillgraft.agent.cluster import connect

    console = Console()
    cluster = None if args.ray else local_cluster()
    nodes = connect(args.ray or cluster.address)
    console.print(f"Ray cluster: {nodes} nodes, {int(ray.cluster_resources().get('CPU', 0))} CPUs")
    try:
        with tempfile.TemporaryDirectory(prefix="skillgraft-bench-ray-") as tmp:
            local_s, ray_s = overhead(args.overhead_episodes, Path(tmp))
        lm, rm = statistics.median(local_s), statistics.median(ray_s)
        table = Table(title=f"One scripted episode, median of {len(local_s)} (alternating)")
        for col in ("path", "wall per episode", "against local"):
            table.add_column(col)
        table.add_row("in this process", f"{lm * 1000:.0f} ms", "1.00×")
        table.add_row("one Ray worker", f"{rm * 1000:.0f} ms", f"{rm / lm:.2f}× (+{(rm - lm) * 1000:.0f} ms)")
        console.print(table)

        rows = []
        for workers in (1, 2):
            console.print(f"running {args.episodes} default-model episodes on {workers} worker(s)…")
            rows.append((workers, *throughput(args.episodes, workers, args.max_new_tokens)))
        table = Table(title=f"Default model on SkillWorld, {args.episodes} held-out episodes per row")
        for col in ("workers", "wall", "episodes/min", "against 1 worker", "solved"):
            table.add_column(col)
        one_worker = rows[0][1]
        for workers, wall, solved in rows:
            table.add_row(str(workers), f"{wall:.0f} s", f"{args.episodes / wall * 60:.2f}", f"{one_worker / wall:.2f}×",
                          f"{solved}/{args.episodes}")
        console.print(table)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()


if __name__ == "__main__":
    main()
