"""Web UI benchmark: how long each page of `skillgraft ui` takes on a large store.

    .venv/bin/python -m bench.bench_ui                       # 50,000 skills, 10,000 trajectories
    .venv/bin/python -m bench.bench_ui --skills 2000 --trajectories 500   # a quick run

The store is filled through the store's own code: the skills by a bulk import (plus a second
version of some), the trajectories as real trajectory files with skills used, learning sessions
with summaries, global adapter versions and a CycleQD run on the synthetic world. The pages are
then fetched over HTTP from the server `skillgraft ui` runs (uvicorn, on loopback, in a fresh process
per store, once its start-up warm-up is done): the first fetch of each page, then the median and
p95 of repeated fetches. The baseline, measured in the same run, is
the same page on a small store (`--small` skills and trajectories): the ratio shows what size costs.
The goal is every page under 300 ms.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench.bench_store import fill_vectors, generate
from skillgraft.agent import prompts
from skillgraft.skills import Store

console = Console(width=150)
GOAL_MS = 300.0


def _trajectory_file(folder: Path, i: int, rng: random.Random) -> Path:
    messages = [{"role": "system", "content": prompts.system_prompt()},
                {"role": "user", "content": prompts.instance_prompt("The test suite fails. Fix the code.")}]
    for step in range(rng.randint(2, 8)):
        messages.append({"role": "assistant", "content": prompts.assistant_reply(f"Step {step}.", f"grep -rn thing_{i} .")})
        messages.append({"role": "user", "content": prompts.observation(f"src/m.py:{step}: thing_{i}\n" * 20, 0)})
    path = folder / f"run-{i}.json"
    info = {"task": {"id": f"task-{i % 997}"}, "exit_status": "Submitted", "patch": "--- a/x\n+++ b/x\n-1\n+2\n",
            "test": {"command": "pytest -q", "returncode": 0, "output": "1 passed", "passed": True}}
    path.write_text(json.dumps({"format": "skillgraft-trajectory-1", "info": info, "messages": messages}))
    return path


def fill(root: Path, skills: int, trajectories: int, embed_all: bool) -> Store:
    """A store of the given size, every part written by the store's own methods."""
    from skillgraft.evolve.cycleqd import CycleQDConfig, merge_and_promote, run_cycleqd, synthetic_world
    from skillgraft.hypernet.peft_io import save_adapter

    rng = random.Random(0)
    tree = root / "tree"
    generate(tree, skills)
    store = Store(f"sqlite:///{root / 'store.db'}", root / "artifacts")
    t0 = time.perf_counter()
    store.import_tree(tree, batch=500)
    names = store.skill_names()[1]
    for name in rng.sample(names, min(200, len(names))):  # some skills have a history
        v = store.latest_version(name)
        store.add_version(name, v.body + "\nRerun the check before submitting.\n", parent_id=v.id)
    fill_vectors(store, embed_all, rate=60.0)
    console.print(f"{skills:,} skills in {time.perf_counter() - t0:.0f} s")

    world = synthetic_world(["alpha", "beta", "gamma"], seed=0)
    folders = {t: save_adapter(d, root / "experts" / t, base_model_name="tiny", fingerprint="sha256:synthetic",
                               target_modules=["q_proj"]) for t, d in world.experts.items()}
    parent = None
    for step in range(12):
        parent = store.commit_global(folders[list(folders)[step % 3]], parent, {"method": "ema", "alpha": 0.3},
                                     base_fingerprint="sha256:synthetic").id
    sessions = [store.start_session("learn", {"learning": k % 2 == 0, "model": "bench"}) for k in range(20)]
    versions = [v.id for v in store.latest_versions(rng.sample(names, min(2000, len(names))))]
    files = root / "runs"
    files.mkdir()
    t0 = time.perf_counter()
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("trajectories", total=trajectories)
        for i in range(trajectories):
            session = sessions[i % len(sessions)]
            store.add_trajectory(_trajectory_file(files, i, rng), f"task-{i % 997}", "bench", "Submitted",
                                 float(rng.random() < 0.6), 0.0, 4, {"total": 3.2}, rng.sample(versions, 2), [parent],
                                 session_id=session.id, model="hf:bench")
            bar.advance(task)
    for k, s in enumerate(sessions):
        store.end_session(s.id, {"episodes": 50, "successes": 20 + k, "rate": (20 + k) / 50, "learned": []})
    console.print(f"{trajectories:,} trajectories in {time.perf_counter() - t0:.0f} s")

    ids = [store.add_adapter(folders[t], "checkpoint", "sha256:synthetic", 4, 4.0, ["q_proj"], {"expert": t},
                             name=f"expert-{t}").id for t in folders]
    config = CycleQDConfig(generations=8, children_per_generation=4)
    result = run_cycleqd(store, ids, ["alpha", "beta", "gamma"], world.evaluator, config)
    merge_and_promote(store, result, world.evaluator, world.evaluator, global_name="synthetic-global")
    return store


def pages_of(store: Store) -> dict[str, str]:
    name = next(v.skill_name for v in store.latest_versions() if v.number > 1)
    total = store.skill_names(0, 1)[0]
    return {
        "skills": "/skills", "skills, last page": f"/skills?page={max(1, total // 50)}",
        "skills, search": "/skills?q=timeout+when+parsing+dates", "one skill": f"/skills/{name}",
        "adapters": "/adapters", "one adapter": f"/adapters/{store.latest_global().id}",
        "trajectories": "/trajectories",
        "trajectories, last page": f"/trajectories?page={max(1, store.count_trajectories() // 50)}",
        "one trajectory": f"/trajectories/{store.trajectories(limit=1)[0].id}",
        "sessions": "/sessions", "cycleqd": "/cycleqd", "one cycleqd run": f"/cycleqd/{store.qd_runs()[-1].id}",
    }


def time_pages(root: Path, repeats: int) -> dict[str, tuple[float, float, float]]:
    """Per page: (first ms, median ms, p95 ms) over HTTP against the app served from a fresh
    process, timed once its start-up warm-up (encoder, vectors, matplotlib) has finished."""
    from skillgraft.ui import build_app
    from skillgraft.ui.serve import serving

    store = Store(f"sqlite:///{root / 'store.db'}", root / "artifacts")
    out = {}
    app = build_app(store)
    with serving(app) as address:
        app.state.warmed.wait(600)
        for label, path in pages_of(store).items():
            samples = []
            for _ in range(repeats + 1):
                t0 = time.perf_counter()
                with urllib.request.urlopen(address + path) as response:
                    response.read()
                    assert response.status == 200, (path, response.status)
                samples.append((time.perf_counter() - t0) * 1000)
            warm = samples[1:]
            out[label] = (samples[0], statistics.median(warm), float(np.percentile(warm, 95)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skills", type=int, default=50_000)
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=100, help="skills and trajectories of the baseline store")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--embed-all", action="store_true", help="embed every skill for real (minutes) instead of random vectors")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        small = fill(Path(tmp) / "small", args.small, args.small, embed_all=True)
        large = fill(Path(tmp) / "large", args.skills, args.trajectories, args.embed_all)
        small.close(), large.close()
        # Each store is served from its own process, so neither finds the other's caches warm.
        with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
            base = pool.apply(time_pages, (Path(tmp) / "small", args.repeats))
            big = pool.apply(time_pages, (Path(tmp) / "large", args.repeats))
    table = Table(title=f"page times over HTTP: {args.skills:,} skills and {args.trajectories:,} trajectories "
                        f"against {args.small} of each (median of {args.repeats} warm fetches)")
    for column in ("page", "first ms", "median ms", "p95 ms", "small store median ms", "ratio", "under 300 ms"):
        table.add_column(column, justify="left" if column == "page" else "right")
    for label, (cold, median, p95) in big.items():
        small_median = base[label][1]
        table.add_row(label, f"{cold:.0f}", f"{median:.1f}", f"{p95:.1f}", f"{small_median:.1f}",
                      f"{median / small_median:.2f}×", "yes" if p95 <= GOAL_MS else "NO")
    console.print(table)
    slowest = max(big.items(), key=lambda kv: kv[1][2])
    first = max(big.items(), key=lambda kv: kv[1][0])
    console.print(f"slowest page: {slowest[0]} at p95 {slowest[1][2]:.0f} ms; slowest first fetch: {first[0]} at "
                  f"{first[1][0]:.0f} ms (goal {GOAL_MS:.0f} ms)")


if __name__ == "__main__":
    main()
