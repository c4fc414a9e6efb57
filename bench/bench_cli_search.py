"""`skillgraft skills search` from a fresh process (cold) and within one (warm), against
`skillgraft skills ls` on the same small store, side by side in the same run.

    python -m bench.bench_cli_search [--skills 16] [--repeats 5]

A cold search is what a person typing the command waits for: the interpreter starts, the CLI and
the store load, the text encoder loads (its ONNX graph is exported once before timing starts),
the query is embedded and ranked. `skills ls` pays the same start-up without the encoder; the
difference is what searching costs on top. Commands alternate so that machine noise falls on both.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table


def timed(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skills", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    console = Console()
    cli = [sys.executable, "-m", "skillgraft"]
    with tempfile.TemporaryDirectory(prefix="skillgraft-bench-search-") as tmp:
        tree = Path(tmp) / "tree"
        for i in range(args.skills):
            folder = tree / f"skill-{i:03d}"
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(f"---\nname: skill-{i:03d}\ndescription: Fix failure kind {i} in a Python "
                                             f"repository\n---\nRun the tests, read failure {i}, edit, run them again.\n")
        env = {**os.environ, "SKILLGRAFT_HOME": str(Path(tmp) / "home")}
        subprocess.run([*cli, "skills", "import", str(tree)], env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([*cli, "skills", "search", "warm up"], env=env, check=True, stdout=subprocess.DEVNULL)
        ls, cold = [], []
        for _ in range(args.repeats):
            ls.append(timed([*cli, "skills", "ls"], env))
            cold.append(timed([*cli, "skills", "search", "fix a python failure"], env))

        os.environ["SKILLGRAFT_HOME"] = env["SKILLGRAFT_HOME"]
        from skillgraft.settings import load_settings
        from skillgraft.skills.store import Store

        settings = load_settings()
        store = Store(settings.store_url, settings.artifacts)
        store.search("first query loads the encoder", k=5)
        warm = []
        for i in range(20):
            started = time.perf_counter()
            store.search(f"fix python failure number {i}", k=5)
            warm.append(time.perf_counter() - started)
        store.close()

    base = statistics.median(ls)
    view = Table(title=f"skills search on a store of {args.skills} skills (median of {args.repeats} fresh processes)")
    for col in ("command", "median s", "min s", "÷ skills ls"):
        view.add_column(col, justify="right")
    view.add_row("skills ls (cold)", f"{base:.2f}", f"{min(ls):.2f}", "1.00")
    view.add_row("skills search (cold)", f"{statistics.median(cold):.2f}", f"{min(cold):.2f}",
                 f"{statistics.median(cold) / base:.2f}")
    view.add_row("search, warm (in process)", f"{statistics.median(warm):.4f}", f"{min(warm):.4f}",
                 f"{statistics.median(warm) / base:.4f}")
    console.print(view)


if __name__ == "__main__":
    main()
