"""The expert's trajectories are agent messages, built by agent.prompts, and the expert solves
tasks through the real agent loop in a Docker sandbox."""
from __future__ import annotations

import re

import pytest

from agent.prompts import SUBMIT_COMMAND, instance_prompt, parse_action, system_prompt
from skillworld.expert import Step, messages, plan
from skillworld.families import FAMILIES
from skillworld.generate import HELDOUT_START, INSTRUCTION, generate


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
    from agent.runner import run_task
    from sandbox.image import IMAGE_TAG, engine, image_exists
    from skillworld.episodes import run_episodes
    from skillworld.expert import ExpertModel

    if not image_exists(engine(), IMAGE_TAG):
        pytest.skip(f"sandbox image {IMAGE_TAG} not built")
    wt = generate(family, HELDOUT_START + 3)
    result = run_task(wt.task(), ExpertModel(wt), sandbox="docker")
    assert result.success and result.steps == 5
    bulk = run_episodes([wt], backend="docker")[0]
    expected = messages(bulk.steps)
    assert [_same_but_timings(m["content"]) for m in result.messages] == [_same_but_timings(m["content"]) for m in expected]
