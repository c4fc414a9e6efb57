"""CycleQD over the agent's checkpoints: quality-diversity search in LoRA space.

    result = run_cycleqd(store, checkpoint_ids, ["strings", "dates"], evaluator, CycleQDConfig(generations=20))
    outcome = merge_and_promote(store, result, evaluator, validator)  # candidate global adapter, kept only if better
    write_heatmaps(result.archives, out_dir)
"""
from skillgraft.evolve.cycleqd.archive import AddStatus, Archive, Binning, Elite
from skillgraft.evolve.cycleqd.config import CycleQDConfig
from skillgraft.evolve.cycleqd.evaluators import AgentEvaluator, Evaluator, SyntheticEvaluator, synthetic_world
from skillgraft.evolve.cycleqd.final_merge import MergeOutcome, merge_and_promote
from skillgraft.evolve.cycleqd.heatmap import quality_range, shown_elites, write_heatmaps
from skillgraft.evolve.cycleqd.population import select_checkpoints
from skillgraft.evolve.cycleqd.search import CycleQDResult, GenerationStats, archives_at, run_cycleqd

__all__ = [
    "AddStatus", "AgentEvaluator", "Archive", "Binning", "CycleQDConfig", "CycleQDResult", "Elite", "Evaluator",
    "GenerationStats", "MergeOutcome", "SyntheticEvaluator", "archives_at", "merge_and_promote", "quality_range",
    "run_cycleqd", "select_checkpoints", "shown_elites", "synthetic_world", "write_heatmaps",
]
