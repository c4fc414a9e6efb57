"""The litellm backend through litellm's own mock_response: retries, tool calls, cost."""
from __future__ import annotations

import pytest

from skillgraft.agent import prompts
from skillgraft.agent.models.base import ModelError, Sampling, SamplingModel
from skillgraft.agent.models.factory import make_model
from skillgraft.agent.models.litellm_model import LitellmModel
from skillgraft.agent.runner import run_task
from skillgraft.agent.task import Task

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def tool_call(command: str, call_id: str = "call_1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "{command}"}}'}}


def quick(name: str = "gpt-4o-mini", **kw) -> LitellmModel:
    return LitellmModel(name, wait_min=0, wait_max=0, **kw)


def test_factory_picks_litellm_for_provider_strings():
    model = make_model("gpt-4o-mini", wait_min=0)
    assert isinstance(model, LitellmModel) and model.tools is True
    assert make_model("openai/my-local-server").tools is False  # unknown to litellm: fenced blocks
    with pytest.raises(ModelError, match="unknown model 'no-such-model'.*write it as provider/model"):
        make_model("no-such-model")


def test_rate_limit_is_retried_and_the_reply_comes_through():
    model = quick(tools=False, mock_script=[{"mock_response": "litellm.RateLimitError"},
                                            {"mock_response": "litellm.InternalServerError"},
                                            {"mock_response": "ok\n```bash\nls\n```"}])
    reply = model.query(MESSAGES)
    assert reply.content.endswith("```bash\nls\n```") and model.retries == 2
    assert reply.cost > 0  # gpt-4o-mini has a price in litellm's table
    assert reply.usage["prompt_tokens"] > 0


def test_retries_give_up_after_the_attempt_budget():
    model = quick(attempts=3, mock_script=[{"mock_response": "litellm.RateLimitError"}] * 3)
    with pytest.raises(ModelError, match="after 3 attempts"):
        model.query(MESSAGES)
    assert model.retries == 2


def test_errors_about_the_request_are_not_retried():
    model = quick(mock_script=[{"mock_response": "litellm.ContextWindowExceededError"}])
    with pytest.raises(ModelError, match="context window") as info:
        model.query(MESSAGES)
    assert model.retries == 0 and "used up" not in str(info.value)


def test_bash_tool_call_is_parsed_and_unknown_prices_cost_nothing():
    model = quick("openai/my-local-server", tools=True, mock_script=[
        {"mock_response": "", "mock_tool_calls": [tool_call("ls -la")]},
        {"mock_response": "", "mock_tool_calls": [tool_call("a"), tool_call("b", "call_2")]},
    ])
    reply = model.query(MESSAGES)
    assert (reply.tool_command, reply.tool_call_id, reply.cost) == ("ls -la", "call_1", 0.0)
    assert model.query(MESSAGES).tool_command is None  # two calls in one reply: not one command


def test_a_sampled_run_asks_for_its_temperature_and_the_model_is_as_it_was_after():
    model = quick(tools=False, model_kwargs={"temperature": 0.2, "max_tokens": 64},
                  mock_script=[{"mock_response": "ok\n```bash\nls\n```"}])
    assert isinstance(model, SamplingModel)
    with model.sampled(Sampling(0.9, stream=2)):
        assert model.model_kwargs == {"temperature": 0.9, "max_tokens": 64}
        assert model.query(MESSAGES).content.endswith("```bash\nls\n```")
    assert model.model_kwargs == {"temperature": 0.2, "max_tokens": 64}


@pytest.mark.docker
def test_a_rate_limited_run_still_solves_the_task(tmp_path):
    task = Task.from_dict({
        "id": "flag", "repo": {"files": {"flag.txt": "off\n"}}, "instruction": "Turn the flag on.",
        "test": "grep -qx on flag.txt", "limits": {"steps": 5},
    })
    model = quick(tools=True, mock_script=[
        {"mock_response": "litellm.RateLimitError"},
        {"mock_response": "Switching it.", "mock_tool_calls": [tool_call("echo on > flag.txt")]},
        {"mock_response": "litellm.RateLimitError"},
        {"mock_response": prompts.assistant_reply("Done.", "submit")},
    ])
    result = run_task(task, model, trajectory_path=tmp_path / "t.json")
    assert (result.success, result.exit_status, result.steps) == (True, "Submitted", 2)
    assert model.retries == 2 and result.cost > 0
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant", "tool", "assistant"]
