"""The CycleQD ablation bench runs exactly the rows it is asked for (all of them by default),
each on the same synthetic world."""
from __future__ import annotations

from bench.bench_cycleqd_world import ABLATIONS, synthetic_trial


def test_every_row_runs_by_default(tmp_path):
    trial = synthetic_trial(tmp_path, seed=0, generations=1, children=1, rows=None)
    assert list(trial["rows"]) == [label for _, label, _ in ABLATIONS]
    # picking the best elite on validation itself can only match or beat picking it on the search's tasks
    assert trial["best_single_oracle"] >= trial["best_single"] > 0
    # each row's own best elite is one of the elites the pooled pick chooses among
    assert all(0 < row["own_best"] <= trial["best_single_oracle"] for row in trial["rows"].values())


def test_only_the_named_rows_run(tmp_path):
    trial = synthetic_trial(tmp_path, seed=0, generations=1, children=1, rows=["uniform", "gaussian"])
    assert list(trial["rows"]) == ["uniform sampling", "Gaussian mutation"]
