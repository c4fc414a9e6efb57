"""A child (or starting checkpoint) as the evaluators see it: its task vector, content hash and PEFT folder."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import torch

from skillgraft.hypernet.lora import LoraDelta, LowRank


def content_hash(delta: Mapping[str, LowRank]) -> str:
    """Hex sha256 over module names, factor shapes and float32 bytes, in sorted module order.

    Scores are cached under this key, so a child that crossover and mutation happen to
    reproduce (or a resumed run regenerating the same child) is never evaluated twice.
    """
    digest = hashlib.sha256()
    for name in sorted(delta):
        lr = delta[name]
        B = lr.B.detach().to("cpu", torch.float32).contiguous()
        A = lr.A.detach().to("cpu", torch.float32).contiguous()
        digest.update(f"{name}:{tuple(B.shape)}:{tuple(A.shape)}\n".encode())
        digest.update(B.numpy().tobytes())
        digest.update(A.numpy().tobytes())
    return digest.hexdigest()  # 64 hex characters, the width the store keys scores by


@dataclass
class Candidate:
    delta: LoraDelta
    content_hash: str
    folder: Path | None = None  # PEFT folder for evaluators that run a model with the adapter
    adapter_id: int | str | None = None  # set once the adapter is in the store

    @classmethod
    def of(cls, delta: LoraDelta, folder: Path | None = None, adapter_id: int | str | None = None) -> "Candidate":
        return cls(delta=delta, content_hash=content_hash(delta), folder=folder, adapter_id=adapter_id)
