"""A short synthetic copying task that teaches a freshly built policy to copy before it clones.

The policy's job is mostly copying: a test name from a pytest report into a grep, a line
number and a value from the grep into a sed. Trained from scratch on a few hundred episodes, a
small model first memorises the episodes instead, and its guesses at held-out names come from
the training names. A random token sequence followed by itself can only be predicted by
copying, so a few hundred steps of it build the attention that looks up an earlier occurrence
of the current token and continues from there (it appears abruptly, after about a hundred steps
at the default size). Every other batch draws its spans from a dozen tokens, so a token recurs
within a span and only the position reached so far says how to go on, as in copying
`test_scale_steps` out of `tests/test_entries.py::test_scale_steps`. Behaviour cloning then
starts from a model that can copy.
"""
from __future__ import annotations

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

FIRST_ORDINARY_ID = 8  # above the special tokens
SPAN, BATCH, SMALL_ALPHABET = 40, 16, 12


def copy_warmup(model, vocab_size: int, steps: int, *, lr: float, seed: int, show_progress: bool = True) -> list[float]:
    """Trains model in place for steps on repeated random spans; returns the losses."""
    if steps <= 0:
        return []
    gen = torch.Generator().manual_seed(seed)
    optim = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    losses: list[float] = []
    columns = [TextColumn("copy warm-up"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
               TimeElapsedColumn()]
    with Progress(*columns, disable=not show_progress) as bar:
        task = bar.add_task("warm-up", total=steps, loss="-")
        for step in range(steps):
            for group in optim.param_groups:
                group["lr"] = lr * min(1.0, (step + 1) / 20)
            span = torch.randint(FIRST_ORDINARY_ID, vocab_size, (BATCH, SPAN), generator=gen)
            if step % 2:
                alphabets = span[:, :SMALL_ALPHABET]
                span = torch.gather(alphabets, 1, torch.randint(0, SMALL_ALPHABET, (BATCH, SPAN), generator=gen))
            ids = torch.cat([span, span], dim=1)
            labels = ids.clone()
            labels[:, :SPAN + 1] = -100  # only the repeat is predictable
            loss = model(input_ids=ids, labels=labels).loss
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            losses.append(loss.item())
            bar.update(task, advance=1, loss=f"{loss.item():.3f}")
    return losses
