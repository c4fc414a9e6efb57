"""The model protocol: messages in, one reply out."""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


class ModelError(RuntimeError):
    """The model could not be reached or answered with something unusable."""


@dataclass
class ModelReply:
    content: str
    cost: float = 0.0  # USD, 0 for local models
    tool_command: str | None = None  # the command of a `bash` tool call, where tools are used
    usage: dict = field(default_factory=dict)
    tool_call_id: str | None = None  # the provider's id of that call, echoed in the tool-result message


@runtime_checkable
class Model(Protocol):
    name: str

    def query(self, messages: list[dict]) -> ModelReply: ...


@dataclass(frozen=True)
class Sampling:
    """How one run draws its replies: at `temperature`, from `stream` of the model's draws.

    A local model seeds its draws by the conversation, so the same task run twice replays the
    same reply; another stream gives the same conversation other draws (stream 0 is the
    model's own). A hosted model draws anew at every call and takes only the temperature.
    """

    temperature: float
    stream: int = 0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"a sampled run needs a temperature above 0, not {self.temperature}")


@runtime_checkable
class SamplingModel(Model, Protocol):
    """A model whose sampling one run can set, for that run only."""

    def sampled(self, sampling: Sampling) -> AbstractContextManager[None]: ...


@runtime_checkable
class AdapterModel(Model, Protocol):
    """A local model whose weights take PEFT LoRA adapters (one active at a time).

    `base_config` describes the base the adapters must fit (a transformers config): a skill
    compiler is built for it from memory, without reading the model's folder again.
    """

    @property
    def base_config(self) -> Any: ...

    def load_adapter(self, adapter_dir: Path) -> None: ...

    def unload_adapter(self) -> None: ...
