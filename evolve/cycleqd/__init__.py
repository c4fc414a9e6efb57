"""CycleQD over the agent's checkpoints: quality-diversity search in LoRA space.

    result = run_cycleqd(store, checkpoint_ids, ["strings", "dates"], evaluator, CycleQDConfig(generations=20))
    outcome = merge_and_promote(store, result, validator)      # candidate global adapter, kept only if better
    write_heatmaps(result.archives, out_dir)
"""
from skillgraft.evolve.cycleqd.archive import AddStatus, Archive, Binning, Elite
from skillgraft.evolve.cycleqd.config import CycleQDConfig
from skillgraft.evolve.cycleqd.evaluators import AgentEvaluator, Evaluator, SyntheticEvaluator, synthetic_world
from skillgraft.evolve.cycleqd.final_merge import MergeOutcome, merge_and_promote
from skillgraft.evolve.cycleqd.heatmap import heatmap_figure, quality_range, write_heatmaps
from skillgraft.evolve.cycleqd.population import select_checkpoints
from skillgraft.evolve.cycleqd.search import CycleQDResult, GenerationStats, archives_at, run_cycleqd

__all__ = [
    "AddStatus", "AgentEvaluator", "Archive", "archives_at", "heatmap_figure", "quality_range", "Binning", "CycleQDConfig",
    "CycleQDResult", "Elite", "Evaluator",
    "GenerationStats", "MergeOutcome", "SyntheticEvaluator", "merge_and_promote", "run_cycleqd", "select_checkpoints",
    "synthetic_world", "write_heatmaps",
]
