"""Evaluation arithmetic: Wilson intervals and per-group cells."""
from __future__ import annotations

import pytest

from skillgraft.evolve.intervals import wilson
from skillgraft.skillworld.evaluate import EpisodeResult, cells, episode_skill


def test_wilson_interval_known_values():
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-3)
    assert wilson(10, 10)[1] == 1.0


def test_cells_group_families_and_average_steps():
    results = [EpisodeResult("off_by_one", 1, "none", True, 5, "submitted"),
               EpisodeResult("wrong_operator", 1, "none", False, 10, "step_limit"),
               EpisodeResult("wrong_format", 1, "none", True, 5, "submitted")]
    by_group = {c.name: c for c in cells(results, "group")}
    assert (by_group["seen"].successes, by_group["seen"].episodes, by_group["seen"].mean_steps) == (1, 2, 7.5)
    assert by_group["skill-only"].rate == 1.0
    assert {c.name for c in cells(results, "family")} == {"off_by_one", "wrong_operator", "wrong_format"}


def test_episode_skill_is_a_fixed_paraphrase_of_the_family():
    assert episode_skill("wrong_format", 7) == episode_skill("wrong_format", 7)
    assert {episode_skill("wrong_format", s).name for s in range(30)} == {
        "fix-wrong-format-recipe", "fix-wrong-format-steps", "fix-wrong-format-notes"}
