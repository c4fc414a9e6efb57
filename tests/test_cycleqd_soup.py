"""The final merge grown as a greedy soup of the search's elites, on the synthetic evaluator and a real store."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cycleqd_support import TASKS, Rounded, store_with_experts
from skillgraft.evolve.cycleqd import CycleQDConfig, merge_and_promote, run_cycleqd
from skillgraft.evolve.cycleqd.archive import distinct_elites
from skillgraft.evolve.cycleqd.candidate import Candidate
from skillgraft.evolve.cycleqd.evaluators import SyntheticEvaluator
from skillgraft.evolve.cycleqd.operators import MERGE
from skillgraft.hypernet.merges import merge
from skillgraft.hypernet.peft_io import load_adapter


def _search(tmp_path: Path, **kw):
    store, world, ids = store_with_experts(tmp_path)
    config = CycleQDConfig(**{"generations": 4, "children_per_generation": 2, "seed": 3, **kw})
    return store, world, run_cycleqd(store, ids, TASKS, world.evaluator, config)


def _mean_on(evaluator: SyntheticEvaluator, delta) -> float:
    return float(np.mean([evaluator.score(delta, t) for t in TASKS]))


def test_the_soup_keeps_an_elite_only_when_the_sum_scores_higher_on_the_search_tasks(tmp_path: Path):
    # a merge scaled far down is weak, so the soup starts from the best single elite and adds to it
    store, world, result = _search(tmp_path, merge_scales=(0.2,), soup_size=4)
    validator = SyntheticEvaluator(world.evaluator.targets)
    outcome = merge_and_promote(store, result, world.evaluator, validator, promote=False)

    def mean_of(elite) -> float:
        return float(np.mean([elite.score(t) for t in TASKS]))

    elites = sorted(distinct_elites(result.archives.values()), key=mean_of, reverse=True)
    top = elites[0]
    assert outcome.scale_scores[0.2] < mean_of(top)
    assert [s["adapter_id"] for s in outcome.soup] == [e.adapter_id for e in elites[1:5]]
    mean = mean_of(top)
    for step in outcome.soup:
        assert step["before"] == pytest.approx(mean)
        best = max(step["means"].values())
        assert (step["kept"] is not None) == (best > mean)
        if step["kept"] is not None:
            assert step["means"][str(step["kept"])] == best
            mean = best
    assert any(step["kept"] is not None for step in outcome.soup), "each task lives in its own modules: adding helps"
    # the parts are the soup: the best elite at 1 and each kept elite at its weight, summed by the search's merge
    assert outcome.parts == {top.adapter_id: 1.0, **{s["adapter_id"]: s["kept"] for s in outcome.soup if s["kept"]}}
    rank = int(store.qd_run(result.run_id).state["rank"])
    by_hand = merge(MERGE, [load_adapter(store.adapter_path(i))[0] for i in outcome.parts], list(outcome.parts.values()), rank=rank)
    assert _mean_on(world.evaluator, outcome.delta) == pytest.approx(mean)
    assert _mean_on(world.evaluator, by_hand) == pytest.approx(mean)
    # the validation sets judge only the merge kept
    assert validator.calls == len(TASKS)
    kept = store.qd_run(result.run_id).state["merge"]
    assert kept["soup"] == outcome.soup and {p["adapter_id"]: p["weight"] for p in kept["parts"]} == outcome.parts


def test_no_soup_leaves_the_scaled_merge_of_the_archives_bests(tmp_path: Path):
    store, world, result = _search(tmp_path, merge_scales=(1.0,), soup_size=0)
    outcome = merge_and_promote(store, result, world.evaluator, world.evaluator, promote=False)
    assert outcome.soup == []
    best = result.best()
    parts: dict = {}
    for t in TASKS:
        parts[best[t].adapter_id] = parts.get(best[t].adapter_id, 0.0) + outcome.weights[t]
    assert outcome.parts == pytest.approx(parts)
    assert _mean_on(world.evaluator, outcome.delta) == pytest.approx(outcome.scale_scores[1.0])


def test_soup_settings_are_checked():
    with pytest.raises(ValueError, match="soup_size"):
        CycleQDConfig(soup_size=-1)
    with pytest.raises(ValueError, match="soup_weights"):
        CycleQDConfig(soup_weights=(0.0, 1.0))
    assert CycleQDConfig(soup_weights=(1.0, 0.5)).soup_weights == (0.5, 1.0)


@pytest.mark.parametrize("seed, kept", [(1, True), (0, False)])
def test_elites_tied_at_the_top_start_the_soup_as_their_even_mean_unless_it_scores_lower(tmp_path: Path, seed, kept):
    store, world, ids = store_with_experts(tmp_path)
    evaluator = Rounded(world.evaluator)
    config = CycleQDConfig(generations=4, children_per_generation=2, seed=seed, merge_scales=(0.2,), soup_size=4)
    result = run_cycleqd(store, ids, TASKS, evaluator, config)
    outcome = merge_and_promote(store, result, evaluator, evaluator, promote=False)

    def mean_of(elite) -> float:
        return float(np.mean([elite.score(t) for t in TASKS]))

    elites = sorted(distinct_elites(result.archives.values()), key=mean_of, reverse=True)
    top = mean_of(elites[0])
    tied = [e.adapter_id for e in elites if mean_of(e) == pytest.approx(top)]
    assert len(tied) > 1 and outcome.scale_scores[0.2] < top
    start = outcome.soup_start
    assert start["tied"] == tied and start["mean"] == pytest.approx(top)
    rank = int(store.qd_run(result.run_id).state["rank"])
    even = merge(MERGE, [load_adapter(store.adapter_path(i))[0] for i in tied], [1 / len(tied)] * len(tied), rank=rank)
    by_hand = float(np.mean(evaluator.evaluate([(Candidate.of(even), t) for t in TASKS])))
    assert start["tie_mean"] == pytest.approx(by_hand)
    assert (start["from"] == "tied elites") == kept == (by_hand >= top - 1e-9)
    first_step = outcome.soup[0]["before"] if outcome.soup else None
    if kept:  # the tied elites are the soup's first parts, each at 1/k, and no step tries them again
        assert all(outcome.parts[i] == pytest.approx(1 / len(tied)) for i in tied)
        assert not {s["adapter_id"] for s in outcome.soup} & set(tied) and first_step == pytest.approx(by_hand)
    else:  # the first of them alone, as without a tie
        assert elites[0].adapter_id in outcome.parts and first_step == pytest.approx(top)
        assert outcome.parts[elites[0].adapter_id] == 1.0
    assert store.qd_run(result.run_id).state["merge"]["soup_start"] == start
