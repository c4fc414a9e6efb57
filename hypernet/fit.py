"""The behaviour-cloning loop shared by the SkillWorld policy, its LoRA experts and the tuning of
compiled skills (hypernet.tune): next-token loss on the masked (assistant) tokens, AdamW, warm-up
then cosine decay, gradient clipping, a progress bar. Deterministic from the seed: same batches in the same order.

Optionally the other tokens (prompt, skills, observations) carry a smaller language-modelling
loss too (`Schedule.context_weight`). The policy's hard part is copying (a test's name out of
pytest's output, an edit out of a skill), and predicting observations, which repeat names and
paths all the time, trains the same copying circuits on many more tokens."""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from skillgraft.hypernet.precision import bf16_autocast

Example = tuple[list[int], list[int]]  # token ids, 0/1 loss mask


@dataclass
class Schedule:
    steps: int
    batch_size: int
    lr: float
    warmup: int
    weight_decay: float
    seed: int
    context_weight: float = 0.0  # weight of the loss on tokens outside the assistant's replies

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        progress = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def fit(model, examples: list[Example], pad_id: int, schedule: Schedule, *, label: str = "training",
        show_progress: bool = True, before_step: Callable[[int], None] | None = None, bf16: bool = False,
        extra_loss: Callable[[int], torch.Tensor] | None = None) -> list[float]:
    """Trains the model's trainable parameters in place; returns the loss of every step.
    before_step(step), when given, runs before each step's forward pass; extra_loss(step), when
    given, is added to the step's loss (the losses returned are the behaviour-cloning ones). bf16: the forward and
    backward passes in bfloat16 autocast (the weights and the optimiser stay float32) where the
    device computes bfloat16 natively, about twice as fast there; float32 elsewhere."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for _, p in params if p.dim() >= 2]
    no_decay = [p for _, p in params if p.dim() < 2]
    optim = torch.optim.AdamW([{"params": decay, "weight_decay": schedule.weight_decay},
                               {"params": no_decay, "weight_decay": 0.0}], lr=schedule.lr, betas=(0.9, 0.95))
    losses: list[float] = []
    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
               TimeElapsedColumn(), TimeRemainingColumn()]
    model.train()
    with Progress(*columns, disable=not show_progress) as bar:
        task = bar.add_task(label, total=schedule.steps, loss="-")
        for step, batch in enumerate(batches(examples, schedule.batch_size, schedule.steps, schedule.seed)):
            for group in optim.param_groups:
                group["lr"] = schedule.lr_at(step)
            ids, labels, attn = collate([examples[i] for i in batch], pad_id)
            if before_step:
                before_step(step)
            with bf16_autocast(ids.device, bf16):
                if schedule.context_weight:
                    loss, total = _with_context_loss(model, ids, labels, attn, schedule.context_weight)
                else:
                    loss = total = model(input_ids=ids, attention_mask=attn, labels=labels).loss
                if extra_loss:
                    total = total + extra_loss(step)
            optim.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_([p for _, p in params], 1.0)
            optim.step()
            losses.append(loss.item())
            bar.update(task, advance=1, loss=f"{sum(losses[-20:]) / len(losses[-20:]):.3f}")
    model.eval()
    return losses


def _with_context_loss(model, ids, labels, attn, weight: float):
    """(assistant-token loss, assistant loss + weight x loss on the other real tokens)."""
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
    target = ids[:, 1:]
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                           reduction="none").view_as(target)
    own = labels[:, 1:] != -100
    other = (attn[:, 1:] == 1) & ~own
    acted = (ce * own).sum() / own.sum().clamp(min=1)
    return acted, acted + weight * (ce * other).sum() / other.sum().clamp(min=1)


def pad_id(tokenizer) -> int:
    """The id batches are padded with: the tokenizer's pad token, else its end of text."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def batches(examples: list[Example], batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """Shuffled epochs; each batch holds examples of similar length, so little is padding."""
    rng = random.Random(seed)
    out: list[list[int]] = []
    while len(out) < steps:
        idx = list(range(len(examples)))
        rng.shuffle(idx)
        for start in range(0, len(idx), batch_size * 16):
            window = sorted(idx[start:start + batch_size * 16], key=lambda i: len(examples[i][0]))
            chunk = [window[j:j + batch_size] for j in range(0, len(window), batch_size)]
            rng.shuffle(chunk)
            out += chunk
    return out[:steps]


def collate(batch: list[Example], pad: int):
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
