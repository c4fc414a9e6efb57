"""Evaluation on held-out seeds: episodes in real sandboxes, in parallel, per condition.

Conditions: "none" (no skill), "context" (the family's skill text in the prompt),
"parametric" (the skill compiled by the hypernetwork into a LoRA adapter, text not in the
prompt), "both". Each episode draws one of its family's paraphrases from its seed.
"""
from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from skillgraft.agent.episodes import EpisodeJob, EpisodeRunner
from skillgraft.agent.loadout import NOTHING, GivenSkill, Loadout, make_loadout
from skillgraft.agent.models.base import Model
from skillgraft.agent.seams import SkillCompiler
from skillgraft.agent.unstick import Unstick
from skillgraft.evolve.intervals import SuccessRate
from skillgraft.skillworld import library
from skillgraft.skillworld.families import GROUPS
from skillgraft.skillworld.generate import HELDOUT_START, WorldTask, generate

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


def world_compiler(hypernet: Path, policy: Path) -> SkillCompiler:
    """The compiler of a SkillWorld hypernetwork for the policy it was trained beside."""
    from skillgraft.hypernet.compile import Compiler

    return Compiler.load(hypernet, str(policy))


def episode_loadout(model: Model, skill: library.WorldSkill, condition: str, compiler: SkillCompiler | None,
                    cache: Path) -> Loadout:
    """What an episode under `condition` gets: nothing, or its skill's recipe as the condition says."""
    if condition == "none":
        return NOTHING
    return make_loadout(None, model, [GivenSkill.of_body(skill.name, skill.body)], condition, compiler=compiler, cache=cache)


def run_eval(model_factory: Callable[[WorldTask], Model], condition: str, families: Sequence[str], episodes: int,
             *, workers: int = 2, compiler: SkillCompiler | None = None,
             sandbox: str = "docker", first_seed: int = HELDOUT_START,
             on_result: Callable[[EpisodeResult], None] | None = None,
             runner: EpisodeRunner | None = None, unstick: Unstick | None = None) -> list[EpisodeResult]:
    """Runs `episodes` held-out episodes of each family under one condition (with `unstick`, each
    run goes back and draws again as `skillgraft run` does: agent.unstick).

    model_factory(task) gives the model for an episode (it may hand back one cached per thread).
    Each paraphrase is compiled once per run of the evaluation, into a folder kept for it. With a
    runner (a Ray cluster's, say), the loadouts are made here and the episodes run on its workers.
    """
    from skillgraft.agent.runner import run_task

    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; choose one of {', '.join(CONDITIONS)}")
    if condition in ("parametric", "both") and compiler is None:
        raise ValueError(f"condition {condition!r} needs a hypernetwork to compile skills")
    cache = Path(tempfile.mkdtemp(prefix="skillworld-adapters-"))

    def loadout_for(model: Model, family: str, seed: int) -> Loadout:
        if condition == "none":  # a learning family has no skill to look up
            return NOTHING
        return episode_loadout(model, episode_skill(family, seed), condition, compiler, cache)

    def one(family: str, seed: int) -> EpisodeResult:
        wt = generate(family, seed)
        model = model_factory(wt)
        loadout = loadout_for(model, family, seed)
        result = run_task(wt.task(), model, sandbox=sandbox, loadout=loadout, unstick=unstick)
        return EpisodeResult(family, seed, condition, result.success, result.steps, result.exit_status)

    jobs = [(f, first_seed + i) for i in range(episodes) for f in families]
    out: list[EpisodeResult] = []
    if runner is not None:
        runs = []
        for family, seed in jobs:
            wt = generate(family, seed)
            loadout = loadout_for(model_factory(wt), family, seed)
            runs.append(EpisodeJob(wt.task(), loadout, tag=(family, seed), unstick=unstick))
        for job, result in runner.run_all(runs):
            res = EpisodeResult(*job.tag, condition, result.success, result.steps, result.exit_status)
            out.append(res)
            if on_result:
                on_result(res)
        return sorted(out, key=lambda r: (r.family, r.seed))
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
