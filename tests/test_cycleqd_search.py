"""The CycleQD loop on the synthetic evaluator, with archives, children and scores in a real store."""
from __future__ import annotations

from pathlib import Path

import pytest

from cycleqd_support import TASKS, open_store, store_with_experts
from skillgraft.evolve.cycleqd import CycleQDConfig, merge_and_promote, run_cycleqd, synthetic_world, write_heatmaps
from skillgraft.evolve.cycleqd.candidate import content_hash
from skillgraft.hypernet.lora import concat
from skillgraft.hypernet.peft_io import load_adapter, save_adapter


def _config(**kw) -> CycleQDConfig:
    return CycleQDConfig(**{"generations": 6, "children_per_generation": 2, "seed": 3, **kw})


def _snapshot(store, result) -> dict:
    """Every archive cell: the elite's scores and the content of its stored adapter."""
    out = {}
    for task, archive in result.archives.items():
        for cell, elite in archive.elites.items():
            delta, _ = load_adapter(store.adapter_path(elite.adapter_id))
            out[(task, cell)] = (dict(elite.scores), content_hash(delta))
    return out


def test_archives_fill_and_qd_score_rises(tmp_path: Path):
    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=6))
    history = result.history
    assert [s.generation for s in history] == list(range(7))
    start, end = history[0], history[-1]
    assert all(end.archives[t].elites > start.archives[t].elites for t in TASKS)
    assert end.qd_score > start.qd_score
    assert end.coverage > start.coverage
    # MAP-Elites never loses an elite, so neither the QD score nor any best quality goes down
    assert all(b.qd_score >= a.qd_score for a, b in zip(history, history[1:]))
    for t in TASKS:
        bests = [s.archives[t].best_quality for s in history]
        assert bests == sorted(bests)


def test_the_quality_task_rotates_through_every_task(tmp_path: Path):
    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=6, children_per_generation=1))
    assert [s.quality_task for s in result.history[1:]] == [TASKS[i % 3] for i in range(6)]
    fixed = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=3, children_per_generation=1,
                                                                    fixed_quality="beta"))
    assert {s.quality_task for s in fixed.history[1:]} == {"beta"}


def test_store_holds_the_archive_the_search_built(tmp_path: Path):
    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config())
    run = store.qd_run(result.run_id)
    assert run.generation == 6
    for task, archive in result.archives.items():
        rows = store.archive(result.run_id, task)
        assert {tuple(r.cell): r.adapter_id for r in rows} == {c: e.adapter_id for c, e in archive.elites.items()}
        for r in rows:
            assert r.quality == r.scores[task]
    children = [a for a in store.adapters(kind="checkpoint") if a.provenance.get("method") == "cycleqd"]
    assert children, "kept children are stored as adapters"
    for child in children:
        assert child.provenance["run_id"] == result.run_id and len(child.provenance["parents"]) == 2
        assert child.rank <= 8


@pytest.mark.parametrize("mutation", ["svd", "gaussian"])
def test_resume_from_the_store_equals_an_uninterrupted_run(tmp_path: Path, mutation: str):
    store_a, world_a, ids_a = store_with_experts(tmp_path / "a")
    whole = run_cycleqd(store_a, ids_a, TASKS, world_a.evaluator, _config(generations=6, mutation=mutation))

    store_b, world_b, ids_b = store_with_experts(tmp_path / "b")
    first = run_cycleqd(store_b, ids_b, TASKS, world_b.evaluator, _config(generations=2, mutation=mutation))
    store_b.close()
    # a new process: a fresh store object on the same database and a fresh evaluator
    store_b2 = open_store(tmp_path / "b")
    resumed = run_cycleqd(store_b2, [], [], synthetic_world(TASKS, seed=0).evaluator, _config(generations=6, mutation=mutation),
                          run_id=first.run_id)

    assert [s.generation for s in resumed.history] == [3, 4, 5, 6]
    assert [s.quality_task for s in resumed.history] == [s.quality_task for s in whole.history[3:]]
    assert _snapshot(store_b2, resumed) == _snapshot(store_a, whole)
    assert resumed.history[-1].qd_score == pytest.approx(whole.history[-1].qd_score)


def test_resume_refuses_changed_settings(tmp_path: Path):
    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=1))
    with pytest.raises(ValueError, match="sampling"):
        run_cycleqd(store, [], [], world.evaluator, _config(generations=2, sampling="uniform"), run_id=result.run_id)


def test_no_candidate_is_evaluated_twice(tmp_path: Path):
    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=4))
    assert world.evaluator.calls == sum(s.evaluations for s in result.history)
    assert world.evaluator.calls <= (len(ids) + 4 * 2) * len(TASKS)
    before = world.evaluator.calls
    # a second run over the same checkpoints reads their scores from the cache
    again = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=0))
    assert again.history[0].evaluations == 0 and world.evaluator.calls == before


def test_bad_input_is_refused(tmp_path: Path):
    store, world, ids = store_with_experts(tmp_path)
    with pytest.raises(ValueError, match="two tasks"):
        run_cycleqd(store, ids, ["alpha"], world.evaluator, _config())
    with pytest.raises(ValueError, match="checkpoint"):
        run_cycleqd(store, [], TASKS, world.evaluator, _config())
    with pytest.raises(ValueError, match="fixed quality"):
        run_cycleqd(store, ids, TASKS, world.evaluator, _config(fixed_quality="delta"))


def test_final_merge_is_promoted_only_when_it_beats_the_global(tmp_path: Path):
    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=6))
    best = result.best()
    outcome = merge_and_promote(store, result, world.evaluator, world.evaluator)
    assert outcome.accepted and outcome.global_scores is None
    assert sum(outcome.weights.values()) == pytest.approx(outcome.scale)
    assert outcome.sources == {t: best[t].adapter_id for t in TASKS}
    # the chosen scale times the softmax of the best qualities
    import numpy as np

    q = np.array([best[t].score(t) for t in TASKS])
    assert list(outcome.weights.values()) == pytest.approx(list(outcome.scale * np.exp(q) / np.exp(q).sum()))
    assert store.latest_global().id == outcome.global_adapter_id
    # the merge beats every expert's average here (each expert scores e^-1 on the other tasks)
    expert_means = [np.mean([world.evaluator.score(world.experts[t], u) for u in TASKS]) for t in TASKS]
    assert outcome.candidate_mean > max(expert_means)

    # a global that holds every target exactly scores 1 everywhere: the next merge must lose to it
    perfect = concat([world.evaluator.targets[t] for t in TASKS])
    folder = save_adapter(perfect, tmp_path / "perfect", base_model_name="tiny", fingerprint="sha256:tiny-synthetic-base")
    head = store.commit_global(folder, store.latest_global().id, {"method": "test"})
    again = merge_and_promote(store, result, world.evaluator, world.evaluator)
    assert not again.accepted and again.global_mean == pytest.approx(1.0)
    assert store.latest_global().id == head.id
    assert "not above" in again.reason


def test_the_merge_scale_is_picked_on_the_search_tasks_and_only_the_pick_is_validated(tmp_path: Path):
    import numpy as np

    from skillgraft.evolve.cycleqd.evaluators import SyntheticEvaluator
    from skillgraft.evolve.cycleqd.final_merge import merge_best
    from skillgraft.evolve.cycleqd.persistence import RunRecorder
    from skillgraft.hypernet.lora import scale

    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=3, merge_scales=(2.0, 0.5, 1.0)))
    validator = SyntheticEvaluator(world.evaluator.targets)
    outcome = merge_and_promote(store, result, world.evaluator, validator, promote=False)
    assert list(outcome.scale_scores) == [0.5, 1.0, 2.0]
    recorder = RunRecorder(store)
    rank = int(recorder.load_run(result.run_id)[2]["rank"])
    merged = merge_best(recorder, result, rank)[0]
    by_hand = {s: float(np.mean([world.evaluator.score(scale(merged, s), t) for t in TASKS])) for s in (0.5, 1.0, 2.0)}
    recorder.close()
    assert outcome.scale_scores == pytest.approx(by_hand)
    assert outcome.scale == max(by_hand, key=by_hand.get)
    # the validation sets judge only the merge kept (no global yet), one score per task
    assert validator.calls == len(TASKS)
    with pytest.raises(ValueError, match="merge_scales"):
        CycleQDConfig(merge_scales=())


def test_heatmap_png_per_archive(tmp_path: Path):
    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=2))
    paths = write_heatmaps(result.archives, tmp_path / "maps", prefix=f"run{result.run_id}")
    assert [p.name for p in paths] == [f"run{result.run_id}-{t}.png" for t in TASKS]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_starting_checkpoints_are_selected_by_id_name_kind_and_global_history(tmp_path: Path):
    from skillgraft.evolve.cycleqd import select_checkpoints

    store, _, ids = store_with_experts(tmp_path)
    assert select_checkpoints(store, ["kind:checkpoint"]) == ids
    assert select_checkpoints(store, ["name:expert-beta", str(ids[0]), str(ids[1])]) == [ids[1], ids[0]]
    with pytest.raises(ValueError, match="matches no stored adapter"):
        select_checkpoints(store, ["global"])
    first = store.commit_global(store.adapter_path(ids[2]), None, {"method": "test"}, base_fingerprint="sha256:tiny-synthetic-base")
    assert select_checkpoints(store, ["global"]) == [first.id]
    with pytest.raises(ValueError, match="use an adapter id"):
        select_checkpoints(store, ["everything"])


def test_any_generation_s_archives_can_be_rebuilt_from_the_store_and_the_merge_is_kept(tmp_path: Path):
    from skillgraft.evolve.cycleqd import archives_at

    store, world, ids = store_with_experts(tmp_path)
    result = run_cycleqd(store, ids, TASKS, world.evaluator, _config(generations=4))
    state = store.qd_run(result.run_id).state
    final = archives_at(state, 4)
    assert {t: dict(a.elites) for t, a in final.items()} == {t: dict(a.elites) for t, a in result.archives.items()}
    for stats in result.history:  # each generation's archives, as the search reported them then
        then = archives_at(state, stats.generation)
        assert {t: len(a) for t, a in then.items()} == {t: s.elites for t, s in stats.archives.items()}
        assert {t: a.stats().best_quality for t, a in then.items()} == {t: s.best_quality for t, s in stats.archives.items()}
    outcome = merge_and_promote(store, result, world.evaluator, world.evaluator)
    kept = store.qd_run(result.run_id).state["merge"]
    assert kept["accepted"] == outcome.accepted and kept["candidate_scores"] == outcome.candidate_scores
    assert kept["merge_adapter_id"] == outcome.merge_adapter_id and store.qd_run(result.run_id).state["placed"] == state["placed"]
