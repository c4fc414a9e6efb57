"""How `skillgraft run` picks its skills: store skills by `--skills` (retrieved, named or none),
skill files by `--skill`, an adapter folder by `--adapter`, all delivered in `--skill-mode` by
the one loadout every run uses (agent.loadout)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skillgraft.agent.loadout import GivenSkill, Loadout, LoadoutError, SkillMode, make_loadout
from skillgraft.agent.models.base import AdapterModel, Model, ModelError
from skillgraft.agent.task import Task
from skillgraft.settings import Settings
from skillgraft.skills.schema import SkillVersion
from skillgraft.skills.store import Store

if TYPE_CHECKING:
    from skillgraft.hypernet.tune import Tuning


class SkillSelectionError(ValueError):
    """The skills asked for cannot be given to this model (unknown name, no hypernetwork, hosted model)."""


def choose(store: Store | None, task: Task, selection: Sequence[str]) -> list[SkillVersion]:
    """`auto` retrieves the best skill for the task, `none` (or nothing) gives none, else names."""
    if not selection or list(selection) == ["none"]:
        return []
    if store is None:
        raise SkillSelectionError("there is no skill store yet: import skills first with `skillgraft skills import PATH`")
    if list(selection) == ["auto"]:
        return [hit.version for hit in store.search(task.instruction, k=1)]
    versions = []
    for name in selection:
        version = store.latest_version(name)
        if version is None:
            raise SkillSelectionError(f"no skill named {name!r} in the store (see `skillgraft skills ls`)")
        versions.append(version)
    return versions


def prepare(store: Store | None, task: Task, model: Model, model_spec: str, selection: Sequence[str], mode: str,
            settings: Settings, hypernet: Path | None = None, *, files: Sequence[GivenSkill] = (),
            adapter: Path | None = None, tuning: Tuning | None = None) -> Loadout:
    """The loadout of one run: the chosen store skills, then the skill files, in the given mode;
    compiled modes also join the store's global adapter, and `adapter` is joined as it is;
    `tuning`: a learned skill's adapter as a learner tuning so made it."""
    try:
        mode = SkillMode(mode)
    except ValueError:
        raise SkillSelectionError(f"--skill-mode must be one of {', '.join(m.value for m in SkillMode)}, got {mode!r}") from None
    skills: list[GivenSkill | SkillVersion] = [*choose(store, task, selection), *files]
    compiler = None
    if mode.compiled and skills and isinstance(model, AdapterModel):
        compiler = _compiler(settings, model, model_spec, hypernet, tuning)
    try:
        return make_loadout(store, model, skills, mode, compiler=compiler, use_global=mode.compiled and bool(skills),
                            adapters=[adapter] if adapter is not None else [], cache=settings.cache)
    except LoadoutError as exc:
        raise SkillSelectionError(str(exc)) from exc


def _compiler(settings: Settings, model: AdapterModel, model_spec: str, hypernet: Path | None,
              tuning: Tuning | None = None):
    from skillgraft.evolve.learn.roles import make_compiler
    from skillgraft.model_defaults import hypernet_for

    try:
        checkpoint = hypernet_for(settings, model_spec, hypernet)
    except (FileNotFoundError, ModelError) as exc:  # a missing checkpoint, or a stale shipped one
        raise SkillSelectionError(str(exc)) from exc
    if checkpoint is None:
        raise SkillSelectionError(
            f"parametric skills need a hypernetwork trained for this base model; none at {settings.models / 'hypernet'}. "
            "Train one with `skillgraft hypernet train --stage 1 --base …` or pass --hypernet."
        )
    return make_compiler(checkpoint, model, tuning)
