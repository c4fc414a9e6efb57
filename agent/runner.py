"""One task, start to verdict: materialize the repo, open a sandbox, set up, run the loop, test.

The verdict is the task's own test command run in the sandbox after the agent stops, whatever
made it stop: exit 0 is success and reward 1.0, anything else 0.0. The files that define the
verdict (the task's test_files) are first put back as they were, so editing a test solves
nothing. A run whose set-up failed never reached the agent: it is an error, never solved, and
its test command is not run.
"""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillgraft.agent.loadout import NOTHING, Loadout
from skillgraft.agent.loop import SANDBOX_ERROR, AgentLoop, Step
from skillgraft.agent.models.base import AdapterModel, Model, ModelError, Sampling, SamplingModel
from skillgraft.agent.task import Task, links_leaving
from skillgraft.agent.trajectory import TrajectoryWriter
from skillgraft.agent.unstick import Unstick
from skillgraft.sandbox.base import Sandbox, SandboxError, SandboxLimits, open_sandbox

SETUP_FAILED = "SetupFailed"

# Keys the runner writes into a trajectory's info block; callers' `info` may not shadow them.
RESERVED_INFO = frozenset(
    {"task", "model", "sandbox", "adapters", "skills", "limits", "started_at", "timings", "cost", "steps",
     "exit_status", "exit_detail", "patch", "test", "reward", "success", "usage", "links_outside_repo",
     "test_files_restored", "sampling", "unstick", "redraws", "rewinds", "malformed", "changed"}
)


class AdapterUnsupported(ModelError):
    """An adapter was given for a model that cannot take one (a hosted model, a replay)."""


@dataclass
class RunResult:
    task_id: str
    success: bool
    reward: float
    exit_status: str
    patch: str
    test_output: str
    steps: int
    cost: float
    elapsed: float
    trajectory_path: Path | None
    messages: list[dict] = field(default_factory=list)
    test_returncode: int | None = None
    exit_detail: str = ""
    # seconds: open (sandbox up), setup, agent (the loop), model and commands (within the loop), test, total
    timings: dict[str, float] = field(default_factory=dict)
    history: list[Step] = field(default_factory=list)  # the loop's steps: reply, command, its result
    kept: list[Step] = field(default_factory=list)  # the steps of the branch the run ended on (agent.unstick)
    skills: list[str] = field(default_factory=list)  # names of the skills the prompt showed


def run_task(
    task: Task,
    model: Model,
    *,
    sandbox: str = "docker",
    loadout: Loadout = NOTHING,
    trajectory_path: Path | None = None,
    info: Mapping[str, Any] | None = None,
    image: str | None = None,
    on_step: Callable[[Step], None] | None = None,
    sampling: Sampling | None = None,
    unstick: Unstick | None = None,
) -> RunResult:
    """Runs the agent on a task and judges it with the task's test command.

    The loadout (agent.loadout.make_loadout) says which skills the prompt shows and which adapter
    the model activates for the run. Raises SandboxUnavailable when the backend is missing, and
    AdapterUnsupported when the loadout holds an adapter for a model that cannot take one, and
    ModelError when `sampling` is given for a model that cannot sample (a replay); `unstick`
    sends the run back when the model proposes a command again on the same files (agent.unstick);
    everything that happens inside the run (limits, model failures, a failing setup) ends up in
    the result's exit_status instead.
    """
    clash = RESERVED_INFO.intersection(info or {})
    if clash:
        raise ValueError(f"info keys {sorted(clash)} are written by the runner itself")
    adapter_dir, skills = loadout.adapter_dir, loadout.context
    adapted = model if (adapter_dir is not None and isinstance(model, AdapterModel)) else None
    if adapter_dir is not None and adapted is None:
        raise AdapterUnsupported(f"model {model.name} cannot take LoRA adapters; use an hf:<path> model for {adapter_dir}")
    if not isinstance(model, SamplingModel):
        unstick = None  # a model that cannot sample has nothing to redraw with
    drawing: AbstractContextManager[None] = nullcontext()
    if sampling is not None:
        if not isinstance(model, SamplingModel):
            raise ModelError(f"model {model.name} cannot sample; a sampled run needs a local or hosted model")
        drawing = model.sampled(sampling)
    writer = TrajectoryWriter(trajectory_path, {**(info or {}), **_start_info(task, model, sandbox, skills, adapter_dir),
                                                **({"sampling": asdict(sampling)} if sampling is not None else {}),
                                                **({"unstick": asdict(unstick)} if unstick is not None else {})})
    started = time.monotonic()
    timings: dict[str, float] = {}
    if adapted is not None and adapter_dir is not None:
        adapted.load_adapter(Path(adapter_dir))
    try:
        with tempfile.TemporaryDirectory(prefix=f"skillgraft-{task.id}-") as tmp:
            repo = task.materialize(Path(tmp) / "repo")
            outward = links_leaving(repo)
            if outward:
                writer.update(links_outside_repo=outward)  # copied as links, not followed
            limits = SandboxLimits(command_timeout=task.limits.command_timeout, network=task.network, disk=task.limits.disk)
            with open_sandbox(sandbox, repo, limits, image=image) as box:
                timings["open"] = time.monotonic() - started
                with drawing:
                    return _run_in(box, task, model, skills, writer, timings, started, on_step, unstick)
    finally:
        if adapted is not None:
            adapted.unload_adapter()


def _run_in(
    box: Sandbox,
    task: Task,
    model: Model,
    skills: Sequence[tuple[str, str]],
    writer: TrajectoryWriter,
    timings: dict[str, float],
    started: float,
    on_step: Callable[[Step], None] | None,
    unstick: Unstick | None,
) -> RunResult:
    mark = time.monotonic()
    setup_failure = _setup(box, task)
    timings["setup"] = time.monotonic() - mark
    loop = AgentLoop(model, box, task.limits, on_step=_saving(writer, lambda: loop, on_step), unstick=unstick)
    if setup_failure is None:
        mark = time.monotonic()
        outcome = loop.run(task.instruction, skills)
        timings["agent"] = time.monotonic() - mark
        timings["model"], timings["commands"] = loop.model_s, loop.commands_s
        status, detail, messages = outcome.exit_status, outcome.detail, outcome.messages
    else:
        status, detail, messages = SETUP_FAILED, setup_failure, []
    try:
        patch = box.diff()
    except SandboxError as exc:
        patch, status, detail = "", SANDBOX_ERROR, str(exc)
    mark = time.monotonic()
    if setup_failure is not None:
        returncode, test_output = None, "not run: the task's set-up failed before the agent could act"
    else:
        returncode, test_output = _test(box, task, writer)
    timings["test"] = time.monotonic() - mark
    success = returncode == 0
    timings["total"] = time.monotonic() - started
    result = RunResult(
        task_id=task.id,
        success=success,
        reward=1.0 if success else 0.0,
        exit_status=status,
        exit_detail=detail,
        patch=patch,
        test_output=test_output,
        test_returncode=returncode,
        steps=loop.steps,
        cost=loop.cost,
        elapsed=timings["total"],
        trajectory_path=writer.path,
        messages=messages,
        timings={k: round(v, 3) for k, v in timings.items()},
        history=list(loop.history),
        kept=loop.kept(),
        skills=[name for name, _ in skills],
    )
    writer.update(
        exit_status=status,
        exit_detail=detail,
        steps=loop.steps,
        cost=loop.cost,
        usage=dict(loop.usage),
        timings=result.timings,
        patch=patch,
        test={"command": task.test, "returncode": returncode, "output": test_output, "passed": success},
        reward=result.reward,
        success=success,
        # per command of the branch kept, whether it changed the files (None where not known)
        **({"redraws": loop.redraws, "rewinds": loop.rewinds,
            "malformed": [s.number for s in result.history if s.malformed is not None],  # replies drawn again
            "changed": [s.changed for s in result.kept if s.command is not None]} if unstick is not None else {}),
    )
    writer.write(messages)
    return result


def _setup(box: Sandbox, task: Task) -> str | None:
    """Runs the setup commands; the failing command and its output, or None when all passed."""
    for command in task.setup:
        res = box.execute(command, timeout=task.limits.command_timeout)
        if res.returncode != 0:
            return f"setup command {command!r} exited {res.returncode}:\n{res.output}"
    return None


def _test(box: Sandbox, task: Task, writer: TrajectoryWriter) -> tuple[int | None, str]:
    try:
        if task.test_files:
            touched = box.restore(task.test_files)
            if touched:
                writer.update(test_files_restored=touched)  # the agent changed them; the verdict uses the originals
        res = box.execute(task.test, timeout=task.limits.command_timeout)
    except SandboxError as exc:
        return None, f"test command could not run: {exc}"
    note = "\n[test command timed out]" if res.timed_out else ""
    return res.returncode, res.output + note


def _saving(writer: TrajectoryWriter, current: Callable[[], AgentLoop], on_step):
    """The step callback that rewrites the trajectory before handing the step on."""

    def after(step: Step) -> None:
        loop = current()
        writer.update(steps=step.number, cost=step.cost, usage=dict(loop.usage))
        writer.write(loop.messages)
        if on_step is not None:
            on_step(step)

    return after


def _start_info(task: Task, model: Model, sandbox: str, skills, adapter_dir) -> dict:
    return {
        "task": {"id": task.id, "family": task.family, "tags": list(task.tags), "source": task.source,
                 "instruction": task.instruction},
        "model": model.name,
        "sandbox": sandbox,
        "adapters": [str(adapter_dir)] if adapter_dir is not None else [],
        "skills": [name for name, _ in skills],
        "limits": asdict(task.limits),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
