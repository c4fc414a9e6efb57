"""Episodes per minute of the default model on SkillWorld, with 1 worker against 2, and where an
episode's wall time goes: the model, the sandbox, the store.

    python -m bench.bench_episodes [--episodes 12] [--workers 1,2]

The same held-out episodes (seen families, no skill) run once per worker count, each worker with
its own copy of the model and its own Docker sandboxes; every finished run is recorded in a store
(SQLite in a temporary folder) as `skillgraft run` records it. Per episode: the model's time, the
sandbox's (opening it, set-up, the agent's commands, the test, removing it), the store's (copying
the trajectory in and writing its rows), and the rest (prompts, parsing, the trajectory file).
"""
from __future__ import annotations

import argparse
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

PARTS = ("model", "sandbox", "store", "other")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=12, help="episodes per worker count (spread over the seen families)")
    ap.add_argument("--workers", default="1,2", help="worker counts to compare; the first is the baseline")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    args = ap.parse_args()

    from skillgraft.agent.models.factory import make_model
    from skillgraft.agent.runner import run_task
    from skillgraft.settings import load_settings
    from skillgraft.skills.store import Store
    from skillgraft.skillworld.default_model import ensure_policy
    from skillgraft.skillworld.families import GROUPS
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    console = Console()
    folder = ensure_policy(load_settings().models)
    families = GROUPS["seen"]
    worlds = [generate(families[i % len(families)], HELDOUT_START + 900 + i // len(families)) for i in range(args.episodes)]
    local = threading.local()

    def model():
        if not hasattr(local, "model"):
            local.model = make_model(f"hf:{folder}", max_new_tokens=args.max_new_tokens)
        return local.model

    rows = []
    with tempfile.TemporaryDirectory(prefix="skillgraft-bench-episodes-") as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'store.db'}", Path(tmp) / "artifacts")

        def episode(i: int, wt) -> dict[str, float]:
            task = wt.task()
            path = Path(tmp) / "trajectories" / f"{i}-{task.id}.json"
            started = time.monotonic()
            result = run_task(task, model(), trajectory_path=path)
            ran = time.monotonic()
            store.add_trajectory(path, task.id, task.family, result.exit_status, result.reward, result.cost, result.steps,
                                 result.timings, [], [], model="skillworld")
            done = time.monotonic()
            t = result.timings
            closing = (ran - started) - t["total"]  # the container's removal, after the verdict
            sandbox = t["open"] + t["setup"] + t.get("commands", 0.0) + t["test"] + closing
            spent = {"model": t.get("model", 0.0), "sandbox": sandbox, "store": done - ran}
            spent["other"] = max(0.0, (done - started) - sum(spent.values()))
            spent["wall"], spent["success"] = done - started, float(result.success)
            return spent

        for workers in [int(w) for w in args.workers.split(",")]:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                # Every thread loads its model before the clock starts: the barrier keeps each
                # warm-up call on a thread of its own.
                ready = threading.Barrier(workers)
                list(pool.map(lambda _i: (model(), ready.wait()), range(workers)))
                started = time.monotonic()
                spent = list(pool.map(lambda pair: episode(workers * 1000 + pair[0], pair[1]), enumerate(worlds)))
                wall = time.monotonic() - started
            rows.append((workers, wall, spent))
            console.print(f"{workers} worker(s): {len(spent)} episodes in {wall:.0f} s = {60 * len(spent) / wall:.2f} per minute")
        store.close()

    base_rate = 60 * len(rows[0][2]) / rows[0][1]
    view = Table(title=f"Default model, {args.episodes} held-out SkillWorld episodes; share of episode wall time")
    for col in ("workers", "ep/min", f"÷ {rows[0][0]}", "solved", "s/ep", *PARTS):
        view.add_column(col, justify="right")
    for workers, wall, spent in rows:
        total = sum(s["wall"] for s in spent)
        rate = 60 * len(spent) / wall
        view.add_row(str(workers), f"{rate:.2f}", f"{rate / base_rate:.2f}", f"{sum(s['success'] for s in spent):.0f}/{len(spent)}",
                     f"{total / len(spent):.1f}", *(f"{sum(s[p] for s in spent) / total:.1%}" for p in PARTS))
    console.print(view)


if __name__ == "__main__":
    main()
