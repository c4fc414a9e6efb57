"""Training the policy: a tokenizer, then behaviour cloning of the expert on the assistant's tokens
only (fit.py), from scratch or carrying on from an earlier policy. Deterministic from the seed
(same data order, same initial weights) on a given number of torch threads."""
from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from skillgraft.skillworld.policy.data import conversations, corpus
from skillgraft.hypernet.fit import Schedule, fit
from skillgraft.skillworld.policy.model import build_policy, parameter_count
from skillgraft.skillworld.policy.tokenizer import encode_conversation, train_tokenizer


@dataclass
class TrainConfig:
    size: str = "tiny"
    vocab_size: int = 2048
    context: int = 2048
    steps: int = 400
    batch_size: int = 8
    lr: float = 2e-3
    warmup: int = 20
    weight_decay: float = 0.05
    # Language-modelling loss on the prompt, skills and observations, relative to the replies' (fit.py).
    context_weight: float = 0.0
    # Carry on from a trained policy folder (its tokenizer and weights) instead of starting afresh.
    init_from: str | None = None
    seed: int = 0
    families: list[str] = field(default_factory=list)


def train_policy(records: list[dict], out_dir: Path, config: TrainConfig, *, show_progress: bool = True) -> dict:
    """Trains tokenizer and policy on the episodes in records and saves both in transformers
    format to out_dir; returns the training report (also written to out_dir/training.json)."""
    out_dir = Path(out_dir)
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    if config.init_from:  # carry on: the earlier policy's tokenizer and weights
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(config.init_from)
        model = AutoModelForCausalLM.from_pretrained(config.init_from)
    else:
        tokenizer = train_tokenizer(corpus(records), config.vocab_size)
        model = build_policy(len(tokenizer), config.size, config.context, tokenizer.pad_token_id, tokenizer.eos_token_id)
    convs = conversations(records, seed=config.seed)
    examples = [encode_conversation(tokenizer, c) for c in convs]
    # An episode longer than the context still teaches its first turns: cut it, do not drop it.
    examples = [(ids[:config.context], mask[:config.context]) for ids, mask in examples]
    if not any(any(mask) for _, mask in examples):
        raise ValueError("no assistant token fits the context")
    started = time.monotonic()
    schedule = Schedule(config.steps, config.batch_size, config.lr, config.warmup, config.weight_decay, config.seed,
                        config.context_weight)
    losses = fit(model, examples, tokenizer.pad_token_id, schedule, label="training policy", show_progress=show_progress)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    report = {"config": asdict(config), "parameters": parameter_count(model), "examples": len(examples),
              "episodes": len(records), "max_tokens": max(len(e[0]) for e in examples),
              "mean_tokens": sum(len(e[0]) for e in examples) / len(examples),
              "first_loss": losses[0], "final_loss": sum(losses[-20:]) / len(losses[-20:]),
              "losses": losses, "seconds": time.monotonic() - started, "torch_threads": torch.get_num_threads()}
    (out_dir / "training.json").write_text(json.dumps(report, indent=1))
    return report

