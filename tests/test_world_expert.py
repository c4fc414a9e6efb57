"""The expert's trajectories are agent messages, built by agent.prompts, and the expert solves
tasks through the real agent loop in a Docker sandbox."""
from __future__ import annotations

import re

import pytest

from skillgraft.agent.prompts import SUBMIT_COMMAND, instance_prompt, parse_action, system_prompt
from skillgraft.skillworld.expert import Step, messages, plan
from skillgraft.skillworld.families import FAMILIES
from skillgraft.skillworld.generate import HELDOUT_START, INSTRUCTION, generate


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_plan_parses_as_agent_actions(family):
    wt = generate(family, 11)
    steps = [Step(t, c, "out\n", 0) for t, c in plan(wt)]
    msgs = messages(steps, [("a-skill", "body")])
    assert msgs[0] == {"role": "system", "content": system_prompt()}
    assert msgs[1]["content"] == instance_prompt(INSTRUCTION, [("a-skill", "body")])
    commands = [parse_action(m["content"]) for m in msgs if m["role"] == "assistant"]
    assert commands == [c for _, c in plan(wt)] and commands[-1] == SUBMIT_COMMAND
    assert f"./{wt.path}" in commands[2] and len(commands) == 5


def _same_but_timings(text: str) -> str:
    return re.sub(r" in [0-9.]+s", " in Ts", text)


@pytest.mark.docker
@pytest.mark.parametrize("family", ["missing_import", "wrong_format"])
def test_expert_through_the_agent_loop_matches_bulk_episodes(family):
    """What the agent loop shows a model is what the training data shows it."""
    from skillgraft.agent.runner import run_task
    from skillgraft.sandbox.image import IMAGE_TAG, engine, image_exists
    from skillgraft.skillworld.episodes import run_episodes
    from skillgraft.skillworld.expert import ExpertModel

    if not image_exists(engine(), IMAGE_TAG):
        pytest.skip(f"sandbox image {IMAGE_TAG} not built")
    wt = generate(family, HELDOUT_START + 3)
    result = run_task(wt.task(), ExpertModel(wt), sandbox="docker")
    assert result.success and result.steps == 5
    bulk = run_episodes([wt], backend="docker")[0]
    expected = messages(bulk.steps)
    assert [_same_but_timings(m["content"]) for m in result.messages] == [_same_but_timings(m["content"]) for m in expected]


@pytest.mark.parametrize("mistake,family", [("grep-miss", "missing_import"), ("grep-miss", "wrong_constant"),
                                            ("edit-miss", "misspelt_call"), ("edit-miss", "drill_word"),
                                            ("wrong-fix", "wrong_operator"), ("wrong-fix", "swapped_arguments"),
                                            ("wrong-fix", "missing_return")])
def test_an_episode_with_a_wrong_step_recovers_and_the_wrong_step_is_never_trained(mistake, family):
    from skillgraft.skillworld.dataset import episode_record, record_steps
    from skillgraft.skillworld.episodes import run_episodes
    from skillgraft.skillworld.expert import MISTAKE_TURN
    from skillgraft.skillworld.policy.data import conversations

    wt = generate(family, 7)
    [episode] = run_episodes([wt], backend="local", mistake=mistake)
    assert episode.success, [(s.command, s.output) for s in episode.steps]
    wrong = episode.steps[MISTAKE_TURN[mistake]]
    if mistake == "grep-miss":
        assert wrong.returncode == 1 and wrong.output == ""  # the misspelt name is nowhere
    else:
        assert "1 failed" in episode.steps[MISTAKE_TURN[mistake] + 1].output  # sed changed nothing
    assert [s.command for s in episode.steps].count(plan(wt)[2][1]) == 1  # the right edit, once, after the wrong one
    record = episode_record(episode)
    assert record["id"].endswith(f"+{mistake}") and record["mistake"] == mistake
    for conversation in conversations([record], seed=0):
        replies = [m for m in conversation if m["role"] == "assistant"]
        assert [m.get("train", True) for m in replies].count(False) == 1
        assert replies[MISTAKE_TURN[mistake]].get("train") is False
    assert len(record_steps(record, skill_in_context=True)) == len(episode.steps)


def test_a_wrong_fix_reads_the_bug_as_another_family_and_its_edit_changes_nothing():
    from skillgraft.skillworld.episodes import run_episodes
    from skillgraft.skillworld.expert import can_make

    wt = generate("wrong_operator", 3)
    steps, right = plan(wt, mistake="wrong-fix"), plan(wt)[2]
    wrong, again = steps[2], steps[4]
    assert "in the wrong order; swap them" in wrong[0] and " - " not in wrong[1]
    assert again == (f"The tests still fail: that was not the bug. {right[0]}", right[1])
    [episode] = run_episodes([wt], backend="local", mistake="wrong-fix")
    assert episode.success and "1 failed" in episode.steps[3].output  # the wrong edit fixed nothing
    other = generate("missing_return", 3)
    assert "subtracts where it must add" in plan(other, mistake="wrong-fix")[2][0]
    # a constant has no function to misread, so no episode of a constant family makes this mistake
    constant = generate("wrong_constant", 3)
    assert not can_make(constant, "wrong-fix") and can_make(constant, "grep-miss")
    with pytest.raises(ValueError, match="no wrong-fix"):
        plan(constant, mistake="wrong-fix")
