"""What a CycleQD run keeps in the store: the run row, archive cells, child adapters, cached scores.

Archive entries point at adapters in the store; weights are never copied into the archive. A
child is written to the store only when some archive takes it, as CycleQD keeps no losers.
"""
from __future__ import annotations

import shutil
import tempfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from skillgraft.evolve.cycleqd.archive import Cell, Elite
from skillgraft.evolve.cycleqd.candidate import Candidate
from skillgraft.hypernet.lora import LoraDelta
from skillgraft.hypernet.peft_io import AdapterInfo, load_adapter, save_adapter
from skillgraft.skills.schema import saved_id

if TYPE_CHECKING:
    from skillgraft.evolve.cycleqd.evaluators import Evaluator
    from skillgraft.skills.store import Store

ADAPTER_KIND = "checkpoint"


@dataclass
class StoredEntry:
    task: str
    cell: Cell
    elite: Elite


@dataclass
class RunRecorder:
    """The search's only door to the store, so the search itself reads as the algorithm."""

    store: Store
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cycleqd-")))
    max_cached: int = 64  # adapters kept in memory; an archive of Llama-8B rank-16 elites is 26 MiB each
    _deltas: OrderedDict[Any, LoraDelta] = field(default_factory=OrderedDict, init=False, repr=False)
    _infos: dict[Any, AdapterInfo] = field(default_factory=dict, init=False, repr=False)

    # ------------------------------------------------------------ run rows

    def create_run(self, config: Mapping[str, Any]) -> int:
        return saved_id(self.store.create_qd_run(dict(config)).id)

    def load_run(self, run_id: int) -> tuple[dict, int, dict]:
        """(config, completed generations, state) of a stored run."""
        row = self.store.qd_run(run_id)
        if row is None:
            raise LookupError(f"no CycleQD run {run_id} in the store")
        return dict(row.config), int(row.generation), dict(row.state or {})

    def finish_generation(self, run_id: int, generation: int, state: Mapping[str, Any]) -> None:
        self.store.update_qd_run(run_id, generation, dict(state))

    def entries(self, run_id: int, task: str) -> list[StoredEntry]:
        out = []
        for row in self.store.archive(run_id, task):
            elite = Elite(adapter_id=row.adapter_id, scores={k: float(v) for k, v in row.scores.items()})
            out.append(StoredEntry(task=task, cell=tuple(int(c) for c in row.cell), elite=elite))
        return out

    def put_entry(self, run_id: int, task: str, cell: Cell, elite: Elite) -> None:
        # An elite of a stored run is a stored adapter: its id is the store's.
        self.store.put_archive_entry(run_id, task, tuple(cell), int(elite.adapter_id), elite.score(task), dict(elite.scores))

    # ------------------------------------------------------------ adapters

    def delta(self, adapter_id: Any) -> LoraDelta:
        """The adapter's ΔW factors, read from its stored folder and kept while recently used."""
        if adapter_id in self._deltas:
            self._deltas.move_to_end(adapter_id)
            return self._deltas[adapter_id]
        delta, info = load_adapter(self.store.adapter_path(adapter_id))
        self._deltas[adapter_id] = delta
        self._infos[adapter_id] = info
        while len(self._deltas) > self.max_cached:
            self._deltas.popitem(last=False)
        return delta

    def info(self, adapter_id: Any) -> AdapterInfo:
        if adapter_id not in self._infos:
            self.delta(adapter_id)
        return self._infos[adapter_id]

    def folder(self, adapter_id: Any) -> Path:
        return Path(self.store.adapter_path(adapter_id))

    def write_folder(self, candidate: Candidate, like: AdapterInfo, metadata: Mapping[str, Any] | None = None) -> Path:
        """Writes the candidate as a PEFT folder for the base model `like` belongs to."""
        if candidate.folder is None:
            out = self.scratch / candidate.content_hash[:16]
            if out.exists():
                shutil.rmtree(out)
            candidate.folder = save_adapter(
                candidate.delta,
                out,
                base_model_name=like.base_model_name,
                fingerprint=like.fingerprint,
                target_modules=like.target_modules or None,
                metadata=dict(metadata or {}),
            )
        return candidate.folder

    def add_child(self, candidate: Candidate, like: AdapterInfo, provenance: Mapping[str, Any], name: str) -> Any:
        folder = self.write_folder(candidate, like, provenance)
        record = self.store.add_adapter(
            folder,
            kind=ADAPTER_KIND,
            base_fingerprint=like.fingerprint or "",
            rank=max(lr.rank for lr in candidate.delta.values()),
            alpha=float(max(lr.rank for lr in candidate.delta.values())),
            target_modules=list(like.target_modules),
            provenance=dict(provenance),
            name=name,
        )
        candidate.adapter_id = record.id
        # Later parents are read back from the store's copy; identical bytes, so identical to a resumed run.
        self._deltas.pop(record.id, None)
        shutil.rmtree(folder, ignore_errors=True)
        candidate.folder = None
        return record.id

    # ------------------------------------------------------------ scores

    def cached(self, content_hash: str, task: str) -> float | None:
        value = self.store.cached_score(content_hash, task)
        if value is None:
            return None
        return float(getattr(value, "score", value))

    def put_cached(self, content_hash: str, task: str, score: float) -> None:
        self.store.put_cached_score(content_hash, task, float(score))

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def score_candidates(
    recorder: RunRecorder,
    evaluator: Evaluator,
    candidates: Sequence[Candidate],
    tasks: Sequence[str],
    like: AdapterInfo,
    *,
    namespace: str = "",
) -> tuple[list[dict[str, float]], int]:
    """Every candidate's score on every task, from the cache where possible; returns (scores, fresh evaluations).

    `namespace` separates cache entries of different evaluation sets that share task names
    (the validation sets of the final merge).
    """
    def key_of(task: str) -> str:
        return f"{namespace}:{task}" if namespace else task

    known: dict[tuple[str, str], float] = {}
    todo: list[tuple[Candidate, str]] = []
    queued: set[tuple[str, str]] = set()
    for c in candidates:
        for task in tasks:
            key = (c.content_hash, task)
            if key in known or key in queued:
                continue
            hit = recorder.cached(c.content_hash, key_of(task))
            if hit is not None:
                known[key] = hit
            else:
                queued.add(key)
                todo.append((c, task))
    if todo:
        if getattr(evaluator, "needs_folder", True):
            for c, _ in todo:
                if c.folder is None:
                    c.folder = recorder.folder(c.adapter_id) if c.adapter_id is not None else recorder.write_folder(c, like)
        values = evaluator.evaluate(todo)
        if len(values) != len(todo):
            raise RuntimeError(f"evaluator returned {len(values)} scores for {len(todo)} requests")
        for (c, task), value in zip(todo, values):
            known[(c.content_hash, task)] = float(value)
            recorder.put_cached(c.content_hash, key_of(task), float(value))
    return [{t: known[(c.content_hash, t)] for t in tasks} for c in candidates], len(todo)
