"""Shared set-up for the CycleQD tests: a real store holding a synthetic world's expert adapters."""
from __future__ import annotations

from pathlib import Path

from evolve.cycleqd.evaluators import SyntheticWorld, synthetic_world
from hypernet.peft_io import save_adapter
from skills.store import Store

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


def tiny_policy(folder: Path) -> Path:
    """A 2-layer Llama with a byte-level BPE tokenizer trained here: enough to run the agent offline."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from agent import prompts

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([prompts.system_prompt(), prompts.assistant_reply("Look.", "ls")] * 3, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def random_adapter_for(model_dir: Path, out: Path, seed: int) -> Path:
    """A rank-2 LoRA on the tiny policy's q/v projections, written in PEFT format with its fingerprint."""
    import torch
    from transformers import AutoConfig

    from hypernet.lora import LowRank
    from hypernet.peft_io import model_fingerprint

    config = AutoConfig.from_pretrained(model_dir)
    g = torch.Generator().manual_seed(seed)
    delta = {}
    for layer in range(config.num_hidden_layers):
        for proj in ("q_proj", "v_proj"):
            delta[f"model.layers.{layer}.self_attn.{proj}"] = LowRank(
                B=torch.randn(config.hidden_size, 2, generator=g) * 0.1, A=torch.randn(2, config.hidden_size, generator=g))
    return save_adapter(delta, out, base_model_name=str(model_dir), fingerprint=model_fingerprint(config),
                        target_modules=["q_proj", "v_proj"])
