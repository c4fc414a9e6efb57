"""Loss of the frozen base on examples, with and without the compiled adapter and the skill text.

Four conditions, each the mean loss over scored tokens:
  none      neither the adapter nor the skill text
  context   the skill text in the context, no adapter
  adapter   the compiled adapter, skill text not in the context
  both      the adapter and the skill text
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.nn import functional as F

from skillgraft.hypernet.apply import generated_lora
from skillgraft.hypernet.encoder import EncodedSkills
from skillgraft.hypernet.hypernetwork import Hypernetwork
from skillgraft.hypernet.objectives import Example, Tokens

CONDITIONS = ("none", "context", "adapter", "both")


def collate(items: Sequence[Tokens], pad_id: int, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Right-padded ids, attention mask, labels (-100 where nothing is scored) and token weights."""
    width = max(len(t.ids) for t in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    attn = torch.zeros(len(items), width, dtype=torch.long)
    labels = torch.full((len(items), width), -100, dtype=torch.long)
    weights = torch.ones(len(items), width)
    for i, t in enumerate(items):
        n = len(t.ids)
        ids[i, :n] = torch.tensor(t.ids)
        attn[i, :n] = 1
        labels[i, :n] = torch.where(torch.tensor(t.target), torch.tensor(t.ids), torch.tensor(-100))
        if t.weight is not None:
            weights[i, :n] = torch.tensor(t.weight)
    return ids.to(device), attn.to(device), labels.to(device), weights.to(device)


def token_loss(model: torch.nn.Module, ids: Tensor, attn: Tensor, labels: Tensor,
               weights: Tensor | None = None) -> tuple[Tensor, float]:
    """Weighted sum of next-token cross-entropy over scored tokens, and the sum of their weights
    (with no weights: the summed loss and how many tokens were scored)."""
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
    gold = labels[:, 1:]
    each = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), gold.reshape(-1), ignore_index=-100,
                           reduction="none")
    scored = (gold != -100).reshape(-1).float()
    w = scored if weights is None else scored * weights[:, 1:].reshape(-1).float()
    return (each * w).sum(), float(w.sum())


def row_factors(factors: dict[str, tuple[Tensor, Tensor]], groups: Sequence[Sequence[int]]) -> dict[str, tuple[Tensor, Tensor]]:
    """Per batch row, the rank concatenation (= sum of ΔW) of the adapters of that row's skills.

    Rows with fewer skills are padded with zero factors, which add nothing.
    """
    most = max(len(g) for g in groups)
    out = {}
    for path, (A, B) in factors.items():
        r = A.shape[1]
        rows_A, rows_B = [], []
        for g in groups:
            parts_A = [A[s] for s in g] + [A.new_zeros(r, A.shape[2])] * (most - len(g))
            parts_B = [B[s] for s in g] + [B.new_zeros(B.shape[1], r)] * (most - len(g))
            rows_A.append(torch.cat(parts_A, 0))
            rows_B.append(torch.cat(parts_B, 1))
        out[path] = (torch.stack(rows_A), torch.stack(rows_B))
    return out


def batch_loss(
    model: torch.nn.Module,
    net: Hypernetwork | None,
    encoded: EncodedSkills,
    batch: Sequence[Example],
    pad_id: int,
    with_context: bool = False,
) -> tuple[Tensor, float, dict[str, tuple[Tensor, Tensor]] | None]:
    """Weighted summed loss of `batch` and the sum of its token weights, each row under the
    adapter of its skills when `net` is given."""
    device = next(model.parameters()).device
    ids, attn, labels, weights = collate([ex.tokens(with_context) for ex in batch], pad_id, device)
    if net is None:
        loss, n = token_loss(model, ids, attn, labels, weights)
        return loss, n, None
    used = sorted({s for ex in batch for s in ex.skill_ids})
    local = {s: i for i, s in enumerate(used)}
    factors = net(encoded.select(used).to(device))
    groups = [[local[s] for s in ex.skill_ids] for ex in batch]
    if all(len(g) == 1 for g in groups):
        rows = torch.tensor([g[0] for g in groups], device=device)
        with generated_lora(model, factors, rows):
            loss, n = token_loss(model, ids, attn, labels, weights)
    else:
        with generated_lora(model, row_factors(factors, groups)):
            loss, n = token_loss(model, ids, attn, labels, weights)
    return loss, n, factors


@torch.no_grad()
@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    net: Hypernetwork,
    encoded: EncodedSkills,
    examples: Sequence[Example],
    pad_id: int,
    batch_size: int = 8,
    conditions: Sequence[str] = CONDITIONS,
) -> dict[str, float]:
    """Mean per-token loss of `examples` under each condition (weighted, where tokens carry weights)."""
    was_training = net.training
    net.eval()
    result = {}
    for cond in conditions:
        total, count = 0.0, 0.0
        for start in range(0, len(examples), batch_size):
            part = examples[start : start + batch_size]
            adapter = net if cond in ("adapter", "both") else None
            loss, n, _ = batch_loss(model, adapter, encoded, part, pad_id, with_context=cond in ("context", "both"))
            total += float(loss)
            count += n
        result[cond] = total / max(count, 1.0)
    net.train(was_training)
    return result
