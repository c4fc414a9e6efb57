"""One task, start to verdict: `skillgraft run`.

    prepared = prepare_run(settings, RunOptions(task_file=Path("task.yaml")))
    result = execute_run(settings, prepared, on_step=print)

Preparing loads the task, the model (assembling the default one on first use) and the skills;
executing runs the agent in a sandbox and records the run in the store when there is one.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from skillgraft.agent.loadout import GivenSkill, Loadout, SkillMode
from skillgraft.agent.loop import Step
from skillgraft.agent.models.base import Model, ModelError
from skillgraft.agent.runner import AdapterUnsupported, RunResult, run_task
from skillgraft.agent.task import Task, TaskError, load_task
from skillgraft.agent.unstick import Unstick
from skillgraft.jobs.errors import BAD_INPUT, NO_SANDBOX, JobError
from skillgraft.jobs.recording import existing_store, record_in_store
from skillgraft.jobs.run_skills import SkillSelectionError, prepare
from skillgraft.model_defaults import load_model
from skillgraft.sandbox.base import SandboxError, SandboxKind, SandboxUnavailable
from skillgraft.settings import DEFAULT_MODEL, Settings
from skillgraft.skills.store import Store

if TYPE_CHECKING:
    from skillgraft.hypernet.tune import Tuning


@dataclass(frozen=True)
class RunOptions:
    task_file: Path
    model: str = DEFAULT_MODEL
    sandbox: SandboxKind = SandboxKind.docker
    output: Path | None = None  # the trajectory file (default HOME/trajectories/<time>-<task>.json)
    skill_files: Sequence[Path] = ()
    skills: Sequence[str] = ()  # store skills: "auto", "none" or names
    skill_mode: SkillMode = SkillMode.context
    hypernet: Path | None = None
    adapter: Path | None = None
    image: str | None = None
    progress: bool = True  # show progress while the default model is assembled
    unstick: bool = True  # go back and redraw when a command is proposed again on the same files (agent.unstick)
    tuning: Tuning | None = None  # compiled modes: a learned skill's adapter tuned on its run, as `learn --tune-steps` makes it


@dataclass
class PreparedRun:
    task: Task
    model: Model
    loadout: Loadout
    trajectory: Path
    options: RunOptions = field(repr=False)
    store: Store | None = field(default=None, repr=False)  # the run is recorded there, when there is one


def prepare_run(settings: Settings, options: RunOptions) -> PreparedRun:
    try:
        task = load_task(options.task_file)
    except TaskError as exc:
        raise JobError(str(exc), BAD_INPUT) from exc
    files = [read_skill(p) for p in options.skill_files]
    if options.adapter is not None and not (options.adapter / "adapter_config.json").is_file():
        raise JobError(f"{options.adapter}: not a PEFT adapter folder (no adapter_config.json)", BAD_INPUT)
    try:
        model = load_model(settings, options.model, progress=options.progress)
    except ModelError as exc:
        raise JobError(str(exc), BAD_INPUT) from exc
    store = existing_store(settings)
    try:
        loadout = prepare(store, task, model, options.model, options.skills, options.skill_mode, settings,
                          options.hypernet, files=files, adapter=options.adapter, tuning=options.tuning)
    except SkillSelectionError as exc:
        raise JobError(str(exc), BAD_INPUT) from exc
    trajectory = options.output or settings.trajectories / f"{datetime.now():%Y%m%d-%H%M%S}-{task.id}.json"
    return PreparedRun(task, model, loadout, trajectory, options, store)


def execute_run(prepared: PreparedRun, on_step: Callable[[Step], None] | None = None) -> RunResult:
    options, loadout = prepared.options, prepared.loadout
    try:
        result = run_task(
            prepared.task, prepared.model, sandbox=options.sandbox.value, loadout=loadout,
            trajectory_path=prepared.trajectory, image=options.image, on_step=on_step,
            unstick=Unstick() if options.unstick else None,
            info={"skill_versions": loadout.refs, "skill_mode": options.skill_mode.value if loadout.skills else None},
        )
    except (AdapterUnsupported, ModelError) as exc:  # an adapter that does not fit the model
        raise JobError(str(exc), BAD_INPUT) from exc
    except TaskError as exc:  # the repository could not be produced (missing folder, bad git rev)
        raise JobError(str(exc), BAD_INPUT) from exc
    except SandboxUnavailable as exc:
        raise JobError(str(exc), NO_SANDBOX) from exc
    except SandboxError as exc:
        raise JobError(f"sandbox failed: {exc}", NO_SANDBOX) from exc
    record_in_store(prepared.store, result, prepared.task, prepared.model.name, loadout.version_ids, loadout.adapter_ids)
    return result


def read_skill(path: Path) -> GivenSkill:
    """A skill given on the command line: a SKILL.md (or its folder), or a bare text file."""
    from skillgraft.skills.errors import SkillFormatError
    from skillgraft.skills.skillmd import SKILL_FILE, parse

    if path.is_dir():
        path = path / SKILL_FILE
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise JobError(f"skill {path}: cannot read ({exc})", BAD_INPUT) from exc
    if not text.startswith("---"):
        return GivenSkill.of_body(path.stem, text)
    try:
        doc = parse(text, str(path), folder_name=path.parent.name if path.name == SKILL_FILE else None)
    except SkillFormatError as exc:
        raise JobError(f"skill {path}: {exc}", BAD_INPUT) from exc
    return GivenSkill(doc.name, text, doc.body)
