"""Behaviour cloning of the expert: next-token loss on the assistant's tokens only.

Deterministic from the seed (same data order, same initial weights) on a given number of
torch threads. A small nanoGPT-style loop: AdamW, warm-up then cosine decay, gradient clipping.
"""
from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from skillworld.policy.copy_warmup import copy_warmup
from skillworld.policy.data import conversations, corpus
from skillworld.policy.model import build_policy, parameter_count
from skillworld.policy.tokenizer import encode_conversation, train_tokenizer


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
    # Steps of a synthetic copying task before behaviour cloning (see copy_warmup.py).
    copy_warmup: int = 0
    seed: int = 0
    families: list[str] = field(default_factory=list)


def train_policy(records: list[dict], out_dir: Path, config: TrainConfig, *, show_progress: bool = True) -> dict:
    """Trains tokenizer and policy on the episodes in records and saves both in transformers
    format to out_dir; returns the training report (also written to out_dir/training.json)."""
    out_dir = Path(out_dir)
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    tokenizer = train_tokenizer(corpus(records), config.vocab_size)
    convs = conversations(records, seed=config.seed)
    examples = [encode_conversation(tokenizer, c) for c in convs]
    # An episode longer than the context still teaches its first turns: cut it, do not drop it.
    examples = [(ids[:config.context], mask[:config.context]) for ids, mask in examples]
    if not any(any(mask) for _, mask in examples):
        raise ValueError("no assistant token fits the context")
    model = build_policy(len(tokenizer), config.size, config.context, tokenizer.pad_token_id, tokenizer.eos_token_id)
    model.train()
    warmup_losses = copy_warmup(model, len(tokenizer), config.copy_warmup, lr=config.lr, seed=config.seed,
                                show_progress=show_progress)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optim = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                               {"params": no_decay, "weight_decay": 0.0}], lr=config.lr, betas=(0.9, 0.95))
    order = _batches(examples, config.batch_size, config.steps, config.seed)
    losses: list[float] = []
    started = time.monotonic()
    columns = [TextColumn("training policy"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
               TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, disable=not show_progress, transient=False) as bar:
        task = bar.add_task("train", total=config.steps, loss="-")
        for step, batch in enumerate(order):
            for group in optim.param_groups:
                group["lr"] = _lr(step, config)
            ids, labels, attn = _collate([examples[i] for i in batch], tokenizer.pad_token_id)
            loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            losses.append(loss.item())
            bar.update(task, advance=1, loss=f"{sum(losses[-20:]) / len(losses[-20:]):.3f}")
    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    report = {"config": asdict(config), "parameters": parameter_count(model), "examples": len(examples),
              "episodes": len(records), "max_tokens": max(len(e[0]) for e in examples),
              "mean_tokens": sum(len(e[0]) for e in examples) / len(examples),
              "copy_warmup_final_loss": warmup_losses[-1] if warmup_losses else None,
              "first_loss": losses[0], "final_loss": sum(losses[-20:]) / len(losses[-20:]),
              "losses": losses, "seconds": time.monotonic() - started, "torch_threads": torch.get_num_threads()}
    (out_dir / "training.json").write_text(json.dumps(report, indent=1))
    return report


def _lr(step: int, config: TrainConfig) -> float:
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _batches(examples: list, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """Shuffled epochs; each batch holds examples of similar length, so little is padding."""
    rng = random.Random(seed)
    batches: list[list[int]] = []
    while len(batches) < steps:
        idx = list(range(len(examples)))
        rng.shuffle(idx)
        for start in range(0, len(idx), batch_size * 16):
            window = sorted(idx[start:start + batch_size * 16], key=lambda i: len(examples[i][0]))
            chunk = [window[j:j + batch_size] for j in range(0, len(window), batch_size)]
            rng.shuffle(chunk)
            batches += chunk
    return batches[:steps]


def _collate(batch: list[tuple[list[int], list[int]]], pad: int):
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    attn = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (seq, mask) in enumerate(batch):
        n = len(seq)
        ids[row, :n] = torch.tensor(seq)
        attn[row, :n] = 1
        labels[row, :n] = torch.tensor([t if m else -100 for t, m in zip(seq, mask)])
    return ids, labels, attn
