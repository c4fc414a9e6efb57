"""CycleQD every K sessions: the global adapter's history is the population, task families are the
tasks, and the final merge replaces the global adapter only if it beats it on validation."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from skillgraft.agent.models.base import Model
from skillgraft.agent.task import Task

if TYPE_CHECKING:
    from skillgraft.evolve.cycleqd.search import GenerationStats
    from skillgraft.evolve.learn.loop import Learner

MAX_CHECKPOINTS = 6


def cycleqd_every(validation: Sequence[Task], model_factory: Callable[[], Model], *, generations: int = 2,
                  sandbox: str = "docker", image: str | None = None, seed: int = 0,
                  on_generation: Callable[[int, int], None] | None = None) -> Callable[[Learner, int], str | None]:
    """A `periodic` hook for Learner. Needs validation tasks of at least two families.
    `on_generation(done, generations)` is told when a search starts (0) and after each of its
    generations, so that a caller can show how far it is."""
    groups: dict[str, list[Task]] = defaultdict(list)
    for t in validation:
        groups[t.family or "tasks"].append(t)

    def run(learner: Learner, session_number: int) -> str | None:
        if len(groups) < 2:
            return "CycleQD skipped: it needs validation tasks of at least two families"
        from skillgraft.evolve.cycleqd import AgentEvaluator, CycleQDConfig, merge_and_promote, run_cycleqd

        seen, checkpoints = set(), []
        for rec in reversed(learner.store.global_history(learner.config.ema.name)):
            if rec.artifact_hash not in seen:  # rollbacks repeat weights; score each once
                seen.add(rec.artifact_hash)
                checkpoints.append(rec.id)
            if len(checkpoints) == MAX_CHECKPOINTS:
                break
        if not checkpoints:
            return "CycleQD skipped: no global adapter yet"
        # The learner's own runner (a Ray cluster's, say) scores the candidates where it runs the sessions.
        evaluator = AgentEvaluator(task_sets=dict(groups), model_factory=model_factory, sandbox=sandbox, image=image,
                                   workers=1, episodes=learner.episodes)

        def told(stats: GenerationStats) -> None:
            if on_generation is not None and stats.generation:  # 0: the starting checkpoints scored
                on_generation(stats.generation, generations)

        if on_generation is not None:
            on_generation(0, generations)
        try:
            config = CycleQDConfig(generations=generations, seed=seed + session_number, rank=learner.config.ema.rank)
            result = run_cycleqd(learner.store, checkpoints, sorted(groups), evaluator, config, on_generation=told)
            outcome = merge_and_promote(learner.store, result, evaluator, evaluator, global_name=learner.config.ema.name)
        finally:
            evaluator.close()
        return f"CycleQD after session {session_number}: {outcome.reason}"

    return run
