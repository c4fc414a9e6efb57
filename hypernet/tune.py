"""A learned skill's adapter trained on the run it was learned from.

The hypernetwork compiles a recipe in one forward pass, and for recipes like the ones it was
trained on the adapter carries the recipe. A recipe the learner induced for a new kind of bug is
unlike those: its edit is a template whose values the task fills in, and compiled, it moves the
policy towards the fixes it already knows instead. Tuning takes a few gradient steps on the
replies of the run the recipe was summarised from, with no skill text in the prompt, so that the
adapter, not the prompt, has to carry what the run did.

    compiler = TunedCompiler(Compiler.load(checkpoint, base_config), base_config, Tuning(steps=10))
    [delta] = compiler.compile([text])                        # the hypernetwork's adapter, as before
    delta = compiler.compile_on_runs(text, [conversation])    # trained on the run (skills left out)

By default (`Tuning.start` "fresh") the steps train a new LoRA on the hypernetwork's module kinds
at its rank (PEFT's initialisation, B = 0) at 5e-3: the skill's text then goes into no weight,
only into which tasks retrieve the adapter. "compiled" tunes the hypernetwork's adapter instead,
at a tenth of that rate (its factors are large, and at 5e-3 tuning them diverges); it keeps the
compiled adapter's modules and ranks. Either is stored, joined and folded into the global adapter
like any compiled skill, under a checkpoint id that names the tuning, so tuned and untuned
adapters of one version are cached apart.

Anchors (`Tuning.anchor_weight`, `TunedCompiler.anchored`): runs of other tasks, as the model
runs them now. Each step then also keeps the model's replies on one of them as the base has them
(hypernet.anchor), so that the adapter moves what its run did and leaves other tasks alone; the
learner uses such adapters for the global adapter, which every run gets.
"""
from __future__ import annotations

import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from skillgraft.hypernet.anchor import anchored_loss, check_anchor_loss, replies_log_probs
from skillgraft.hypernet.fit import Schedule, fit, pad_id
from skillgraft.hypernet.lexicon import load_reading_base
from skillgraft.hypernet.lora import LoraDelta
from skillgraft.hypernet.objectives import render_chat
from skillgraft.hypernet.peft_io import lora_delta, save_adapter


STARTS = ("compiled", "fresh")
LEARNING_RATES = {"compiled": 5e-4, "fresh": 5e-3}  # a compiled adapter's large factors diverge at 5e-3


@dataclass(frozen=True)
class Tuning:
    steps: int = 10
    lr: float | None = None  # None: LEARNING_RATES[start]
    start: str = "fresh"  # a fresh LoRA on the hypernetwork's modules, or the hypernetwork's adapter
    seed: int = 0
    max_tokens: int = 2048  # a longer run keeps its start
    # With anchors (runs of other tasks, as the model runs them now): each step adds this weight
    # times how far the adapter moves the model's replies on one of them (hypernet.anchor).
    anchor_weight: float = 0.0
    anchor_loss: str = "kl"

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"tuning takes at least one step, not {self.steps}")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"the tuning learning rate must be above 0, not {self.lr}")
        if self.start not in STARTS:
            raise ValueError(f"tuning starts from one of {', '.join(STARTS)}, not {self.start!r}")
        if self.anchor_weight < 0:
            raise ValueError(f"the anchor weight must be 0 or more, not {self.anchor_weight}")
        check_anchor_loss(self.anchor_loss)

    @property
    def rate(self) -> float:
        return self.lr if self.lr is not None else LEARNING_RATES[self.start]

    @property
    def tag(self) -> str:
        return f"tuned-{self.start}-{self.steps}x{self.rate:g}-seed{self.seed}"


@dataclass(frozen=True)
class FreshLora:
    """A LoRA no text went into: PEFT's initialisation (B = 0) on these module kinds at this rank."""

    target_modules: tuple[str, ...]
    rank: int


def tune_delta(start: LoraDelta | FreshLora, base_config: Any, conversations: Sequence[list[dict]],
               tuning: Tuning, anchors: Sequence[list[dict]] = ()) -> LoraDelta:
    """The adapter `start` after `tuning.steps` steps of next-token loss on the conversations'
    assistant replies (a reply marked `"train": False` is context only), on the base
    `base_config` names (a model folder, or a config whose `_name_or_path` is one), batch size 1,
    AdamW, a short warm-up. Only the adapter's factors train; the base stays as it was.
    With `anchors` and `tuning.anchor_weight`, each step also keeps the model's replies on one
    anchor conversation as the base has them (hypernet.anchor)."""
    from peft import LoraConfig, PeftModel, get_peft_model

    base, tokenizer = load_reading_base(base_config)
    examples = []
    for conversation in conversations:
        tokens = render_chat(tokenizer, conversation, tuning.max_tokens)
        if any(tokens.target):
            examples.append((tokens.ids, [int(t) for t in tokens.target]))
    if not examples:
        raise ValueError("no reply in the runs to tune on")
    kept = [(tokens.ids, tokens.target) for tokens in (render_chat(tokenizer, c, tuning.max_tokens) for c in anchors)
            if any(tokens.target)] if tuning.anchor_weight else []
    torch.manual_seed(tuning.seed)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        if isinstance(start, FreshLora):
            model = get_peft_model(base, LoraConfig(r=start.rank, lora_alpha=start.rank, lora_dropout=0.0,
                                                    target_modules=list(start.target_modules)))
        else:
            with tempfile.TemporaryDirectory(prefix="skillgraft-tune-") as tmp:
                # Each module named in full: PEFT wraps exactly the delta's modules, none at rank zero.
                save_adapter(start, tmp, base_model_name=None, fingerprint=None, target_modules=sorted(start))
                model = PeftModel.from_pretrained(base, tmp, is_trainable=True)
    schedule = Schedule(tuning.steps, 1, tuning.rate, min(3, tuning.steps), 0.0, tuning.seed)
    extra = anchored_loss(model, len(kept), lambda i: replies_log_probs(model, *kept[i]), tuning.anchor_weight,
                          tuning.anchor_loss, tuning.seed) if kept else None
    fit(model, examples, pad_id(tokenizer), schedule, label="tuning skill", show_progress=False, extra_loss=extra)
    tuned = lora_delta(model)
    if not isinstance(start, FreshLora) and set(tuned) != set(start):
        raise RuntimeError(f"tuning changed the adapter's modules: {sorted(set(tuned) ^ set(start))[:3]}")
    return tuned


class TunedCompiler:
    """A compiler whose adapters, for skills learned from a run, are trained on that run
    (`compile_on_runs`); texts with no run compile as the inner compiler compiles them."""

    def __init__(self, inner: Any, base_config: Any, tuning: Tuning, anchors: Sequence[list[dict]] = (),
                 anchors_key: str = ""):
        self.inner, self.base_config, self.tuning = inner, base_config, tuning
        self.meta = inner.meta
        self.anchors, self.anchors_key = list(anchors), anchors_key
        anchored = self.anchors and tuning.anchor_weight
        kept = f"+anchor-{tuning.anchor_loss}{tuning.anchor_weight:g}-{anchors_key}" if anchored else ""
        self.checkpoint_id = f"{inner.checkpoint_id}+{tuning.tag}{kept}"

    @property
    def wants_anchors(self) -> bool:
        return self.tuning.anchor_weight > 0 and not self.anchors

    def anchored(self, conversations: Sequence[list[dict]], key: str) -> "TunedCompiler":
        """This compiler keeping the model's replies on these conversations (runs of other tasks)
        as they are, `key` naming them in the checkpoint id (adapters tuned with other anchors are
        cached apart)."""
        return TunedCompiler(self.inner, self.base_config, self.tuning, conversations, key)

    def compile(self, texts: Sequence[str]) -> list[LoraDelta]:
        return self.inner.compile(texts)

    def compile_on_runs(self, text: str, conversations: Sequence[list[dict]]) -> LoraDelta:
        """The text's compiled adapter tuned on the conversations, or with `Tuning.start` "fresh",
        a new LoRA on the hypernetwork's module kinds at its rank trained on them (nothing compiled)."""
        config = self.meta.config
        if self.tuning.start == "fresh":
            start: LoraDelta | FreshLora = FreshLora(tuple(config.target_modules), config.rank)
        else:
            [start] = self.inner.compile([text])
        return tune_delta(start, self.base_config, conversations, self.tuning, self.anchors)

    def beside_text(self) -> "TunedCompiler":
        inner = self.inner.beside_text()
        return self if inner is self.inner else TunedCompiler(inner, self.base_config, self.tuning, self.anchors,
                                                              self.anchors_key)

    def target_modules(self, delta: LoraDelta | None = None) -> list[str]:
        return self.inner.target_modules(delta)

    def files(self, delta: LoraDelta, metadata: Mapping[str, Any] | None = None) -> dict[str, bytes]:
        return self.inner.files(delta, metadata)

    def save(self, delta: LoraDelta, out_dir: str | Path, metadata: Mapping[str, Any] | None = None) -> Path:
        return self.inner.save(delta, out_dir, metadata)
