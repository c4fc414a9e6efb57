"""The SkillWorld policy on a pretrained base: behaviour cloning of the expert into a LoRA on
every linear layer of a frozen chat model, saved in the project's PEFT adapter format.

A pretrained model already copies a name or a value out of its context, which a model trained
from scratch here never learnt; the adapter teaches it the world's five-step routine, the
families' fixes, to take an edit from a skill when one is shown, and to recover from a step
that went wrong. Conversations are rendered with the base's own chat template, exactly as
`hf:` renders them when it acts.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from skillgraft.hypernet.objectives import render_chat
from skillgraft.hypernet.peft_io import lora_delta, model_fingerprint, save_adapter
from skillgraft.hypernet.fit import Example, Schedule, fit, pad_id

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraPolicyConfig:
    rank: int = 16
    targets: tuple[str, ...] = ALL_LINEAR
    steps: int = 300
    batch_size: int = 4
    lr: float = 1e-3
    warmup: int = 20
    weight_decay: float = 0.0
    max_tokens: int = 1536  # a longer conversation keeps its start
    seed: int = 0
    bf16: bool = True


def encode(tokenizer, conversation: list[dict], max_tokens: int) -> Example:
    tokens = render_chat(tokenizer, conversation, max_tokens)
    return tokens.ids, [int(t) for t in tokens.target]


def train_lora_policy(base_dir: Path, convs: list[list[dict]], out_dir: Path, config: LoraPolicyConfig, *,
                      base_name: str | None = None, metadata: dict | None = None, show_progress: bool = True) -> dict:
    """Trains the adapter on the conversations and writes it to out_dir with a training report
    (training.json); returns the report."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    fingerprint = model_fingerprint(base)
    examples = [encode(tokenizer, c, config.max_tokens) for c in convs]
    examples = [e for e in examples if any(e[1])]
    if not examples:
        raise ValueError("no conversation has an assistant token to train on")
    model = get_peft_model(base, LoraConfig(r=config.rank, lora_alpha=config.rank, lora_dropout=0.0,
                                            target_modules=list(config.targets)))
    schedule = Schedule(config.steps, config.batch_size, config.lr, config.warmup, config.weight_decay, config.seed)
    started = time.monotonic()
    losses = fit(model, examples, pad_id(tokenizer), schedule, label="training policy", show_progress=show_progress,
                 bf16=config.bf16)
    seconds = time.monotonic() - started
    tokens = [len(ids) for ids, _ in examples]
    report = {"config": asdict(config), "conversations": len(examples), "tokens": sum(tokens),
              "max_tokens": max(tokens), "first_loss": losses[0],
              "final_loss": sum(losses[-20:]) / len(losses[-20:]), "losses": losses, "seconds": round(seconds, 1),
              "torch_threads": torch.get_num_threads(), **(metadata or {})}
    save_adapter(lora_delta(model), out_dir, base_model_name=base_name or str(base_dir), fingerprint=fingerprint,
                 target_modules=list(config.targets), metadata={"kind": "policy", **(metadata or {})},
                 dtype=torch.bfloat16)
    (Path(out_dir) / "training.json").write_text(json.dumps(report, indent=1))
    return report
