"""Shared set-up for the CycleQD tests: a real store holding a synthetic world's expert adapters."""
from __future__ import annotations

from pathlib import Path

from skillgraft.evolve.cycleqd.evaluators import SyntheticEvaluator, SyntheticWorld, synthetic_world
from skillgraft.hypernet.peft_io import save_adapter
from skillgraft.skills.store import Store
from tiny_llama import build_tiny_llama

TASKS = ["alpha", "beta", "gamma"]
FINGERPRINT = "sha256:tiny-synthetic-base"


def open_store(root: Path) -> Store:
    return Store(f"sqlite:///{root / 'store.db'}", root / "artifacts")


def store_with_experts(root: Path, tasks=TASKS, seed: int = 0) -> tuple[Store, SyntheticWorld, list[int]]:
    """A store on SQLite (or `url`) with one expert adapter per task; returns (store, world, adapter ids)."""
    root.mkdir(parents=True, exist_ok=True)
    store = open_store(root)
    world = synthetic_world(tasks, seed=seed)
    ids = []
    for task, delta in world.experts.items():
        folder = save_adapter(delta, root / "experts" / task, base_model_name="tiny", fingerprint=FINGERPRINT,
                              target_modules=["q_proj"])
        rank = max(lr.rank for lr in delta.values())
        record = store.add_adapter(folder, "checkpoint", FINGERPRINT, rank, float(rank), ["q_proj"],
                                   {"expert": task}, name=f"expert-{task}")
        ids.append(record.id)
    return store, world, ids


class Rounded:
    """The synthetic fitness rounded to quarters, so that elites tie as success rates over a few episodes do."""

    needs_folder = False

    def __init__(self, inner: SyntheticEvaluator):
        self.inner = inner

    def evaluate(self, requests):
        return [round(s * 4) / 4 for s in self.inner.evaluate(requests)]


def tiny_policy(folder: Path) -> Path:
    """A 2-layer Llama with a byte-level BPE tokenizer trained here: enough to run the agent offline."""
    from skillgraft.agent import prompts

    return build_tiny_llama(folder, [prompts.system_prompt(), prompts.assistant_reply("Look.", "ls")] * 3,
                            max_positions=4096)


def random_adapter_for(model_dir: Path, out: Path, seed: int) -> Path:
    """A rank-2 LoRA on the tiny policy's q/v projections, written in PEFT format with its fingerprint."""
    import torch
    from transformers import AutoConfig

    from skillgraft.hypernet.lora import LowRank
    from skillgraft.hypernet.peft_io import model_fingerprint

    config = AutoConfig.from_pretrained(model_dir)
    g = torch.Generator().manual_seed(seed)
    delta = {}
    for layer in range(config.num_hidden_layers):
        for proj in ("q_proj", "v_proj"):
            delta[f"model.layers.{layer}.self_attn.{proj}"] = LowRank(
                B=torch.randn(config.hidden_size, 2, generator=g) * 0.1, A=torch.randn(2, config.hidden_size, generator=g))
    return save_adapter(delta, out, base_model_name=str(model_dir), fingerprint=model_fingerprint(config),
                        target_modules=["q_proj", "v_proj"])
