"""The learner's roles named by one string each, as everywhere in skillgraft.

"offline" picks the model-free variant; anything else is a litellm model string for a chat
model that writes skills (summariser) or revises them (generator).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from skillgraft.agent.models.base import AdapterModel, Model

from skillgraft.evolve.learn.propose import Generator, LLMGenerator, OfflineGenerator
from skillgraft.evolve.learn.summarise import Summariser
from skillgraft.evolve.learn.summarise_llm import LLMSummariser
from skillgraft.evolve.learn.summarise_offline import OfflineSummariser

if TYPE_CHECKING:
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.tune import TunedCompiler, Tuning

OFFLINE = "offline"


def _chat_model(spec: str):
    from skillgraft.agent.models.litellm_model import LitellmModel

    return LitellmModel(spec, tools=False)  # plain text replies: a SKILL.md is not a bash command


def make_summariser(spec: str = OFFLINE, test_command: str | None = None) -> Summariser:
    return OfflineSummariser(test_command) if spec == OFFLINE else LLMSummariser(_chat_model(spec))


def make_generator(spec: str = OFFLINE) -> Generator:
    return OfflineGenerator() if spec == OFFLINE else LLMGenerator(_chat_model(spec))


def make_compiler(hypernet: Path | None, model: Model, tuning: Tuning | None = None) -> Compiler | TunedCompiler | None:
    """A compiler for the model's base when there is a hypernetwork and the model takes adapters;
    with `tuning`, one whose adapters of learned skills are tuned on the run they came from."""
    if hypernet is None or not isinstance(model, AdapterModel):
        return None
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.tune import TunedCompiler

    compiler = Compiler.load(Path(hypernet), model.base_config)
    return compiler if tuning is None else TunedCompiler(compiler, model.base_config, tuning)
