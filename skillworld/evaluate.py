"""Evaluation on held-out seeds: episodes in real sandboxes, in parallel, per condition.

Conditions: "none" (no skill), "context" (the family's skill text in the prompt),
"parametric" (the skill compiled by the hypernetwork into a LoRA adapter, text not in the
prompt), "both". Each episode draws one of its family's paraphrases from its seed.
"""
from __future__ import annotations

import random
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from evolve.intervals import SuccessRate
from skillworld import library
from skillworld.families import GROUPS
from skillworld.generate import HELDOUT_START, WorldTask, generate

CONDITIONS = ("none", "context", "parametric", "both")


@dataclass
class EpisodeResult:
    family: str
    seed: int
    condition: str
    success: bool
    steps: int
    exit_status: str


@dataclass
class Cell(SuccessRate):
    name: str  # a family or a family group
    condition: str
    successes: int
    episodes: int
    mean_steps: float


def episode_skill(family: str, seed: int) -> library.WorldSkill:
    return library.pick(family, random.Random(f"eval:{family}:{seed}"), seed)


class AdapterCache:
    """Compiles each skill paraphrase once per hypernetwork, into a folder kept for the run."""

    def __init__(self, hypernet: Path, policy: Path):
        from hypernet.compile import Compiler

        self.compiler = Compiler.load(hypernet, str(policy))
        self.folder = Path(tempfile.mkdtemp(prefix="skillworld-adapters-"))
        self.lock = threading.Lock()
        self.done: dict[str, Path] = {}

    def __call__(self, skill: library.WorldSkill) -> Path:
        with self.lock:
            if skill.name not in self.done:
                self.done[skill.name] = self.compiler.compile_to_dir(skill.body, self.folder / skill.name)
            return self.done[skill.name]


def run_eval(model_factory: Callable[[WorldTask], object], condition: str, families: Sequence[str], episodes: int,
             *, workers: int = 2, adapters: Callable[[library.WorldSkill], Path] | None = None,
             sandbox: str = "docker", first_seed: int = HELDOUT_START,
             on_result: Callable[[EpisodeResult], None] | None = None) -> list[EpisodeResult]:
    """Runs `episodes` held-out episodes of each family under one condition.

    model_factory(task) gives the model for an episode (it may hand back one cached per thread).
    """
    from agent.runner import run_task

    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; choose one of {', '.join(CONDITIONS)}")
    if condition in ("parametric", "both") and adapters is None:
        raise ValueError(f"condition {condition!r} needs a hypernetwork to compile skills")

    def one(family: str, seed: int) -> EpisodeResult:
        wt = generate(family, seed)
        skill = episode_skill(family, seed)
        in_context = [(skill.name, skill.body)] if condition in ("context", "both") else []
        adapter = adapters(skill) if condition in ("parametric", "both") else None
        result = run_task(wt.task(), model_factory(wt), sandbox=sandbox, skills=in_context, adapter_dir=adapter)
        return EpisodeResult(family, seed, condition, result.success, result.steps, result.exit_status)

    jobs = [(f, first_seed + i) for i in range(episodes) for f in families]
    out: list[EpisodeResult] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, f, s) for f, s in jobs]
        for fut in as_completed(futures):
            res = fut.result()
            out.append(res)
            if on_result:
                on_result(res)
    return sorted(out, key=lambda r: (r.family, r.seed))


def cells(results: Sequence[EpisodeResult], by: str = "group") -> list[Cell]:
    """Success per family group (by="group") or per family (by="family"), per condition."""
    keyed: dict[tuple[str, str], list[EpisodeResult]] = {}
    for r in results:
        names = [g for g, fams in GROUPS.items() if r.family in fams] if by == "group" else [r.family]
        for name in names:
            keyed.setdefault((name, r.condition), []).append(r)
    return [Cell(name, cond, sum(r.success for r in rs), len(rs), sum(r.steps for r in rs) / len(rs))
            for (name, cond), rs in sorted(keyed.items())]


class ThreadModels:
    """One model per worker thread: an adapter is activated on a model for one episode at a time."""

    def __init__(self, make: Callable[[], object]):
        self.make = make
        self.local = threading.local()

    def __call__(self, _task: WorldTask) -> object:
        if not hasattr(self.local, "model"):
            self.local.model = self.make()
        return self.local.model
