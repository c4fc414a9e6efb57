"""MAP-Elites archives: binning, insertion only over worse elites, statistics."""
from __future__ import annotations

import pytest

from skillgraft.evolve.cycleqd.archive import AddStatus, Archive, Binning, Elite, make_archives, offer_to_all

TASKS = ["a", "b", "c"]


def _binning(bins: int = 10) -> Binning:
    return Binning(ranges={t: (0.0, 1.0) for t in TASKS}, bins=bins)


def test_ranges_run_from_85_percent_of_weakest_to_115_percent_of_strongest():
    starting = [{"a": 0.2, "b": 0.5}, {"a": 0.6, "b": 0.4}]
    binning = Binning.from_starting_scores(starting, ["a", "b"], bins=15, low=0.85, high=1.15)
    assert binning.ranges["a"] == pytest.approx((0.85 * 0.2, 1.15 * 0.6))
    assert binning.ranges["b"] == pytest.approx((0.85 * 0.4, 1.15 * 0.5))
    assert binning.bins == 15


def test_explicit_ranges_win_and_all_zero_scores_still_give_a_span():
    starting = [{"a": 0.0, "b": 0.0}]
    binning = Binning.from_starting_scores(starting, ["a", "b"], bins=15, low=0.85, high=1.15, explicit={"b": (0.1, 0.9)})
    assert binning.ranges["a"] == (0.0, 1.0)
    assert binning.ranges["b"] == (0.1, 0.9)


def test_bins_are_equal_width_and_clip_outside_values():
    binning = _binning(bins=4)
    assert [binning.bin("a", v) for v in (-0.5, 0.0, 0.24, 0.25, 0.74, 0.99, 1.0, 3.0)] == [0, 0, 0, 1, 2, 3, 3, 3]


def test_cell_is_the_other_tasks_scores_binned():
    archive = Archive.for_task("b", TASKS, _binning())
    assert archive.coordinate_tasks == ("a", "c")
    assert archive.cell_of({"a": 0.31, "b": 0.9, "c": 0.05}) == (3, 0)
    assert archive.cells == 100


def test_insertion_only_replaces_worse_elites():
    archive = Archive.for_task("a", TASKS, _binning())
    first = Elite(1, {"a": 0.5, "b": 0.42, "c": 0.11})
    assert archive.offer(first) is AddStatus.NEW
    # same cell, worse and equal quality: the incumbent stays
    assert archive.offer(Elite(2, {"a": 0.4, "b": 0.45, "c": 0.12})) is AddStatus.NOT_ADDED
    assert archive.offer(Elite(3, {"a": 0.5, "b": 0.41, "c": 0.13})) is AddStatus.NOT_ADDED
    assert archive.elites[(4, 1)].adapter_id == 1
    better = Elite(4, {"a": 0.7, "b": 0.49, "c": 0.19})
    assert archive.accepts(better.scores)
    assert archive.offer(better) is AddStatus.IMPROVED
    assert archive.elites[(4, 1)].adapter_id == 4
    # another cell is taken regardless of quality
    assert archive.offer(Elite(5, {"a": 0.01, "b": 0.9, "c": 0.9})) is AddStatus.NEW
    assert len(archive) == 2


def test_a_child_is_offered_to_every_archive():
    archives = make_archives(TASKS, _binning())
    statuses = offer_to_all(archives, Elite(1, {"a": 0.5, "b": 0.6, "c": 0.7}))
    assert statuses == {t: AddStatus.NEW for t in TASKS}
    # better on a only, same cells everywhere: only a's archive takes it
    statuses = offer_to_all(archives, Elite(2, {"a": 0.55, "b": 0.6, "c": 0.7}))
    assert statuses == {"a": AddStatus.IMPROVED, "b": AddStatus.NOT_ADDED, "c": AddStatus.NOT_ADDED}
    assert archives["a"].best().adapter_id == 2 and archives["b"].best().adapter_id == 1


def test_stats_count_coverage_qd_score_and_best():
    archive = Archive.for_task("a", TASKS, _binning())
    for i, (qa, qb) in enumerate([(0.2, 0.1), (0.6, 0.5), (0.4, 0.9)]):
        archive.offer(Elite(i, {"a": qa, "b": qb, "c": 0.0}))
    stats = archive.stats()
    assert stats.elites == 3 and stats.cells == 100
    assert stats.coverage == pytest.approx(0.03)
    assert stats.qd_score == pytest.approx(1.2)
    assert stats.best_quality == 0.6 and stats.best_adapter_id == 1
