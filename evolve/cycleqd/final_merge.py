"""The end of a search: merge the archives' elites and propose the merge as the global adapter.

The merge weights are softmax(quality / T) over the archives' best elites, summed by the merge
the search's children are made with (exact rank concatenation recompressed to the run's rank).
The weights are then scaled by each of the config's merge scales, and the scale whose merge
scores best on the search's own tasks is kept. The merge then grows greedily, as a greedy model
soup does: from the better of it and the best single elite (by mean score over the search's
tasks; where elites tie for that mean, from their even mean unless it scores lower), each other
elite in order of that mean is added at each of the config's soup weights, and the sum that
scores best is kept when it raises the mean (grow_soup). Every choice is made
on the search's own tasks: the validation sets stay unseen until the merge is judged against
the global adapter. The merge replaces the global adapter only if its mean validation score beats the current
global's; the commit is optimistic, so a learner that moved the global meanwhile wins and the
merge is reported as not accepted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from skillgraft.evolve.cycleqd.archive import distinct_elites
from skillgraft.evolve.cycleqd.candidate import Candidate
from skillgraft.evolve.cycleqd.operators import MERGE
from skillgraft.evolve.cycleqd.persistence import RunRecorder, score_candidates
from skillgraft.evolve.cycleqd.search import CycleQDResult
from skillgraft.hypernet.lora import LoraDelta, scale
from skillgraft.hypernet.merges import merge

if TYPE_CHECKING:
    from skillgraft.evolve.cycleqd.evaluators import Evaluator
    from skillgraft.skills.store import Store

VALIDATION = "validation"  # cache namespace: validation sets share task names with evaluation sets
TIE = 1e-9  # means closer than this are equal: the same scores summed in another order differ in the last bits


def softmax(values: Sequence[float], temperature: float = 1.0) -> np.ndarray:
    z = np.asarray(values, dtype=np.float64) / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


@dataclass
class MergeOutcome:
    sources: dict[str, Any]  # task -> adapter id of that archive's best elite
    weights: dict[str, float]  # task -> merge weight
    merge_adapter_id: Any  # the merged adapter, kept in the store whether or not it is promoted
    scale: float  # the weights' scale kept, picked on the search's tasks
    scale_scores: dict[float, float]  # each scale tried -> its merge's mean score on the search's tasks
    candidate_scores: dict[str, float]
    global_scores: dict[str, float] | None  # None when there was no global adapter yet
    accepted: bool
    reason: str
    global_adapter_id: Any = None  # the new global version when accepted
    # What the merge is: adapter id -> weight, the scaled merge's sources and every elite the soup added
    parts: dict[Any, float] = field(default_factory=dict)
    soup: list[dict] = field(default_factory=list)  # each step of grow_soup, tried or kept (SoupStep.to_dict)
    # where the soup started: "from" (scaled merge, best elite, tied elites) and its mean; where elites
    # tied at the top, their ids ("tied") and their even mean's score ("tie_mean")
    soup_start: dict[str, Any] = field(default_factory=dict)
    delta: LoraDelta | None = field(default=None, repr=False)

    @property
    def candidate_mean(self) -> float:
        return _mean(self.candidate_scores)

    @property
    def global_mean(self) -> float | None:
        return None if self.global_scores is None else _mean(self.global_scores)

    def to_dict(self) -> dict:
        return {
            "sources": self.sources, "weights": self.weights, "merge_adapter_id": self.merge_adapter_id,
            "scale": self.scale, "scale_scores": {str(k): v for k, v in self.scale_scores.items()},
            "candidate_scores": self.candidate_scores, "candidate_mean": self.candidate_mean,
            "global_scores": self.global_scores, "global_mean": self.global_mean,
            "accepted": self.accepted, "reason": self.reason, "global_adapter_id": self.global_adapter_id,
            "parts": [{"adapter_id": a, "weight": w} for a, w in self.parts.items()], "soup": self.soup,
            "soup_start": self.soup_start,
        }


@dataclass
class SoupStep:
    adapter_id: Any  # the elite tried
    elite_mean: float  # its own mean score on the search's tasks
    means: dict[float, float]  # each soup weight tried -> the sum's mean on the search's tasks
    before: float  # the soup's mean before the step
    kept: float | None  # the weight kept, None when no weight raised the mean

    def to_dict(self) -> dict:
        return {"adapter_id": self.adapter_id, "elite_mean": self.elite_mean,
                "means": {str(k): v for k, v in self.means.items()}, "before": self.before, "kept": self.kept}


def _mean(scores: dict[str, float]) -> float:
    return float(np.mean(list(scores.values())))


def merge_best(recorder: RunRecorder, result: CycleQDResult, rank: int) -> tuple[LoraDelta, dict[str, Any], dict[str, float]]:
    best = result.best()
    if not best:
        raise ValueError("every archive is empty; nothing to merge")
    tasks = list(best)
    weights = softmax([best[t].score(t) for t in tasks], result.config.merge_temperature)
    deltas = [recorder.delta(best[t].adapter_id) for t in tasks]
    merged = merge(MERGE, deltas, weights.tolist(), rank=rank)
    return merged, {t: best[t].adapter_id for t in tasks}, {t: float(w) for t, w in zip(tasks, weights)}


def best_scaled_merge(recorder: RunRecorder, result: CycleQDResult, evaluator: Evaluator, rank: int, like: Any
                      ) -> tuple[Candidate, dict[str, Any], dict[str, float], float, dict[float, float]]:
    """The merge at each of the config's scales, scored on the search's tasks (cached with the
    search's own scores); returns the best one (ties: the smaller scale), its sources and scaled
    weights, the scale and every scale's mean. Scaling every weight scales the merged ΔW, so the
    merge is made once."""
    merged, sources, weights = merge_best(recorder, result, rank)
    scales = result.config.merge_scales
    candidates = [Candidate.of(scale(merged, s)) for s in scales]
    scores, _ = score_candidates(recorder, evaluator, candidates, result.tasks, like)
    means = {s: _mean(by_task) for s, by_task in zip(scales, scores)}
    chosen = max(means, key=lambda s: (means[s], -s))
    return candidates[scales.index(chosen)], sources, {t: chosen * w for t, w in weights.items()}, chosen, means


def grow_soup(recorder: RunRecorder, result: CycleQDResult, evaluator: Evaluator, rank: int, like: Any,
              start: Candidate, parts: dict[Any, float], start_mean: float
              ) -> tuple[Candidate, dict[Any, float], list[SoupStep], dict[str, Any]]:
    """A greedy soup over the archives' elites, scored on the search's tasks: returns the soup, its
    parts (adapter id -> weight), every step and where it started.

    It starts from `start` (the scaled merge; `parts` its sources) or from the best single elite
    where that one's mean is higher; where several elites tie for that mean, from their even mean
    (each at 1/k) unless that scores lower. Each other elite, highest mean first, up to the config's
    soup_size, is added at each of its soup_weights; the sum scoring best replaces the soup when it
    raises the soup's mean (ties: the smaller weight). A soup_size of 0 keeps `start`. Each sum is
    made afresh from its parts by the search's merge, so truncations to the rank never compound."""
    config, tasks = result.config, result.tasks
    if config.soup_size == 0:
        return start, dict(parts), [], {"from": "scaled merge", "mean": start_mean}

    def mean_of(elite) -> float:
        return float(np.mean([elite.score(t) for t in tasks]))

    def summed(weights: dict[Any, float]) -> Candidate:  # made afresh from its parts by the search's merge
        return Candidate.of(merge(MERGE, [recorder.delta(i) for i in weights], list(weights.values()), rank=rank))

    elites = sorted(distinct_elites(result.archives.values()), key=mean_of, reverse=True)
    soup, parts, mean = start, dict(parts), start_mean
    origin: dict[str, Any] = {"from": "scaled merge", "mean": mean}
    if elites and mean_of(elites[0]) > mean + TIE:
        top = elites[0]
        soup, parts, mean = Candidate.of(recorder.delta(top.adapter_id), adapter_id=top.adapter_id), {top.adapter_id: 1.0}, mean_of(top)
        origin = {"from": "best elite", "mean": mean}
        tied = [e.adapter_id for e in elites if abs(mean_of(e) - mean) < TIE]
        if len(tied) > 1:
            # Which of several tied elites comes first is the archive's order, not a score: their
            # mean stands for the whole tie, and is kept unless it scores lower than the first.
            even = {i: 1.0 / len(tied) for i in tied}
            candidate = summed(even)
            tie_mean = _mean(score_candidates(recorder, evaluator, [candidate], tasks, like)[0][0])
            origin.update(tied=tied, tie_mean=tie_mean)
            if tie_mean > mean - TIE:
                soup, parts, mean = candidate, even, tie_mean
                origin["from"] = "tied elites"
    steps = []
    for elite in [e for e in elites if e.adapter_id not in parts][: config.soup_size]:
        tried = [summed({**parts, elite.adapter_id: weight}) for weight in config.soup_weights]
        scores, _ = score_candidates(recorder, evaluator, tried, tasks, like)
        means = {w: _mean(by_task) for w, by_task in zip(config.soup_weights, scores)}
        best = max(means, key=lambda w: (means[w], -w))
        kept = best if means[best] > mean + TIE else None
        steps.append(SoupStep(elite.adapter_id, mean_of(elite), means, mean, kept))
        if kept is not None:
            soup, parts, mean = tried[config.soup_weights.index(kept)], {**parts, elite.adapter_id: kept}, means[kept]
    return soup, parts, steps, origin


def merge_and_promote(
    store: Store,
    result: CycleQDResult,
    evaluator: Evaluator,
    validator: Evaluator,
    *,
    promote: bool = True,
    global_name: str = "global",
) -> MergeOutcome:
    """Builds the final merge (its scale picked with `evaluator`, the search's), scores it and the
    current global on the validation sets, and commits if better; the outcome is kept in the run's
    state under "merge"."""
    recorder = RunRecorder(store)
    try:
        state = recorder.load_run(result.run_id)[2]
        like = recorder.info(state["checkpoints"][0])
        rank = int(state["rank"])
        scaled, sources, weights, chosen, scale_scores = best_scaled_merge(recorder, result, evaluator, rank, like)
        scaled_parts: dict[Any, float] = {}
        for t in sources:  # one elite may be the best of several archives
            scaled_parts[sources[t]] = scaled_parts.get(sources[t], 0.0) + weights[t]
        candidate, parts, soup, origin = grow_soup(recorder, result, evaluator, rank, like, scaled, scaled_parts, scale_scores[chosen])
        provenance = {
            "method": "cycleqd-merge", "run_id": result.run_id, "generation": result.generation, "scale": chosen,
            "combined": [{"adapter_id": a, "weight": w} for a, w in parts.items()],
            "soup": [step.to_dict() for step in soup], "soup_start": origin,
        }
        merge_id = recorder.add_child(candidate, like, provenance, name=f"cycleqd-run{result.run_id}-merge")
        tasks = result.tasks
        current = store.latest_global(global_name)
        subjects = [candidate]
        if current is not None:
            if like.fingerprint and current.base_fingerprint and current.base_fingerprint != like.fingerprint:
                raise ValueError(f"the global adapter {global_name!r} belongs to another base model than the run's checkpoints")
            subjects.append(Candidate.of(recorder.delta(current.id), adapter_id=current.id))
        scores, _ = score_candidates(recorder, validator, subjects, tasks, like, namespace=VALIDATION)
        candidate_scores = scores[0]
        global_scores = scores[1] if current is not None else None
        outcome = MergeOutcome(sources=sources, weights=weights, merge_adapter_id=merge_id, scale=chosen,
                               scale_scores=scale_scores,
                               candidate_scores=candidate_scores, global_scores=global_scores,
                               accepted=False, reason="", delta=candidate.delta,
                               parts=parts, soup=[step.to_dict() for step in soup], soup_start=origin)
        _promote_if_better(store, outcome, recorder.folder(merge_id), current, provenance, like.fingerprint, promote, global_name)
        # Kept with the run, so what the final merge scored outlives this call.
        run = store.qd_run(result.run_id)
        store.update_qd_run(result.run_id, run.generation, {**dict(run.state or {}), "merge": outcome.to_dict()})
        return outcome
    finally:
        recorder.close()


def _promote_if_better(store: Store, outcome: MergeOutcome, folder: Path, current: Any, provenance: dict[str, Any],
                       fingerprint: str | None, promote: bool, global_name: str) -> None:
    """Commits the merge as the next global version when it beats the current one on validation."""
    from skillgraft.skills.errors import StaleVersion

    if outcome.global_mean is not None and not outcome.candidate_mean > outcome.global_mean:
        outcome.reason = f"merge scores {outcome.candidate_mean:.3f} on validation, not above the global's {outcome.global_mean:.3f}"
        return
    if not promote:
        outcome.reason = "merge beats the global on validation; not promoted (promotion off)"
        return
    try:
        row = store.commit_global(folder, current.id if current is not None else None,
                                  {**provenance, "validation": {"merge": outcome.candidate_scores, "global": outcome.global_scores}},
                                  base_fingerprint=fingerprint, name=global_name)
    except StaleVersion as exc:
        outcome.reason = f"the global adapter moved on while validating ({exc}); merge kept as adapter {outcome.merge_adapter_id}"
        return
    outcome.accepted, outcome.global_adapter_id = True, row.id
    outcome.reason = ("no global adapter yet; merge becomes the first" if current is None else
                      f"merge {outcome.candidate_mean:.3f} beats global {outcome.global_mean:.3f} on validation")
