"""bench_learning's per-family tally of a condition's sessions."""
from __future__ import annotations

from bench.bench_learning import by_family
from skillgraft.evolve.learn.loop import SessionReport, TaskOutcome


def outcome(family: str, success: bool) -> TaskOutcome:
    return TaskOutcome(f"{family}-task", family, success, 3, "Submitted" if success else "StepLimit", None, [], None)


def test_by_family_counts_solved_and_run_over_every_session():
    first = SessionReport(1, 1, [outcome("wrong_sign", False), outcome("wrong_constant", True)])
    second = SessionReport(2, 2, [outcome("wrong_constant", True), outcome("wrong_sign", True), outcome("wrong_word", False)])
    assert by_family([first, second]) == {"wrong_constant": (2, 2), "wrong_sign": (1, 2), "wrong_word": (0, 1)}
    assert list(by_family([second])) == ["wrong_constant", "wrong_sign", "wrong_word"]
