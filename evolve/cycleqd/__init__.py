"""CycleQD over the agent's checkpoints: quality-diversity search in LoRA space.

    result = run_cycleqd(store, checkpoint_ids, ["strings", "dates"], evaluator, CycleQDConfig(generations=20))
    outcome = merge_and_promote(store, result, validator)      # candidate global adapter, kept only if better
    write_heatmaps(result.archives, out_dir)
"""
from evolve.cycleqd.archive import AddStatus, Archive, Binning, Elite
from evolve.cycleqd.config import CycleQDConfig
from evolve.cycleqd.evaluators import AgentEvaluator, Evaluator, SyntheticEvaluator, synthetic_world
from evolve.cycleqd.final_merge import MergeOutcome, merge_and_promote
from evolve.cycleqd.heatmap import write_heatmaps
from evolve.cycleqd.population import select_checkpoints
from evolve.cycleqd.search import CycleQDResult, GenerationStats, run_cycleqd

__all__ = [
    "AddStatus", "AgentEvaluator", "Archive", "Binning", "CycleQDConfig", "CycleQDResult", "Elite", "Evaluator",
    "GenerationStats", "MergeOutcome", "SyntheticEvaluator", "merge_and_promote", "run_cycleqd", "select_checkpoints",
    "synthetic_world", "write_heatmaps",
]
