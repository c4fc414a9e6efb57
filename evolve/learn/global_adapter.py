"""Folding a newly compiled skill into the global adapter: ΔW_g ← (1−α)·ΔW_g + α·ΔW_new, at rank R.

The step is read–compute–commit against the store's optimistic version check: if another
learner committed a global version after this one read its parent, the commit raises
StaleVersion and the step starts over from the newer parent, so no learner's update is lost.
The adapter folder is fully written (to a temporary folder) before the commit, and the store
copies it atomically before the row that names it exists, so a learner killed at any point
leaves either the old head or the new one, never a row without its weights.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random

from skillgraft.hypernet.lora import LoraDelta, LowRank, frobenius_norm, subtract
from skillgraft.hypernet.merges import merge
from skillgraft.hypernet.peft_io import load_adapter, save_adapter
from skillgraft.skills.errors import StaleVersion
from skillgraft.skills.schema import Adapter, saved_id

if TYPE_CHECKING:
    from skillgraft.skills.store import Store

GLOBAL = "global"
# The merge each EMA mode sums the two adapters with. "exact": the EMA of ΔW (the method).
# "factors": the EMA of A and B apart, which is not an EMA of ΔW at all; kept only so the
# difference can be measured.
MODE_MERGES = {"exact": "svd", "factors": "factors"}

# A step that moves the global ΔW by less than this (relative) commits nothing: folding an adapter
# into a global that already is that adapter (a skill confirmed again, with the EMA of an adapter
# with itself) would otherwise add a version with the same weights, and weigh it on validation.
UNCHANGED = 1e-4

# A gate sees the candidate folder and the current head's folder (None before the first version:
# the candidate is then weighed against no adapter at all) and says whether to commit.
Gate = Callable[[Path, Path | None], bool]


@dataclass(frozen=True)
class EmaConfig:
    alpha: float = 0.1
    rank: int = 16
    name: str = GLOBAL
    mode: str = "exact"  # a key of MODE_MERGES
    # The first global version copies the first skill (α = 1 on an empty global), the same bias
    # correction an EMA started from zero needs; otherwise it would start α times too small.
    copy_first: bool = True
    attempts: int = 50

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha must lie in (0, 1], got {self.alpha}")
        if self.rank < 1:
            raise ValueError(f"rank must be at least 1, got {self.rank}")
        if self.mode not in MODE_MERGES:
            raise ValueError(f"mode must be {' or '.join(map(repr, MODE_MERGES))}, got {self.mode!r}")


@dataclass
class FoldResult:
    record: Adapter | None  # the global head after the step (the old one when the gate said no)
    committed: bool
    attempts: int = 1
    provenance: dict = field(default_factory=dict)
    unchanged: bool = False  # nothing committed because the step left ΔW as it was (UNCHANGED)


def factor_ema(global_: Mapping[str, LowRank], new: Mapping[str, LowRank], alpha: float, rank: int) -> LoraDelta:
    """The tempting shortcut: average B's and A's apart (both brought to rank R first).

    (1−α)B_g A_g + α B_n A_n is what the method needs; this gives ((1−α)B_g + αB_n)((1−α)A_g + αA_n),
    which adds cross terms and shrinks both parts. Used by the ablation only.
    """
    return merge("factors", [global_, new], [1 - alpha, alpha], rank=rank)


def combine(current: Mapping[str, LowRank] | None, new: Mapping[str, LowRank], config: EmaConfig) -> tuple[LoraDelta, float]:
    """The next global ΔW and the α actually used."""
    if current is None:
        # Every mode starts alike: the first skill, weighted by α, brought to rank R.
        alpha = 1.0 if config.copy_first else config.alpha
        return merge(MODE_MERGES["exact"], [new], [alpha], rank=config.rank), alpha
    merged = merge(MODE_MERGES[config.mode], [current, new], [1.0 - config.alpha, config.alpha], rank=config.rank)
    return merged, config.alpha


def moved(current: Mapping[str, LowRank], merged: Mapping[str, LowRank]) -> float:
    """‖ΔW_merged − ΔW_current‖ / ‖ΔW_current‖."""
    return frobenius_norm(subtract(merged, current)) / max(frobenius_norm(current), 1e-12)


def fold_into_global(
    store: Store,
    new_adapter_id: int,
    config: EmaConfig = EmaConfig(),
    *,
    provenance: Mapping | None = None,
    gate: Gate | None = None,
    on_computed: Callable[[Path], None] | None = None,
) -> FoldResult:
    """One EMA step of adapter `new_adapter_id` into the named global adapter, retried until it lands.

    A step that leaves the global ΔW as it was (within UNCHANGED) commits nothing and asks no gate.
    `gate`, when given, decides on the computed candidate against the current head, or against no
    adapter when there is none yet (a validation run); a refused candidate leaves the head as it
    was. `on_computed` is called with the written candidate folder just before the commit (used to
    observe a step from outside).
    """
    new_delta, info = load_adapter(store.adapter_path(new_adapter_id))
    tries = 0
    for step in Retrying(stop=stop_after_attempt(config.attempts), retry=retry_if_exception_type(StaleVersion),
                         wait=wait_random(0.0, 0.05), reraise=True):
        with step:
            tries += 1
            head = store.latest_global(config.name)
            current = load_adapter(store.adapter_path(saved_id(head.id)))[0] if head is not None else None
            merged, alpha = combine(current, new_delta, config)
            if current is not None and moved(current, merged) < UNCHANGED:
                return FoldResult(record=head, committed=False, attempts=tries, unchanged=True)
            prov = {
                "method": "ema" if config.mode == "exact" else f"ema-{config.mode}",
                "alpha": alpha,
                "rank": config.rank,
                "combined": ([{"adapter_id": head.id, "weight": 1.0 - alpha}] if head is not None else [])
                + [{"adapter_id": new_adapter_id, "weight": alpha}],
                **dict(provenance or {}),
            }
            with tempfile.TemporaryDirectory(prefix="skillgraft-global-") as tmp:
                folder = save_adapter(
                    merged, Path(tmp) / "adapter", base_model_name=info.base_model_name, fingerprint=info.fingerprint,
                    target_modules=info.target_modules, metadata={"provenance": prov},
                )
                current_folder = store.adapter_path(saved_id(head.id)) if head is not None else None
                if gate is not None and not gate(folder, current_folder):
                    return FoldResult(record=head, committed=False, attempts=tries, provenance=prov)
                if on_computed is not None:
                    on_computed(folder)
                record = store.commit_global(
                    folder, head.id if head is not None else None, prov,
                    base_fingerprint=info.fingerprint or "unknown", name=config.name,
                )
            return FoldResult(record=record, committed=True, attempts=tries, provenance=prov)
    raise AssertionError("unreachable: tenacity re-raises the last StaleVersion")
