"""A recipe induced from a run keeps the way to the fix and leaves out the run's detours."""
from __future__ import annotations

from skillgraft.evolve.learn.detours import recipe_steps
from skillgraft.evolve.learn.episode import Episode, Step
from skillgraft.evolve.learn.summarise_offline import OfflineSummariser

TESTS = "COLUMNS=150 python3 -m pytest -q --tb=no -rf | tail -n 2"
FAILURE = "FAILED tests/test_rates.py::test_discount_rate - assert 0.5 == 0.75"


def episode(*steps: Step) -> Episode:
    return Episode("t", "The test suite fails. Fix the code, not the tests.", list(steps), True, family="wrong_ratio")


def commands(steps: list[Step]) -> list[str]:
    return [s.command for s in steps]


def test_failed_commands_that_taught_nothing_used_later_are_left_out():
    run = episode(
        Step("Run the tests.", "python3 -m pytest -q", FAILURE, 1),  # fails, but shows 0.75 and the name
        Step("Find it.", 'grep -rn "DISCOUNT_RATE = (" .', "grep: Unmatched ( or \\(", 2),
        Step("Edit it.", "sed -i 's/DISCOUNT_RATE = 0.5/DISCOUNT_RATE = 0.75/ pricing.py",
             "sed: -e expression #1, char 43: unterminated `s' command", 1),
        Step("Find it again.", 'grep -rn "DISCOUNT_RATE =" --exclude-dir=tests .', "./pricing.py:3:DISCOUNT_RATE = 0.5", 0),
        Step("Edit it.", "sed -i 's/DISCOUNT_RATE = 0.5/DISCOUNT_RATE = 0.75/' ./pricing.py", "", 0),
        Step("Check.", "python3 -m pytest -q", "3 passed", 0),
        Step("Done.", "submit", "", 0),
    )
    assert commands(recipe_steps(run)) == [
        "python3 -m pytest -q",
        'grep -rn "DISCOUNT_RATE =" --exclude-dir=tests .',
        "sed -i 's/DISCOUNT_RATE = 0.5/DISCOUNT_RATE = 0.75/' ./pricing.py",
        "python3 -m pytest -q",
    ]
    text = OfflineSummariser(test_command="python3 -m pytest -q").summarise(run, "fix-wrong-ratio")
    assert "Unmatched" not in text and '= (' not in text and "unterminated" not in text
    assert text.count("sed -i") == 1


def test_a_failing_step_whose_output_the_run_used_is_kept():
    run = episode(
        Step("Run the tests.", TESTS, "1 passed", 0),
        Step("Show the failure.", "python3 -m pytest -q -x", FAILURE, 1),  # the only place 0.75 is shown
        Step("Edit it.", "sed -i 's/RATE = 0.5/RATE = 0.75/' ./pricing.py", "", 0),
        Step("Check.", "python3 -m pytest -q", "3 passed", 0),
    )
    assert commands(recipe_steps(run)) == commands(run.steps)


def test_a_failing_compound_command_is_kept_since_its_edit_may_have_happened():
    edit_then_test = "sed -i 's/RATE = 0.5/RATE = 0.75/' ./pricing.py && python3 -m pytest -q"
    run = episode(
        Step("Fix and test.", edit_then_test, "1 failed, 2 passed", 1),
        Step("Check.", "python3 -m pytest -q", "3 passed", 0),
    )
    assert commands(recipe_steps(run)) == [edit_then_test, "python3 -m pytest -q"]


def test_a_repeated_command_is_left_out_only_when_it_printed_the_same():
    look = 'grep -rn "RATE =" --exclude-dir=tests .'
    run = episode(
        Step("Run the tests.", "python3 -m pytest -q", FAILURE, 1),
        Step("Look.", look, "./pricing.py:3:RATE = 0.5", 0),
        Step("Look again.", look, "./pricing.py:3:RATE = 0.5", 0),  # nothing changed between
        Step("Edit.", "sed -i 's/RATE = 0.5/RATE = 0.75/' ./pricing.py", "", 0),
        Step("Look once more.", look, "./pricing.py:3:RATE = 0.75", 0),  # the edit shows
        Step("Check.", "python3 -m pytest -q", "3 passed", 0),
    )
    kept = recipe_steps(run)
    assert commands(kept) == ["python3 -m pytest -q", look, "sed -i 's/RATE = 0.5/RATE = 0.75/' ./pricing.py", look,
                              "python3 -m pytest -q"]
    assert [s.thought for s in kept][1] == "Look."


def test_a_substitution_that_writes_back_what_it_matched_is_left_out():
    fix = "sed -i '/WORD =/,/^$/s/\"spam\"/\"eggs\"/' ./words.py"
    run = episode(
        Step("Run the tests.", "python3 -m pytest -q", "FAILED tests/test_w.py::test_word - assert 'spam' == 'eggs'", 1),
        Step("Edit it.", fix, "", 0),
        Step("Edit it again.", "sed -i '/WORD =/,/^$/s/\"eggs\"/\"eggs\"/' ./words.py", "", 0),  # changes nothing
        Step("Check.", "python3 -m pytest -q", "3 passed", 0),
    )
    assert commands(recipe_steps(run)) == ["python3 -m pytest -q", fix, "python3 -m pytest -q"]


def test_a_step_that_taught_nothing_and_ran_again_later_is_left_out_and_the_next_reason_with_it():
    check = "python3 -m pytest -q --tb=no | tail -n 1"
    fix = "sed -i '/MARGIN =/,/^$/s/MARGIN = 0.2/MARGIN = 0.8/' ./orbit/records.py"
    run = episode(
        Step("Run the tests.", TESTS, "FAILED tests/records_test.py::test_MARGIN - assert 0.2 == 0.8", 0),
        Step("Find it.", 'grep -rn "MARGIN =" --exclude-dir=tests .', "./orbit/records.py:6:MARGIN = 0.2", 0),
        Step("Edit it.", "sed -i '/MARGIN =/,/^$/s/MARGIN = 0.2/MARGIN = 0.2/' ./orbit/records.py", "", 0),
        Step("Check the fix.", check, "1 failed, 1 passed in 0.01s", 0),  # the edit changed nothing
        Step("The tests still fail: that was not the bug.", fix, "", 0),
        Step("Check the fix.", check, "2 passed in 0.00s", 0),
    )
    kept = recipe_steps(run)
    assert commands(kept) == [TESTS, 'grep -rn "MARGIN =" --exclude-dir=tests .', fix, check]
    assert kept[2].thought == ""  # it spoke of the check left out, as though the fix had failed
    text = OfflineSummariser().summarise(run, "fix-wrong-ratio")
    assert "still fail" not in text and text.count("sed -i") == 1 and text.count(check) == 1


def test_an_edit_that_changed_no_file_before_one_that_did_is_left_out():
    check = "python3 -m pytest -q --tb=no | tail -n 1"
    missed = "sed -i '/MODE =/,/^$/s/MODE =\"daily\"/MODE = \"weekly\"/' ./app.py"  # no space after "=": no match
    fix = "sed -i '/MODE =/,/^$/s/daily/weekly/' ./app.py"
    run = episode(
        Step("Run the tests.", TESTS, "FAILED tests/app_test.py::test_MODE - AssertionError: assert 'daily' == 'weekly'", 0),
        Step("Find it.", 'grep -rn "MODE =" --exclude-dir=tests .', './app.py:3:MODE = "daily"', 0),
        Step("Edit it.", missed, "", 0, changed=False),
        Step("Edit it again.", fix, "", 0, changed=True),
        Step("Check the fix.", check, "2 passed in 0.00s", 0),
    )
    assert commands(recipe_steps(run)) == [TESTS, 'grep -rn "MODE =" --exclude-dir=tests .', fix, check]
    # a run that does not know what its commands changed (a stored trajectory) keeps the step
    unknown = episode(*[Step(s.thought, s.command, s.output, s.returncode) for s in run.steps])
    assert missed in commands(recipe_steps(unknown))
