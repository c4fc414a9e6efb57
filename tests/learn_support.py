"""Shared parts of the learning tests: a real tiny Llama with a hypernetwork compiler, and
policies that act as SkillWorld's scripted expert while adapters go into the tiny model's weights."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from skillgraft.agent import prompts
from skillgraft.agent.models.hf_model import HFModel
from tiny_llama import build_tiny_llama


def tiny_base(folder: Path) -> Path:
    corpus = [prompts.system_prompt(), prompts.instance_prompt("The test suite fails."), prompts.observation("1 passed", 0)]
    return build_tiny_llama(folder, corpus * 3)


class ExpertInTinyWeights:
    """Answers like the expert for the current task; adapters go to a real tiny HF model."""

    def __init__(self, hf: HFModel):
        self.hf, self.name, self.expert, self.loaded = hf, "expert+tiny-llama", None, []

    def query(self, messages):
        return self.expert.query(messages)

    @property
    def base_config(self):
        return self.hf.base_config

    def load_adapter(self, adapter_dir):
        self.hf.load_adapter(adapter_dir)
        self.loaded.append(Path(adapter_dir))

    def unload_adapter(self):
        self.hf.unload_adapter()


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.hypernetwork import HypernetConfig

    base = tiny_base(tmp_path_factory.mktemp("base") / "tiny")
    compiler = Compiler.load(None, base, config=HypernetConfig(rank=4, hidden=32, embed_dim=16, trunk_blocks=1, pool_heads=2))
    with torch.no_grad():  # an untrained hypernetwork emits ΔW = 0; random heads make texts differ
        g = torch.Generator().manual_seed(0)
        for name, p in compiler.net.named_parameters():
            if "to_b" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return base, compiler


class PoolExpert(ExpertInTinyWeights):
    """The expert for whichever of its tasks the conversation is about, told apart by the failing
    test that the first observation names (every expert's first command is the same test run);
    on a task it does not know it submits at once, and fails."""

    def __init__(self, hf: HFModel, tasks):
        super().__init__(hf)
        self.tasks = list(tasks)
        names = [wt.planted.name for wt in self.tasks]
        assert len(set(names)) == len(names), "the pool's tasks must fail tests of different names"
        self.name = "pool-expert+tiny-llama"

    def query(self, messages):
        from skillgraft.skillworld.expert import ExpertModel

        observations = [m["content"] for m in messages[2:] if m["role"] == "user"]
        if not observations:
            return ExpertModel(self.tasks[0]).query(messages)  # the shared first step
        for wt in self.tasks:
            if f"::test_{wt.planted.name} " in observations[0]:
                return ExpertModel(wt).query(messages)
        from skillgraft.agent.models.base import ModelReply

        return ModelReply(content=prompts.assistant_reply("I do not know this task.", prompts.SUBMIT_COMMAND))


def killed_at(script: str, args: list[str], marker: str):
    """Runs a Python script in a child process with this project importable, waits for its line
    that starts with `marker`, SIGKILLs it there, and returns the dead child."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args],
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = child.stdout.readline()
    assert line.startswith(marker), child.stderr.read() if not line else line
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    return child
