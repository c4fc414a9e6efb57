"""An anchor term: training an adapter while keeping the model's next-token distribution where
the adapter has no business.

Each step adds, times a weight, how far the adapted model's log-probabilities on one anchor (a
stretch of tokens the adapter must leave alone) are from the model's own with the adapter off.
The model's own are computed once per anchor, frozen. Two measures:

- "kl": KL(model || adapted) per position, the whole distribution kept;
- "margin": the squared change of the log-probabilities of the model's top MARGIN_TOKENS tokens
  at each position. KL hardly sees an adapter that makes a token the model already prefers surer
  still; in a sum of adapters that shift is added to what another adapter has to overcome.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

ANCHOR_LOSSES = ("kl", "margin")
MARGIN_TOKENS = 8


def check_anchor_loss(kind: str) -> None:
    if kind not in ANCHOR_LOSSES:
        raise ValueError(f"the anchor loss must be one of {', '.join(ANCHOR_LOSSES)}, not {kind!r}")


def anchor_term(target: torch.Tensor, moved: torch.Tensor, kind: str) -> torch.Tensor:
    """How far next-token log-probabilities `moved` (one row per position) are from the model's
    `target`, by `kind` (see the module); the mean over positions."""
    if kind == "margin":
        top = target.topk(MARGIN_TOKENS, -1).indices
        return (moved.gather(-1, top) - target.gather(-1, top)).pow(2).sum(-1).mean()
    return torch.nn.functional.kl_div(moved, target, log_target=True, reduction="batchmean")


def anchored_loss(model, count: int, log_probs: Callable[[int], torch.Tensor], weight: float, kind: str,
                  seed: int) -> Callable[[int], torch.Tensor]:
    """A step's anchor term (for `fit`'s extra_loss) over one of `count` anchors, drawn in a fixed
    order from the seed; `log_probs(i)` is the model's next-token log-probabilities on anchor i as
    it stands (the PEFT `model` with its adapter on, or off under `model.disable_adapter()`)."""
    check_anchor_loss(kind)
    draw = random.Random(seed + 1)
    targets: dict[int, torch.Tensor] = {}

    def loss(_step: int) -> torch.Tensor:
        i = draw.randrange(count)
        if i not in targets:
            with torch.no_grad(), model.disable_adapter():
                targets[i] = log_probs(i)
        return weight * anchor_term(targets[i], log_probs(i), kind)

    return loss


def replies_log_probs(model, ids: Sequence[int], target: Sequence[bool]) -> torch.Tensor:
    """The model's next-token log-probabilities at each token marked in `target` (float32, one row
    per marked token), the logits computed only from the first marked token on."""
    first = next(i for i, t in enumerate(target) if t)
    logits = model(input_ids=torch.tensor([list(ids)]), logits_to_keep=len(ids) - first + 1).logits[0, :-1]
    marked = torch.tensor([bool(t) for t in target[first:]])
    return torch.log_softmax(logits[marked].float(), -1)
