"""Skill versions as adapters: compiled once per (skill version, hypernetwork checkpoint), and
several of them joined with the global adapter into the one adapter a run activates."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hypernet.lora import concat
from hypernet.peft_io import load_adapter, save_adapter
from skills.schema import Adapter, SkillVersion


def compiled_adapter(store, compiler, version: SkillVersion) -> Adapter:
    """The store's adapter for this version under this compiler, compiling it on first use."""
    hit = store.find_compiled(version.id, compiler.checkpoint_id)
    if hit is not None:
        return hit
    with tempfile.TemporaryDirectory(prefix="skillgraft-compile-") as tmp:
        folder = compiler.compile_to_dir(version.text, Path(tmp) / "adapter",
                                         metadata={"skill": version.skill_name, "skill_version": version.number})
        _delta, info = load_adapter(folder)
        return store.add_adapter(
            folder, kind="skill", base_fingerprint=info.fingerprint or "unknown", rank=info.rank, alpha=info.rank,
            target_modules=list(info.target_modules),
            provenance={"skill_version_id": version.id, "hypernet_ckpt": compiler.checkpoint_id},
            skill_version_id=version.id, hypernet_ckpt=compiler.checkpoint_id,
        )


def compose(store, adapter_ids: Sequence[int], cache: Path, weights: Sequence[float] | None = None) -> Path | None:
    """One PEFT folder holding Σ wᵢ ΔWᵢ of the given adapters, exactly (rank concatenation).

    Folders are cached by the ids and weights they join: adapters are immutable, so the same
    combination is the same file. None when there is nothing to join.
    """
    ids = list(adapter_ids)
    if not ids:
        return None
    weights = [1.0] * len(ids) if weights is None else [float(w) for w in weights]
    if len(ids) == 1 and weights[0] == 1.0:
        return store.adapter_path(ids[0])
    key = hashlib.sha256(repr((ids, weights)).encode()).hexdigest()[:20]
    out = Path(cache) / key
    if (out / "adapter_model.safetensors").is_file():
        return out
    loaded = [load_adapter(store.adapter_path(i)) for i in ids]
    info = loaded[0][1]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=out.parent))
    try:
        save_adapter(concat([d for d, _ in loaded], weights), tmp, base_model_name=info.base_model_name,
                     fingerprint=info.fingerprint, target_modules=sorted({t for _, i in loaded for t in i.target_modules}),
                     metadata={"composed_of": [{"adapter_id": i, "weight": w} for i, w in zip(ids, weights)]})
        os.replace(tmp, out)  # a reader sees the whole folder or none of it
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / "adapter_model.safetensors").is_file():
            raise
    return out
