"""What the agent loop adds per step on top of the sandbox command itself, measured in the same run.

  python -m bench.bench_agent_step [--steps 40] [--rounds 5]

Baseline: sandbox.execute("true") called directly. Measured: the same command as one agent
step (replayed model reply, action parsing, observation formatting, on_step callback and the
atomic trajectory rewrite with redaction that every step does). Same container, rounds
interleaved; the figure is the ratio of median per-step times, and the extra milliseconds.
A third row: the same steps with unstick on, where the loop snapshots the repository's files before
every command (the commands differ, so nothing is redrawn: this is its cost on a step that
does not repeat). A second figure: a whole bundled task (materialize, open, 5 steps, test,
diff, close) end to end.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from skillgraft.agent import prompts
from skillgraft.agent.loop import AgentLoop
from skillgraft.agent.models.base import Sampling
from skillgraft.agent.models.replay_model import ReplayModel
from skillgraft.agent.runner import run_task
from skillgraft.agent.task import Limits, Task, load_task
from skillgraft.agent.trajectory import TrajectoryWriter
from skillgraft.agent.unstick import Unstick
from skillgraft.sandbox.base import SandboxLimits, open_sandbox

ROOT = Path(__file__).resolve().parents[1]


def bare_steps(box, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        box.execute("true")
        times.append(time.perf_counter() - t)
    return times


class SampledReplay(ReplayModel):
    """Replayed replies from a model that says it can sample, so that unstick is engaged."""

    @contextmanager
    def sampled(self, sampling: Sampling) -> Iterator[None]:
        yield


def loop_steps(box, n: int, traj: Path, unstick: Unstick | None = None) -> list[float]:
    replies = [prompts.assistant_reply("Again.", f"true {i}") for i in range(n)]
    model = SampledReplay(replies) if unstick is not None else ReplayModel(replies)
    writer = TrajectoryWriter(traj, {"task": {"id": "bench"}})
    stamps: list[float] = []
    loop = AgentLoop(model, box, Limits(steps=n, wall_time=3600), unstick=unstick,
                     on_step=lambda s: (writer.write(loop.messages), stamps.append(time.perf_counter())))
    start = time.perf_counter()
    loop.run("Run true repeatedly.")
    return [b - a for a, b in zip([start] + stamps[:-1], stamps)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sandbox", default="docker", choices=["docker", "bwrap"])
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        task = Task.from_dict({"id": "bench", "repo": {"files": {"a.txt": "x\n"}}, "instruction": "i", "test": "true"})
        repo = task.materialize(Path(tmp) / "repo")
        bare, looped, unstuck = [], [], []
        with open_sandbox(args.sandbox, repo, SandboxLimits()) as box:
            bare_steps(box, 5)  # warm-up
            for r in range(args.rounds):
                bare += bare_steps(box, args.steps)
                looped += loop_steps(box, args.steps, Path(tmp) / f"traj{r}.json")
                unstuck += loop_steps(box, args.steps, Path(tmp) / f"traj{r}u.json", Unstick())
        mb, ml = statistics.median(bare), statistics.median(looped)
        print(f"per step, {args.sandbox}, {len(bare)} steps each, interleaved rounds:")
        print(f"  bare sandbox.execute median   {mb * 1000:7.2f} ms")
        print(f"  agent loop step median        {ml * 1000:7.2f} ms")
        print(f"  ratio loop/bare               {ml / mb:7.3f}   (extra {1000 * (ml - mb):.2f} ms per step)")
        mu = statistics.median(unstuck)
        print(f"  step with unstick median      {mu * 1000:7.2f} ms")
        print(f"  ratio unstick/loop            {mu / ml:7.3f}   (extra {1000 * (mu - ml):.2f} ms per step: the snapshot)")

        ends = []
        for _ in range(3):
            t = time.perf_counter()
            result = run_task(load_task(ROOT / "examples/tasks/slugify.yaml"),
                              ReplayModel.from_file(ROOT / "examples/tasks/replays/slugify-solve.json"), sandbox=args.sandbox)
            ends.append(time.perf_counter() - t)
            assert result.success, result.test_output
        print(f"whole bundled task (slugify, 5 steps + test), median of 3: {statistics.median(ends):.2f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
