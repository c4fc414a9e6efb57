"""`skillgraft run TASK.yaml`: the agent on one task, watched live, judged by the task's test."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from skillgraft.agent.skill_mode import SkillMode
from skillgraft.commands.common import (HomeOption, JsonOption, SandboxOption, StoreOption, TuneFromOption, TuneStart,
                                       UnstickOption, console, job_exits, settings_from, tuning_of)
from skillgraft.sandbox.base import SandboxKind
from skillgraft.settings import DEFAULT_MODEL

EXIT_SOLVED, EXIT_NOT_SOLVED, EXIT_SETUP_FAILED = 0, 1, 4


def register(app: typer.Typer) -> None:
    """Adds the `run` command to the root app."""
    app.command("run", epilog=_EPILOG)(run)


_EPILOG = (
    "Exit codes: 0 solved (the task's test passed), 1 not solved, 2 bad input (task file, model, "
    "skill or adapter), 3 sandbox unavailable, 4 the task's set-up failed (the agent never acted)."
)


def run(
    task_file: Path = typer.Argument(..., help="Task YAML file (id, repo, instruction, test, ...)."),
    model: Optional[str] = typer.Option(
        None, "--model", "-m",
        help=f"hf:<folder>, replay:<file.json>, a model folder name under HOME/models, or a litellm model string (default {DEFAULT_MODEL}).",
    ),
    sandbox: SandboxKind = SandboxOption,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Trajectory JSON file (default HOME/trajectories/<time>-<task>.json)."),
    skill: list[Path] = typer.Option([], "--skill", help="A skill given like store skills (see --skill-mode): a text file, a SKILL.md, or a skill folder. Repeatable."),
    skills_sel: list[str] = typer.Option(
        [], "--skills",
        help="Skills from the store: 'auto' retrieves the best match for the task, 'none' uses none, else skill names. Repeatable.",
    ),
    skill_mode: SkillMode = typer.Option(
        SkillMode.context, "--skill-mode",
        help="context: skill text in the prompt; parametric: skills compiled into a LoRA adapter (hf: models), text not in the prompt; both: the text in the prompt and the compiled skills at half the weight parametric mode gives them.",
    ),
    hypernet_ckpt: Optional[Path] = typer.Option(None, "--hypernet", help="Hypernetwork checkpoint for --skill-mode parametric|both (default: the model's own)."),
    tune_steps: int = typer.Option(0, "--tune-steps", min=0, help="parametric|both: each learned skill's adapter tuned on the run it was summarised from, as `skillgraft learn --tune-steps N` made it (tuned now where the store lacks it). 0: as the hypernetwork compiles it."),
    tune_from: TuneStart = TuneFromOption,
    adapter: Optional[Path] = typer.Option(None, "--adapter", help="PEFT LoRA adapter folder to activate (hf: models only), joined with any compiled skills."),
    image: Optional[str] = typer.Option(None, "--image", help="Sandbox image tag (Docker only)."),
    unstick: bool = UnstickOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
    json_out: bool = JsonOption,
) -> None:
    """Run the agent on a repository task inside a sandbox and show each step as it happens.

    The repository is copied into a fresh sandbox, the task's setup commands run, the agent
    works until it submits or hits a limit, then the task's test command decides: exit 0 is
    solved. The whole conversation is written to a trajectory file after every step.
    """
    from skillgraft.agent.runner import SETUP_FAILED
    from skillgraft.jobs.run_one import RunOptions, execute_run, prepare_run

    settings = settings_from(home, store)
    options = RunOptions(task_file, model or DEFAULT_MODEL, sandbox, output, skill, skills_sel, skill_mode,
                         hypernet_ckpt, adapter, image, progress=not json_out, unstick=unstick, tuning=tuning_of(tune_steps, tune_from))
    with job_exits():
        prepared = prepare_run(settings, options)
        view = _LiveSteps(prepared.task.id, prepared.model.name, sandbox.value)
        # The live view redraws itself (the clock keeps moving while a command runs); JSON output stays clean.
        live = _Quiet() if json_out else Live(get_renderable=view.render, console=console, refresh_per_second=4)
        with live:
            def on_step(step) -> None:
                view.add(step)
                live.refresh()

            result = execute_run(prepared, on_step)
    if not json_out:
        console.line()  # the live view leaves the cursor at the end of its last row
    if json_out:
        console.print_json(json.dumps(_summary(result)))
    else:
        console.print(_verdict(result))
    if result.exit_status == SETUP_FAILED:
        raise typer.Exit(EXIT_SETUP_FAILED)
    raise typer.Exit(EXIT_SOLVED if result.success else EXIT_NOT_SOLVED)


class _Quiet:
    """Stands in for rich's Live when the output is JSON for a script."""

    def __enter__(self) -> "_Quiet":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def refresh(self) -> None:
        return None


class _LiveSteps:
    """The steps so far, drawn as a table under a header line."""

    def __init__(self, task_id: str, model: str, sandbox: str):
        self.task_id, self.model, self.sandbox = task_id, model, sandbox
        self.steps: list = []
        self.started = time.monotonic()

    def add(self, step) -> None:
        self.steps.append(step)

    def render(self):
        last = self.steps[-1] if self.steps else None
        cost = f"${last.cost:.4f}" if last else "$0"
        head = Text.assemble(
            ("task ", "dim"), (self.task_id, "bold"), ("  model ", "dim"), self.model,
            ("  sandbox ", "dim"), self.sandbox, ("  steps ", "dim"), str(len(self.steps)),
            ("  cost ", "dim"), cost, ("  ", ""), (f"{time.monotonic() - self.started:.0f}s", "dim"),
        )
        table = Table(expand=True, show_edge=False, pad_edge=False)
        table.add_column("#", justify="right", width=3)
        table.add_column("command", ratio=3, overflow="ellipsis", no_wrap=True)
        table.add_column("rc", justify="right", width=4)
        table.add_column("output", ratio=2, overflow="ellipsis", no_wrap=True)
        for step in self.steps[-15:]:
            if step.format_error:
                table.add_row(str(step.number), Text("(no command: format error)", "yellow"), "", "")
                continue
            command = (step.command or "").splitlines()[0] if step.command else ""
            if step.back_to is not None:  # the model had proposed a repeat; the run went back
                command = Text.assemble((command, ""), (f"  (back to step {step.back_to})", "yellow"))
            elif step.malformed is not None:  # the model's reply held no command; it was drawn again
                command = Text.assemble((command, ""), ("  (drawn again)", "yellow"))
            if step.result is None:
                table.add_row(str(step.number), Text(command, "bold green"), "", Text("submitted", "green"))
                continue
            rc = step.result.returncode
            tail = [line for line in step.result.output.splitlines() if line.strip()][-1:] or [""]
            table.add_row(str(step.number), command, Text(str(rc), "green" if rc == 0 else "red"), tail[0])
        return Group(head, table)


def _summary(result) -> dict:
    return {
        "task_id": result.task_id,
        "success": result.success,
        "reward": result.reward,
        "exit_status": result.exit_status,
        "exit_detail": result.exit_detail,
        "steps": result.steps,
        "cost": result.cost,
        "elapsed": round(result.elapsed, 3),
        "test_returncode": result.test_returncode,
        "trajectory": str(result.trajectory_path) if result.trajectory_path else None,
        "patch": result.patch,
    }


def _verdict(result) -> Panel:
    from skillgraft.agent.runner import SETUP_FAILED

    if result.exit_status == SETUP_FAILED:
        verdict = Text("ERROR: SET-UP FAILED", "bold yellow")
    else:
        verdict = Text("SOLVED", "bold green") if result.success else Text("NOT SOLVED", "bold red")
    lines = Text.assemble(
        verdict, ("  exit ", "dim"), result.exit_status, ("  steps ", "dim"), str(result.steps),
        ("  cost ", "dim"), f"${result.cost:.4f}", ("  time ", "dim"), f"{result.elapsed:.1f}s",
    )
    test_tail = "\n".join(result.test_output.strip().splitlines()[-6:])
    body = [lines]
    if result.exit_detail:
        body.append(Text(result.exit_detail.strip()[:500], "yellow"))
    body.append(Text(f"test: {test_tail}", "dim"))
    body.append(Text(f"patch: {len(result.patch.splitlines())} lines   trajectory: {result.trajectory_path}", "dim"))
    return Panel(Group(*body), title=result.task_id, expand=False)
