"""Docker sandbox speed, against the ways of driving containers it replaces, measured in the same run.

  python -m bench.bench_sandbox [--commands 60] [--starts 10] [--parallel 8]

1. Per-command overhead: DockerSandbox.execute against `docker exec ... bash -lc CMD` run by
   subprocess (how mini-swe-agent drives a container), same container, interleaved; ratio of
   medians (goal <= 0.5).
2. Container start plus repository copy-in: DockerSandbox() against `docker run -d` + `docker cp`
   by subprocess; medians (goal <= 1 s for ours). DockerSandbox() returns once the container runs
   with the repository in it; the command server's start and the git snapshot of the start state
   are pipelined behind it, so the time until they are done is printed too.
3. Eight sandboxes at once: each copies a repository in, runs its tests, takes the diff and
   closes; all must finish and no container may be left. Against the same eight one after another.
4. Where bubblewrap works: BwrapSandbox.execute (its command server, in one long-lived namespace)
   against building the same namespace with a fresh bwrap for each command.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker

from skillgraft.sandbox.base import LABEL, ExecResult, SandboxLimits
from skillgraft.sandbox.bwrap_backend import BwrapSandbox
from skillgraft.sandbox.docker_backend import DockerSandbox
from skillgraft.sandbox.doctor import check_bwrap
from skillgraft.sandbox.image import IMAGE_TAG
from skillgraft.sandbox.lifecycle import OWNER_PID

LIMITS = SandboxLimits(memory="512m", cpus=1.0, pids=128, command_timeout=60)


def make_repo(root: Path, modules: int = 30) -> Path:
    """A small Python project: modules, their tests, one deliberate bug."""
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    for i in range(modules):
        (repo / "pkg" / f"m{i}.py").write_text(f"def f(x):\n    return x + {i}\n" + "# padding\n" * 40)
        (repo / "tests" / f"test_m{i}.py").write_text(f"from pkg.m{i} import f\n\ndef test_f():\n    assert f(1) == {i + 1}\n")
    (repo / "pkg" / "m0.py").write_text("def f(x):\n    return x - 1\n")
    (repo / "README.md").write_text("# bench repo\n" + "text\n" * 500)
    return repo


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def interleaved(ours: Callable[[], None], theirs: Callable[[], None], count: int) -> tuple[list[float], list[float]]:
    """Times two ways of doing the same thing, alternating, so the machine's noise falls on both."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(count):
        for way, samples in zip((ours, theirs), times):
            start = time.perf_counter()
            way()
            samples.append(time.perf_counter() - start)
    return times


def succeeded(result: ExecResult) -> None:
    assert result.returncode == 0, result.output


def bench_commands(repo: Path, count: int) -> None:
    with DockerSandbox(repo, LIMITS) as sandbox:
        cid = sandbox.container.id
        baseline = ["docker", "exec", "-u", "agent", "-w", "/repo", cid, "bash", "-lc"]
        for command in ("true", "ls -la && git status --short"):
            interleaved(lambda: succeeded(sandbox.execute(command)),
                        lambda: subprocess.run([*baseline, command], capture_output=True, check=True), 3)  # warm both
            ours, theirs = interleaved(lambda: succeeded(sandbox.execute(command)),
                                       lambda: subprocess.run([*baseline, command], capture_output=True, check=True), count)
            ratio = statistics.median(ours) / statistics.median(theirs)
            print(f"per-command {command!r:34} ours {median_ms(ours):7.1f} ms   docker exec {median_ms(theirs):7.1f} ms"
                  f"   ratio {ratio:.3f}  (goal <= 0.5, n={count})")


def bench_bwrap_commands(repo: Path, count: int) -> None:
    """The bubblewrap sandbox's command server against building the namespace for every command."""
    with BwrapSandbox(repo, LIMITS) as sandbox:
        fresh = [*sandbox._argv(), "bash", "-c"]  # the same namespace, built anew for one command
        for command in ("true", "ls -la && git status --short"):
            ours, theirs = interleaved(lambda: succeeded(sandbox.execute(command)),
                                       lambda: subprocess.run([*fresh, command], capture_output=True, env=sandbox._env()),
                                       count)
            ratio = statistics.median(ours) / statistics.median(theirs)
            print(f"bwrap per-command {command!r:28} ours {median_ms(ours):7.1f} ms   a bwrap per command "
                  f"{median_ms(theirs):7.1f} ms   ratio {ratio:.3f}  (n={count})")


def bench_starts(repo: Path, count: int) -> None:
    ours, ready, theirs = [], [], []
    for _ in range(count):
        start = time.perf_counter()
        sandbox = DockerSandbox(repo, LIMITS)
        ours.append(time.perf_counter() - start)
        sandbox.wait_ready()
        ready.append(time.perf_counter() - start)
        sandbox.close()
        start = time.perf_counter()
        cid = subprocess.run(
            ["docker", "run", "-d", "--network", "none", "--memory", LIMITS.memory, "--pids-limit", str(LIMITS.pids),
             IMAGE_TAG, "sleep", "infinity"], capture_output=True, text=True, check=True,
        ).stdout.strip()
        subprocess.run(["docker", "cp", f"{repo}/.", f"{cid}:/repo"], capture_output=True, check=True)
        theirs.append(time.perf_counter() - start)
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=True)
    base = statistics.median(theirs)
    print(f"start + copy-in (n={count}): docker run + docker cp {base * 1000:.0f} ms median")
    print(f"  ours, DockerSandbox() returns   {median_ms(ours):6.0f} ms median (goal <= 1000)  ratio {statistics.median(ours) / base:.2f}"
          f"  min {min(ours) * 1000:.0f} / max {max(ours) * 1000:.0f} ms")
    print(f"  ours, + server up and git start snapshot taken  {median_ms(ready):6.0f} ms median  ratio {statistics.median(ready) / base:.2f}")


def one_task(repo: Path) -> tuple[bool, str]:
    with DockerSandbox(repo, LIMITS) as sandbox:
        before = sandbox.execute("python3 -m pytest -q tests | tail -1")
        sandbox.execute("sed -i 's/x - 1/x + 0/' pkg/m0.py")
        after = sandbox.execute("python3 -m pytest -q tests | tail -1")
        patch = sandbox.diff()
    return ("1 failed" in before.output and "passed" in after.output and "failed" not in after.output
            and "+    return x + 0" in patch), sandbox.container.id


def bench_parallel(repo: Path, width: int) -> None:
    client = docker.from_env()
    ours = {"label": [f"{LABEL}=1", f"{OWNER_PID}={os.getpid()}"]}
    start = time.perf_counter()
    with ThreadPoolExecutor(width) as pool:
        results = list(pool.map(lambda _: one_task(repo), range(width)))
    together = time.perf_counter() - start
    start = time.perf_counter()
    serial = [one_task(repo) for _ in range(width)]
    apart = time.perf_counter() - start
    leaked = client.containers.list(all=True, filters=ours)
    still_there = [cid for _, cid in results + serial if client.containers.list(all=True, filters={"id": cid})]
    print(f"{width} sandboxes at once: {sum(ok for ok, _ in results)}/{width} solved and verified, "
          f"{together:.1f} s together vs {apart:.1f} s one after another (ratio {together / apart:.2f}); "
          f"leaked containers: {len(leaked) + len(still_there)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commands", type=int, default=60, help="timed commands per path")
    parser.add_argument("--starts", type=int, default=10, help="timed container starts per path")
    parser.add_argument("--parallel", type=int, default=8, help="sandboxes at once")
    args = parser.parse_args()
    print(f"docker sandbox benchmark, image {IMAGE_TAG}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as scratch:
        repo = make_repo(Path(scratch))
        bench_commands(repo, args.commands)
        bench_starts(repo, args.starts)
        bench_parallel(repo, args.parallel)
        if check_bwrap().ok:
            bench_bwrap_commands(repo, args.commands)


if __name__ == "__main__":
    main()
