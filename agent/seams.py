"""What the agent asks of the parts it is handed: the skill store and the skill compiler.

The store (skills.store.Store) and the compiler (hypernet.compile.Compiler) satisfy these;
the type checker holds them to it (see tests/test_types.py).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from skillgraft.skills.schema import Adapter, SkillVersion

if TYPE_CHECKING:  # torch and the retrieval index stay unloaded until something compiles or searches
    from skillgraft.hypernet.checkpoint import CheckpointMeta
    from skillgraft.hypernet.lora import LoraDelta
    from skillgraft.skills.retrieval import SearchHit


class AdapterStore(Protocol):
    """The adapters of a store: compiled skills, the global adapter, their folders."""

    def find_compiled(self, skill_version_id: int, hypernet_ckpt: str | None) -> Adapter | None: ...

    def add_adapter(self, folder: Path | Mapping[str, bytes], kind: Any, base_fingerprint: str, rank: int,
                    alpha: float, target_modules: list[str], provenance: dict,
                    skill_version_id: int | None = None, hypernet_ckpt: str | None = None,
                    name: str | None = None, parent_id: int | None = None) -> Adapter: ...

    def adapter_path(self, adapter_id: int) -> Path: ...

    def trajectory_path(self, trajectory: Any) -> Path: ...

    def latest_global(self, name: str = ...) -> Adapter | None: ...


class SkillStore(AdapterStore, Protocol):
    """A store a run picks its skills from: by retrieval for the task, or by name."""

    def search(self, query: str, k: int = 5) -> list[SearchHit]: ...

    def latest_version(self, name: str) -> SkillVersion | None: ...


class SkillCompiler(Protocol):
    """Skill text → LoRA delta for one base model, under one hypernetwork checkpoint."""

    checkpoint_id: str
    meta: CheckpointMeta

    def compile(self, texts: Sequence[str]) -> list[LoraDelta]: ...

    def beside_text(self) -> SkillCompiler:
        """The compiler for skills the prompt shows as text too (itself where that changes nothing)."""
        ...

    def target_modules(self, delta: LoraDelta | None = None) -> list[str]: ...

    def files(self, delta: LoraDelta, metadata: Mapping[str, Any] | None = None) -> dict[str, bytes]: ...

    def save(self, delta: LoraDelta, out_dir: str | Path, metadata: Mapping[str, Any] | None = None) -> Path: ...


@runtime_checkable
class RunTuner(Protocol):
    """A compiler that trains a skill's adapter on the runs the skill was learned from
    (hypernet.tune.TunedCompiler): conversations as the model saw them, skill texts left out."""

    def compile_on_runs(self, text: str, conversations: Sequence[list[dict]]) -> LoraDelta: ...


@runtime_checkable
class AnchoredTuner(Protocol):
    """A RunTuner that, while it tunes, keeps the model's replies on runs of other tasks as they
    are (hypernet.tune.TunedCompiler with an anchor weight): `wants_anchors` until it has them."""

    @property
    def wants_anchors(self) -> bool: ...

    def anchored(self, conversations: Sequence[list[dict]], key: str) -> SkillCompiler: ...
