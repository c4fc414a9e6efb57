"""Skill texts as adapters: compiled once per (skill version, hypernetwork checkpoint), and
several adapters joined into the one a run activates.

A skill version's adapter is compiled in memory and written once, straight into the store. A
text that is not a store version (a candidate revision, a benchmark's paraphrase) is compiled
into a cache folder named by its digest and the checkpoint. Joining writes one folder per
combination, cached by the parts it joins; a single part is used where it lies.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from skillgraft.hypernet.lora import LoraDelta, ranks
from skillgraft.hypernet.merges import merge
from skillgraft.hypernet.peft_io import WEIGHTS_FILE, load_adapter, save_adapter
from skillgraft.skills.schema import Adapter, SkillVersion, saved_id
from skillgraft.agent.loadout import AdapterPart
from skillgraft.agent.seams import AdapterStore, RunTuner, SkillCompiler
from skillgraft.agent.trajectory import conversation_without_skills


def compiled_adapter(store: AdapterStore, compiler: SkillCompiler, version: SkillVersion) -> Adapter:
    """The store's adapter for this version under this compiler, compiling it on first use; a
    compiler that tunes (seams.RunTuner) tunes a version summarised from a run on that run."""
    hit = store.find_compiled(saved_id(version.id), compiler.checkpoint_id)
    if hit is not None:
        return hit
    run = store.trajectory_path(version.trajectory_id) if version.trajectory_id is not None else None
    delta = _delta(compiler, version.text, run)
    provenance = {"skill_version_id": version.id, "hypernet_ckpt": compiler.checkpoint_id}
    if run is not None and isinstance(compiler, RunTuner):
        provenance["tuned_on_trajectory"] = version.trajectory_id
    files = compiler.files(delta, metadata={"skill": version.skill_name, "skill_version": version.number})
    rank = max(ranks(delta).values())
    return store.add_adapter(
        files, kind="skill", base_fingerprint=compiler.meta.fingerprint or "unknown", rank=rank, alpha=rank,
        target_modules=compiler.target_modules(delta), provenance=provenance,
        skill_version_id=version.id, hypernet_ckpt=compiler.checkpoint_id,
    )


def compiled_text(compiler: SkillCompiler, text: str, cache: Path, run: Path | None = None) -> AdapterPart:
    """A text outside the store, compiled once per checkpoint into `cache` (and, by a compiler
    that tunes, tuned on the run it was summarised from, when given)."""
    tuned_on = f"\0{Path(run).resolve()}" if run is not None and isinstance(compiler, RunTuner) else ""
    digest = hashlib.sha256((text + tuned_on).encode()).hexdigest()[:20]
    key = f"text:{compiler.checkpoint_id}:{digest}"
    out = Path(cache) / "compiled" / hashlib.sha256(key.encode()).hexdigest()[:20]
    if not (out / WEIGHTS_FILE).is_file():
        delta = _delta(compiler, text, run)
        _publish(out, lambda tmp: compiler.save(delta, tmp))
    return AdapterPart(key, out)


def _delta(compiler: SkillCompiler, text: str, run: Path | None) -> LoraDelta:
    """The text's adapter: compiled, or, by a compiler that tunes, trained on the run it came from."""
    if run is not None and isinstance(compiler, RunTuner):
        return compiler.compile_on_runs(text, [conversation_without_skills(run)])
    [delta] = compiler.compile([text])
    return delta


def composed_key(parts: Sequence[AdapterPart], weights: Sequence[float]) -> str:
    return hashlib.sha256(repr(([p.key for p in parts], [float(w) for w in weights])).encode()).hexdigest()[:20]


def compose(parts: Sequence[AdapterPart], cache: Path | None, weights: Sequence[float] | None = None) -> tuple[Path | None, str | None]:
    """One PEFT folder holding Σ wᵢ ΔWᵢ of the parts, exactly (rank concatenation), and its key.

    Folders are cached under `cache`/composed by the parts and weights they join: the parts are
    immutable, so the same combination is the same file. (None, None) when there is nothing to join.
    """
    if not parts:
        return None, None
    weights = [1.0] * len(parts) if weights is None else [float(w) for w in weights]
    if len(parts) != len(weights):
        raise ValueError(f"{len(parts)} adapters but {len(weights)} weights")
    key = composed_key(parts, weights)
    if len(parts) == 1 and weights[0] == 1.0:
        return parts[0].path, key
    if cache is None:
        raise ValueError("joining adapters needs a cache folder to write the joined one into")
    out = Path(cache) / "composed" / key
    if not (out / WEIGHTS_FILE).is_file():
        loaded = [load_adapter(p.path) for p in parts]
        info = loaded[0][1]
        _publish(out, lambda tmp: save_adapter(
            merge("cat", [d for d, _ in loaded], weights), tmp, base_model_name=info.base_model_name,
            fingerprint=info.fingerprint, target_modules=sorted({t for _, i in loaded for t in i.target_modules}),
            metadata={"composed_of": [{"part": p.key, "weight": w} for p, w in zip(parts, weights)]}))
    return out, key


def _publish(out: Path, write) -> None:
    """Writes a folder beside `out` and renames it into place: a reader sees all of it or none."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write(tmp)
        os.replace(tmp, out)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / WEIGHTS_FILE).is_file():  # another process published the same folder first
            raise
