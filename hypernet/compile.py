"""Skill text → PEFT adapter folder, in one forward pass of the hypernetwork.

    compiler = Compiler.load(checkpoint_dir, base_config)      # base on `meta` is enough
    [delta] = compiler.compile([skill_text])
    compiler.compile_to_dir(skill_text, out_dir)               # PEFT folder + fingerprint + checkpoint id

A checkpoint with a command memory (hypernet.memory) adds the memory's down_proj adapter to
each skill's: the compiled ΔW is their sum.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from skillgraft.hypernet.checkpoint import CheckpointMeta, checkpoint_folder, checkpoint_ids, initial_id, load_checkpoint
from skillgraft.hypernet.encoder import SkillEncoder
from skillgraft.hypernet.hypernetwork import HypernetConfig, Hypernetwork, factors_to_deltas
from skillgraft.hypernet.lexicon import encoder_for, load_reading_base
from skillgraft.hypernet.lora import LoraDelta, concat
from skillgraft.hypernet.memory import SPEC as MEMORY_SPEC, CommandMemory, load_memory
from skillgraft.hypernet.peft_io import BaseMismatchError, adapter_files, model_fingerprint, save_adapter
from skillgraft.hypernet.targets import find_targets, meta_model


def _base_name(model: torch.nn.Module, given: str | None) -> str | None:
    if given:
        return given
    config = getattr(model, "config", None)
    name = getattr(config, "_name_or_path", None) or getattr(config, "name_or_path", None)
    return name or getattr(config, "model_type", None)


class Compiler:
    def __init__(self, net: Hypernetwork, meta: CheckpointMeta, encoder: SkillEncoder, checkpoint_id: str,
                 memory: CommandMemory | None = None, text_id: str | None = None):
        self.net = net.eval()
        self.meta = meta
        self.encoder = encoder
        self.checkpoint_id = checkpoint_id
        self.memory = memory
        self._text_id = text_id or checkpoint_id  # the checkpoint's id without its memory

    def beside_text(self) -> "Compiler":
        """The compiler for skills whose text the prompt shows too: the hypernetwork alone. A
        command memory's keys are the skill's own tokens, so beside the text in the prompt it
        fires on the text itself and disturbs the policy's reading of it."""
        if self.memory is None:
            return self
        return Compiler(self.net, self.meta, self.encoder, self._text_id)

    @classmethod
    def load(
        cls,
        checkpoint: str | Path | None,
        base_config: Any,
        *,
        config: HypernetConfig | None = None,
        base_model: torch.nn.Module | None = None,
        tokenizer: Any = None,
        base_model_name: str | None = None,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> "Compiler":
        """A compiler for the base model described by `base_config`.

        `base_config` is a transformers config, a model folder, or a model (a `meta`-device one
        will do). With `checkpoint=None` the hypernetwork is freshly initialised from `config`
        (seeded), which compiles every skill to ΔW = 0. The "base-hidden" encoder and a lexical
        hypernetwork also need the real `base_model` and its `tokenizer`; a lexical one, or one
        with a command memory, loads them from the folder `base_config` names when not given.
        """
        model = meta_model(base_config)
        fingerprint = model_fingerprint(model)
        if checkpoint is None:
            cfg = config or HypernetConfig()
            spec = find_targets(model, cfg.target_modules)
            meta = CheckpointMeta(cfg, spec, _base_name(model, base_model_name), fingerprint)
            torch.manual_seed(seed)
            net = Hypernetwork(cfg, spec)
            ckpt_id = text_id = initial_id(meta, seed)
        else:
            net, meta = load_checkpoint(checkpoint, device)
            if meta.fingerprint != fingerprint:
                raise BaseMismatchError(
                    f"hypernetwork {checkpoint} was trained for base model {meta.base_model_name or '?'} "
                    f"(fingerprint {meta.fingerprint}), not for this one (fingerprint {fingerprint}); "
                    "train a hypernetwork for this base model first."
                )
            ckpt_id, text_id = checkpoint_ids(checkpoint)
            if base_model_name:
                meta.base_model_name = base_model_name
        folder = None if checkpoint is None else checkpoint_folder(checkpoint)
        memory_at = folder if folder is not None and (folder / MEMORY_SPEC).is_file() else None
        if (meta.config.lexical_targets or memory_at is not None) and base_model is None:
            base_model, tokenizer = load_reading_base(base_config)
        encoder = encoder_for(meta.config, base_model, tokenizer)
        if encoder.dim != meta.config.encoder_dim:
            raise ValueError(f"encoder {encoder.name} gives {encoder.dim}-d vectors, the hypernetwork expects {meta.config.encoder_dim}")
        memory = load_memory(memory_at, base_model, tokenizer) if memory_at is not None else None
        return cls(net.to(device), meta, encoder, ckpt_id, memory, text_id)

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device

    @torch.inference_mode()
    def compile(self, texts: Sequence[str]) -> list[LoraDelta]:
        """One adapter per text; all texts go through the encoder and the hypernetwork together."""
        if not texts:
            return []
        if any(not t.strip() for t in texts):
            raise ValueError("cannot compile an empty skill text")
        encoded = self.encoder.encode(list(texts)).to(self.device)
        deltas = factors_to_deltas(self.net(encoded))
        if self.memory is None:
            return deltas
        return [concat([delta, written]) for delta, written in zip(deltas, self.memory.write(texts))]

    def target_modules(self, delta: LoraDelta | None = None) -> list[str]:
        """What a compiled adapter wraps: the hypernetwork's module kinds, and the memory's modules by
        their paths (it fills a band of layers, not every down_proj), those `delta` holds where given
        (a skill with no literal edit writes none)."""
        written = self.memory.modules() if self.memory else []
        return list(self.meta.config.target_modules) + [m for m in written if delta is None or m in delta]

    def _described(self, delta: LoraDelta, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        return dict(
            base_model_name=self.meta.base_model_name,
            fingerprint=self.meta.fingerprint,
            target_modules=self.target_modules(delta),
            hypernet_ckpt=self.checkpoint_id,
            metadata={"kind": "compiled", "rank": self.meta.config.rank, **dict(metadata or {})},
        )

    def files(self, delta: LoraDelta, metadata: Mapping[str, Any] | None = None) -> dict[str, bytes]:
        """The adapter folder's files for one compiled delta, in memory (for the store to write once)."""
        return adapter_files(delta, **self._described(delta, metadata))

    def save(self, delta: LoraDelta, out_dir: str | Path, metadata: Mapping[str, Any] | None = None) -> Path:
        return save_adapter(delta, out_dir, **self._described(delta, metadata))

    def compile_to_dir(self, text: str, out_dir: str | Path, metadata: Mapping[str, Any] | None = None) -> Path:
        """Compiles one skill and writes it as a PEFT adapter folder; returns the folder."""
        [delta] = self.compile([text])
        return self.save(delta, out_dir, metadata)

    def compile_to_dirs(self, texts: Sequence[str], out_dirs: Sequence[str | Path]) -> list[Path]:
        if len(texts) != len(out_dirs):
            raise ValueError(f"{len(texts)} texts but {len(out_dirs)} output folders")
        return [self.save(d, o) for d, o in zip(self.compile(texts), out_dirs)]
