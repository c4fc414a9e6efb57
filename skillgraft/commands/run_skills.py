"""How `skillgraft run --skills … --skill-mode …` turns store skills into context and adapters.

context puts the skill text in the prompt; parametric compiles each skill version with the
hypernetwork (cached in the store by version and checkpoint), rank-concatenates them with the
global adapter when one exists, and activates the result, with no skill text in the prompt;
both does both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from skillgraft.settings import Settings

MODES = ("context", "parametric", "both")


class SkillSelectionError(ValueError):
    """The skills asked for cannot be given to this model (unknown name, no hypernetwork, hosted model)."""


@dataclass
class PreparedSkills:
    context: list[tuple[str, str]] = field(default_factory=list)
    adapter_dir: Path | None = None
    versions: list[str] = field(default_factory=list)  # "name@vN" for the trajectory
    version_ids: list[int] = field(default_factory=list)
    adapter_ids: list[int] = field(default_factory=list)


def prepare(store, task, model, model_spec: str, selection: list[str], mode: str, settings: Settings,
            hypernet: Path | None = None) -> PreparedSkills:
    """Chooses the skill versions (`auto` retrieves for the task, `none` gives nothing, else names)
    and delivers them in the given mode."""
    if mode not in MODES:
        raise SkillSelectionError(f"--skill-mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not selection or selection == ["none"]:
        return PreparedSkills()
    if store is None:
        raise SkillSelectionError("there is no skill store yet: import skills first with `skillgraft skills import PATH`")
    if selection == ["auto"]:
        versions = [hit.version for hit in store.search(task.instruction, k=1)]
    else:
        versions = []
        for name in selection:
            version = store.latest_version(name)
            if version is None:
                raise SkillSelectionError(f"no skill named {name!r} in the store (see `skillgraft skills ls`)")
            versions.append(version)
    prepared = PreparedSkills(versions=[f"{v.skill_name}@v{v.number}" for v in versions],
                              version_ids=[v.id for v in versions])
    if mode in ("context", "both"):
        prepared.context = [(v.skill_name, v.body) for v in versions]
    if mode in ("parametric", "both"):
        from agent.models.base import AdapterModel

        if not isinstance(model, AdapterModel):
            raise SkillSelectionError(
                f"--skill-mode {mode} needs a local model that takes LoRA adapters (hf:<path>); "
                f"{model.name} is served elsewhere and its weights are out of reach. Use --skill-mode context."
            )
        prepared.adapter_dir, prepared.adapter_ids = _compile(store, model, model_spec, versions, settings, hypernet)
    return prepared


def _compile(store, model, model_spec, versions, settings, hypernet):
    from agent.skill_adapters import compiled_adapter, compose
    from hypernet.compile import Compiler

    from skillgraft.model_defaults import hypernet_for

    from agent.models.base import ModelError

    try:
        checkpoint = hypernet_for(settings, model_spec, hypernet)
    except (FileNotFoundError, ModelError) as exc:  # a missing checkpoint, or a stale shipped one
        raise SkillSelectionError(str(exc)) from exc
    if checkpoint is None:
        raise SkillSelectionError(
            f"parametric skills need a hypernetwork trained for this base model; none at {settings.models / 'hypernet'}. "
            "Train one with `skillgraft hypernet train --stage 1 --base …` or pass --hypernet."
        )
    compiler = Compiler.load(checkpoint, model.path)
    ids = [compiled_adapter(store, compiler, v).id for v in versions]
    current = store.latest_global()
    if current is not None:
        ids.append(current.id)
    cache = settings.cache / "composed"
    cache.mkdir(parents=True, exist_ok=True)
    return compose(store, ids, cache), ids
