"""Expert adapters: the policy fine-tuned by behaviour cloning on the episodes of a few families,
only through a LoRA on its attention projections (PEFT), saved in the project's adapter format.

These are the checkpoints CycleQD starts from on SkillWorld: one expert per family group, each
good at its own group, whose task vectors the search recombines.
"""
from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import torch

from skillgraft.hypernet.anchor import anchored_loss, check_anchor_loss
from skillgraft.hypernet.fit import Schedule, fit, pad_id
from skillgraft.hypernet.peft_io import lora_delta, lora_modules, model_fingerprint, save_adapter
from skillgraft.skillworld.edit_replay import edit_replay, reply_log_probs
from skillgraft.skillworld.policy.data import conversations
from skillgraft.skillworld.policy.lora_policy import encode

TARGETS = ("q_proj", "v_proj")


def train_lora_expert(policy_dir: Path, records: list[dict], out_dir: Path, *, rank: int = 8, steps: int = 150,
                      batch_size: int = 4, lr: float = 3e-3, seed: int = 0, replay: Sequence[dict] = (),
                      min_scale: float = 1.0, anchors: Sequence[dict] = (), anchor_weight: float = 0.1,
                      anchor_loss: str = "kl", show_progress: bool = True) -> dict:
    """Trains a rank-`rank` LoRA on records (without their skills in context: the expert must
    know its families by heart) and writes it to out_dir; returns the training report.

    Two options make experts that survive merging. replay: episodes of other families, trained
    alongside, so the adapter learns to leave them alone rather than write its own family's edit
    everywhere. min_scale < 1: each step applies the adapter at a scale drawn from [min_scale, 1],
    so a fraction of it (what a weighted average of task vectors keeps) still works.

    anchors: episodes of families that other experts are for (and the policy does not know), whose
    edit reply the expert must leave as the policy has it. Each step adds, times anchor_weight, the
    KL divergence from the policy's next-token distribution (adapter off) to the expert's over one
    anchor's edit reply: the whole distribution is kept, not only its greedy token, so that in a
    merge the other group's expert is the only one that moves those replies.

    anchor_loss="margin" keeps the policy's margins there instead: the squared change of the
    log-probabilities of the policy's top tokens at each position. KL hardly sees an expert that
    makes a token the policy already prefers surer still, yet in a sum of experts that shift is
    added to the logits the other group's expert has to overcome."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not 0 < min_scale <= 1:
        raise ValueError(f"min_scale must be in (0, 1], not {min_scale}")
    if not records:
        raise ValueError("no episodes to train an expert on")
    check_anchor_loss(anchor_loss)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(policy_dir)
    base = AutoModelForCausalLM.from_pretrained(policy_dir)
    fingerprint = model_fingerprint(base)
    model = get_peft_model(base, LoraConfig(r=rank, lora_alpha=rank, lora_dropout=0.0, target_modules=list(TARGETS)))
    examples = [encode(tokenizer, c, 2048) for c in conversations([*records, *replay], seed=seed, with_skill=False)]
    lora = [module for _, module in lora_modules(model)]
    full = {id(m): m.scaling["default"] for m in lora}
    draw = random.Random(seed)

    def rescale(_step: int) -> None:
        s = draw.uniform(min_scale, 1.0)
        for m in lora:
            m.scaling["default"] = full[id(m)] * s

    kept = [edit_replay(tokenizer, c) for c in conversations(list(anchors), seed=seed, with_skill=False)]
    losses = fit(model, examples, pad_id(tokenizer), Schedule(steps, batch_size, lr, 10, 0.0, seed),
                 label="training expert", show_progress=show_progress, before_step=rescale if min_scale < 1 else None,
                 extra_loss=anchored_loss(model, len(kept), lambda i: reply_log_probs(model, kept[i]), anchor_weight,
                                          anchor_loss, seed) if kept else None)
    for m in lora:
        m.scaling["default"] = full[id(m)]
    delta = lora_delta(model)
    families = sorted({r["family"] for r in records})
    save_adapter(delta, out_dir, base_model_name=str(policy_dir), fingerprint=fingerprint, target_modules=list(TARGETS),
                 metadata={"expert": families, "steps": steps, "episodes": len(records), "replay": len(replay),
                           "anchors": len(kept), "anchor_weight": anchor_weight, "anchor_loss": anchor_loss,
                           "min_scale": min_scale})
    report = {"families": families, "episodes": len(records), "replay": len(replay), "anchors": len(kept),
              "anchor_weight": anchor_weight, "anchor_loss": anchor_loss, "min_scale": min_scale,
              "rank": rank, "steps": steps,
              "first_loss": losses[0], "final_loss": sum(losses[-10:]) / len(losses[-10:])}
    (Path(out_dir) / "expert.json").write_text(json.dumps(report, indent=1))
    return report
