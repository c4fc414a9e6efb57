"""Shared parts of the learning tests: a real tiny Llama with a hypernetwork compiler, and
policies that act as SkillWorld's scripted expert while adapters go into the tiny model's weights."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agent import prompts
from agent.models.hf_model import HFModel


def build_tiny_llama(folder: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [prompts.system_prompt(), prompts.instance_prompt("The test suite fails."), prompts.observation("1 passed", 0)]
    tok.train_from_iterator(corpus * 3, trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>"],
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048)
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


class ExpertInTinyWeights:
    """Answers like the expert for the current task; adapters go to a real tiny HF model."""

    def __init__(self, hf: HFModel):
        self.hf, self.name, self.expert, self.loaded = hf, "expert+tiny-llama", None, []

    def query(self, messages):
        return self.expert.query(messages)

    def load_adapter(self, adapter_dir):
        self.hf.load_adapter(adapter_dir)
        self.loaded.append(Path(adapter_dir))

    def unload_adapter(self):
        self.hf.unload_adapter()


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from hypernet.compile import Compiler
    from hypernet.hypernetwork import HypernetConfig

    base = build_tiny_llama(tmp_path_factory.mktemp("base") / "tiny")
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
        from skillworld.expert import ExpertModel

        observations = [m["content"] for m in messages[2:] if m["role"] == "user"]
        if not observations:
            return ExpertModel(self.tasks[0]).query(messages)  # the shared first step
        for wt in self.tasks:
            if f"::test_{wt.planted.name} " in observations[0]:
                return ExpertModel(wt).query(messages)
        from agent.models.base import ModelReply

        return ModelReply(content=prompts.assistant_reply("I do not know this task.", prompts.SUBMIT_COMMAND))
