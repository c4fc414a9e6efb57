"""Hypernetwork checkpoints: a folder of weights, description and (for resuming) training state.

    hypernet.safetensors   the hypernetwork's weights
    hypernet.json          config, target modules, base model name and fingerprint, training summary
    train_state.pt         optimizer, step, RNG and data split, only needed to resume training
    memory.json            optional: a command memory that compiling adds (hypernet.memory)

The checkpoint id is a content hash of the weights and of what shapes their meaning (config,
targets, base fingerprint), so two folders with the same weights share an id and any training
step changes it. Compiled adapters are cached under it.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from skillgraft.hypernet.hypernetwork import HypernetConfig, Hypernetwork
from skillgraft.hypernet.memory import RULES as MEMORY_RULES, SPEC as MEMORY
from skillgraft.hypernet.targets import TargetSpec

WEIGHTS = "hypernet.safetensors"
META = "hypernet.json"
TRAIN_STATE = "train_state.pt"


@dataclass
class CheckpointMeta:
    config: HypernetConfig
    spec: TargetSpec
    base_model_name: str | None
    fingerprint: str
    training: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict:
        return {"config": self.config.to_dict(), "spec": self.spec.to_dict(), "fingerprint": self.fingerprint}


def checkpoint_folder(path: str | Path) -> Path:
    path = Path(path)
    return path.parent if path.name in (WEIGHTS, META) else path


def checkpoint_ids(path: str | Path) -> tuple[str, str]:
    """(the checkpoint's identity, the same without its command memory), from one read of the
    weights: their digest and the meta's identity, then the memory's spec where it has one."""
    folder = checkpoint_folder(path)
    digest = hashlib.sha256((folder / WEIGHTS).read_bytes())
    identity = meta_from_json(json.loads((folder / META).read_text())).identity()
    digest.update(json.dumps(identity, sort_keys=True).encode())
    bare = "hn-" + digest.hexdigest()[:16]
    if not (folder / MEMORY).is_file():
        return bare, bare
    digest.update((folder / MEMORY).read_bytes())  # a command memory changes what every skill compiles to
    digest.update(MEMORY_RULES.encode())
    return "hn-" + digest.hexdigest()[:16], bare


def checkpoint_id(path: str | Path) -> str:
    return checkpoint_ids(path)[0]


def initial_id(meta: CheckpointMeta, seed: int) -> str:
    """Id of a freshly initialised (untrained) hypernetwork."""
    blob = json.dumps({**meta.identity(), "seed": seed}, sort_keys=True).encode()
    return "hn-init-" + hashlib.sha256(blob).hexdigest()[:12]


def meta_from_json(d: dict) -> CheckpointMeta:
    return CheckpointMeta(
        config=HypernetConfig.from_dict(d["config"]),
        spec=TargetSpec.from_dict(d["spec"]),
        base_model_name=d.get("base_model_name"),
        fingerprint=d["fingerprint"],
        training=d.get("training", {}),
    )


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(net: Hypernetwork, meta: CheckpointMeta, out_dir: str | Path, train_state: dict | None = None) -> str:
    """Writes the checkpoint folder (each file atomically) and returns its id."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (WEIGHTS + ".tmp")
    save_file({k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()}, str(tmp))
    os.replace(tmp, folder / WEIGHTS)
    body = {
        "config": meta.config.to_dict(),
        "spec": meta.spec.to_dict(),
        "base_model_name": meta.base_model_name,
        "fingerprint": meta.fingerprint,
        "training": meta.training,
    }
    _write_atomic(folder / META, json.dumps(body, indent=2, sort_keys=True, default=str).encode())
    if train_state is not None:
        tmp_state = folder / (TRAIN_STATE + ".tmp")
        torch.save(train_state, tmp_state)
        os.replace(tmp_state, folder / TRAIN_STATE)
    return checkpoint_id(folder)


def read_meta(path: str | Path) -> CheckpointMeta:
    folder = checkpoint_folder(path)
    if not (folder / META).is_file():
        raise FileNotFoundError(f"{folder} is not a hypernetwork checkpoint (no {META})")
    return meta_from_json(json.loads((folder / META).read_text()))


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> tuple[Hypernetwork, CheckpointMeta]:
    folder = checkpoint_folder(path)
    meta = read_meta(folder)
    net = Hypernetwork(meta.config, meta.spec)
    net.load_state_dict(load_file(str(folder / WEIGHTS)))
    return net.to(device).eval(), meta


def load_train_state(path: str | Path) -> dict | None:
    state = checkpoint_folder(path) / TRAIN_STATE
    return torch.load(state, weights_only=False) if state.is_file() else None
