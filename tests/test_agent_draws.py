"""A sampled reply's seed: the conversation counts, the figures of its observations do not."""
from __future__ import annotations

from skillgraft.agent import prompts
from skillgraft.agent.models.draws import draw_seed

TASK = prompts.instance_prompt("The test suite fails. Fix the code, not the tests.")


def conversation(duration: str, *, task: str = TASK, reply: str = "cat orders.py") -> list[dict]:
    return [{"role": "system", "content": prompts.system_prompt()}, {"role": "user", "content": task},
            {"role": "assistant", "content": prompts.assistant_reply("Run the tests.", "python3 -m pytest -q")},
            {"role": "user", "content": prompts.observation(f"1 failed, 4 passed in {duration}s", 1)},
            {"role": "assistant", "content": prompts.assistant_reply("Look.", reply)}]


def test_a_test_runs_duration_does_not_change_the_draws():
    assert draw_seed(0, 0, conversation("0.02")) == draw_seed(0, 0, conversation("0.17"))
    assert draw_seed(0, 2, conversation("0.02")) == draw_seed(0, 2, conversation("1.5"))


def test_the_task_the_replies_the_seed_and_the_stream_all_change_them():
    base = draw_seed(0, 0, conversation("0.02"))
    other_task = prompts.instance_prompt("The test suite fails in 3 places. Fix the code, not the tests.")
    others = [
        draw_seed(0, 0, conversation("0.02", task=other_task)),
        draw_seed(0, 0, conversation("0.02", reply="cat orders2.py")),
        draw_seed(1, 0, conversation("0.02")),
        draw_seed(0, 1, conversation("0.02")),
        draw_seed(0, 0, conversation("0.02")[:3]),
    ]
    assert base not in others and len(set(others)) == len(others)


def test_an_observations_words_still_count():
    changed = conversation("0.02")
    changed[3] = {**changed[3], "content": changed[3]["content"].replace("failed", "errors")}
    assert draw_seed(0, 0, changed) != draw_seed(0, 0, conversation("0.02"))
