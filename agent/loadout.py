"""What a run gets of its skills, as one value made in one place.

    loadout = make_loadout(store, model, versions, "parametric", compiler=compiler, use_global=True, cache=folder)
    run_task(task, model, loadout=loadout)

A Loadout names the mode, the skills (their texts, and their store versions where they have
one), the adapters joined into the one the model activates, that composed folder and its
cache key. Adapters are joined in one order: the global adapter, then any given adapter
folders, then each skill's compiled adapter in the order the skills were given, each at the
weight `join_weights` gives it. `skillgraft
run`, the learner, refinement, the SkillWorld evaluation and CycleQD all build their runs'
skills here, so the same inputs give the same adapter under the same key.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skillgraft.agent.models.base import AdapterModel, Model
from skillgraft.agent.skill_mode import SkillMode
from skillgraft.skills.adapters import GLOBAL
from skillgraft.skills.schema import Adapter, SkillVersion, saved_id
from skillgraft.skills.skillmd import parse

if TYPE_CHECKING:
    from skillgraft.agent.seams import AdapterStore, SkillCompiler


SKILL_MODES = tuple(m.value for m in SkillMode)
# The global adapter's weight, alone and beside compiled skills, which take the rest of one
# adapter's weight. Compiled skills share a part (the hypernetwork's "a skill is given", which
# has the policy write "make the skill's edit"), so an average of them still moves the policy as
# far as one skill does, and joining two counts that part twice. On the default model, with the
# policy writing its own edit turn (bench_skill_forms), the global adapter of nine seen
# families' induced recipes alone made 22/27 of their edits at full weight and 26/27 at half, as
# many as no adapter; joined with a family's compiled recipe at 0.5 + 1.0 it made 18/27, at
# 0.25 + 0.75 26/27; on the skill-only families (20 edits, the global adapter of their recipes)
# 5/20 and 14/20, where the compiled recipe alone made 14/20.
GLOBAL_ALONE = 0.5
GLOBAL_BESIDE_SKILLS = 0.25
# The compiled skills' share where the prompt shows their text too (skill mode both). A compiled
# skill is trained to stand in for its text, so beside it the skill is given twice: at full weight
# the default model solved 99/108 seen and 99/100 skill-only SkillWorld tasks where the text alone
# solved 104/108 and 100/100; at half weight, 104/108 and 100/100 (bench_world --rows both).
COMPILED_BESIDE_TEXT = 0.5


class LoadoutError(ValueError):
    """The skills asked for cannot reach this model in this mode (no compiler, no adapter support)."""


@dataclass(frozen=True)
class GivenSkill:
    """One skill a run gets: the text the hypernetwork compiles, the body the prompt shows."""

    name: str
    text: str
    body: str
    version: SkillVersion | None = None  # where the skill is a version in the store
    run: Path | None = None  # the trajectory a text outside the store was summarised from

    @classmethod
    def of_version(cls, version: SkillVersion) -> "GivenSkill":
        return cls(version.skill_name, version.text, version.body, version)

    @classmethod
    def of_text(cls, name: str, text: str, run: Path | None = None) -> "GivenSkill":
        """A SKILL.md text that is not (yet) in the store, such as a candidate revision; `run`:
        the trajectory it was summarised from (a compiler that tunes tunes on it)."""
        return cls(name, text, parse(text, folder_name=name).body, run=run)

    @classmethod
    def of_body(cls, name: str, body: str) -> "GivenSkill":
        """A bare recipe with no front matter: compiled and shown as it is."""
        return cls(name, body, body)

    @property
    def ref(self) -> str:
        return f"{self.name}@v{self.version.number}" if self.version is not None else self.name


@dataclass(frozen=True)
class AdapterPart:
    """One adapter a run joins: its cache identity and the PEFT folder that holds it."""

    key: str  # "adapter:<id>" for a store adapter, "text:<checkpoint>:<digest>", or "folder:<path>"
    path: Path
    adapter_id: int | None = None

    @classmethod
    def stored(cls, store: AdapterStore, adapter: Adapter) -> "AdapterPart":
        adapter_id = saved_id(adapter.id)
        return cls(f"adapter:{adapter_id}", store.adapter_path(adapter_id), adapter_id)

    @classmethod
    def folder(cls, path: Path) -> "AdapterPart":
        path = Path(path)
        return cls(f"folder:{path.resolve()}", path)


@dataclass(frozen=True)
class Loadout:
    mode: SkillMode = SkillMode.context
    skills: tuple[GivenSkill, ...] = ()
    parts: tuple[AdapterPart, ...] = ()  # in the order they are joined
    adapter_dir: Path | None = None  # the one adapter folder the model activates
    key: str | None = None  # the composed adapter's cache key
    global_adapter: Adapter | None = None
    weights: tuple[float, ...] = ()  # each part's weight in the join

    @property
    def context(self) -> list[tuple[str, str]]:
        """(name, body) of each skill the prompt shows."""
        return [(s.name, s.body) for s in self.skills] if self.mode.in_context else []

    @property
    def refs(self) -> list[str]:
        return [s.ref for s in self.skills]

    @property
    def versions(self) -> list[SkillVersion]:
        """The store's versions among the skills (a candidate text is not one)."""
        return [s.version for s in self.skills if s.version is not None]

    @property
    def version_ids(self) -> list[int]:
        return [v.id for v in self.versions if v.id is not None]

    @property
    def adapter_ids(self) -> list[int]:
        return [p.adapter_id for p in self.parts if p.adapter_id is not None]

    @property
    def global_version(self) -> int | None:
        return self.global_adapter.version if self.global_adapter is not None else None


NOTHING = Loadout()


def join_weights(with_global: bool, adapters: int, compiled: int, beside_text: bool = False) -> list[float]:
    """The weight of each part a run joins, in the loadout's order (the global adapter, given
    adapter folders, compiled skills). Compiled skills share one adapter's weight, so retrieving
    more skills does not push the weights further from the policy; the global adapter counts
    GLOBAL_ALONE alone and GLOBAL_BESIDE_SKILLS beside compiled skills, which then share the rest;
    beside their text (`beside_text`) the compiled skills' share is COMPILED_BESIDE_TEXT of that;
    a given folder (a CycleQD candidate, `--adapter`) is taken as it is."""
    head = [GLOBAL_BESIDE_SKILLS if compiled else GLOBAL_ALONE] if with_global else []
    share = (COMPILED_BESIDE_TEXT if beside_text else 1.0) * (1.0 - GLOBAL_BESIDE_SKILLS if with_global else 1.0)
    return head + [1.0] * adapters + [share / compiled for _ in range(compiled)]


def make_loadout(
    store: AdapterStore | None,
    model: Model,
    skills: Sequence[GivenSkill | SkillVersion] = (),
    mode: SkillMode | str = SkillMode.context,
    *,
    compiler: SkillCompiler | None = None,
    use_global: bool = False,
    global_name: str = GLOBAL,
    adapters: Sequence[Path] = (),
    global_folder: Path | None = None,
    cache: Path | None = None,
) -> Loadout:
    """The skills and adapters a run of `model` gets.

    Compiled modes compile each skill (a store version once per checkpoint, into the store; any
    other text once per checkpoint, into `cache`). `use_global` joins the store's current global
    adapter, `global_folder` a global adapter outside the store (a candidate the learner's gate
    weighs) at the same weight, `adapters` joins adapter folders as they are (a CycleQD
    candidate). Joined folders
    are cached under `cache`, which only a loadout that joins adapters or compiles a text outside
    the store needs (compose refuses to join without one).
    """
    from skillgraft.agent.skill_adapters import compiled_adapter, compiled_text, compose

    try:
        mode = SkillMode(mode)
    except ValueError:
        raise LoadoutError(f"skill mode must be one of {', '.join(SKILL_MODES)}, got {mode!r}") from None
    given = tuple(s if isinstance(s, GivenSkill) else GivenSkill.of_version(s) for s in skills)
    head = store.latest_global(global_name) if (use_global and store is not None) else None
    compiling = mode.compiled and bool(given)
    if (compiling or head is not None or global_folder or adapters) and not isinstance(model, AdapterModel):
        raise LoadoutError(f"{model.name} cannot take LoRA adapters: its weights are out of reach (a hosted model, "
                           "a replay). Compiled skills and adapters need a local model (hf:<path>); use skill mode context.")
    if compiling and compiler is None:
        raise LoadoutError(f"skill mode {mode.value} needs a hypernetwork to compile skills; use skill mode context")
    if compiler is not None and mode.in_context:  # the text is in the prompt: no command memory
        compiler = compiler.beside_text()
    if store is not None and head is not None:
        parts = [AdapterPart.stored(store, head)]
    else:
        parts = [AdapterPart.folder(global_folder)] if global_folder is not None else []
    with_global = bool(parts)
    parts += [AdapterPart.folder(p) for p in adapters]
    for skill in given if compiling else ():
        assert compiler is not None  # refused above
        if skill.version is not None and store is not None:
            parts.append(AdapterPart.stored(store, compiled_adapter(store, compiler, skill.version)))
        elif cache is None:
            raise LoadoutError(f"compiling {skill.name!r}, a text outside the store, needs a cache folder")
        else:
            parts.append(compiled_text(compiler, skill.text, cache, skill.run))
    weights = join_weights(with_global, len(adapters), len(given) if compiling else 0, mode.in_context)
    adapter_dir, key = compose(parts, cache, weights)
    return Loadout(mode, given, tuple(parts), adapter_dir, key, head, tuple(weights))
