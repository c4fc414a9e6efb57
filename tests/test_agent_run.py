"""The agent on bundled tasks in a real Docker sandbox, driven by replayed replies."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from skillgraft.agent import prompts
from skillgraft.agent.models.replay_model import ReplayModel
from skillgraft.agent.loadout import Loadout, LoadoutError, SkillMode, make_loadout
from skillgraft.agent.runner import AdapterUnsupported, run_task
from skillgraft.agent.task import Limits, Task, load_task

pytestmark = pytest.mark.docker

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"


def bash(command: str, thought: str = "Next.") -> str:
    return prompts.assistant_reply(thought, command)


def test_replay_solves_a_bundled_task_and_the_test_says_so(tmp_path):
    traj = tmp_path / "t.json"
    steps = []
    result = run_task(
        load_task(EXAMPLES / "slugify.yaml"),
        ReplayModel.from_file(EXAMPLES / "replays" / "slugify-solve.json"),
        trajectory_path=traj,
        on_step=steps.append,
        info={"session_id": 7},
    )
    assert (result.success, result.reward, result.exit_status) == (True, 1.0, "Submitted")
    assert result.test_returncode == 0 and "4 passed" in result.test_output
    assert '+    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")' in result.patch
    assert result.steps == 5 and [s.number for s in steps] == [1, 2, 3, 4, 5]
    assert steps[1].result.returncode == 0 and "2 failed" in steps[1].result.output
    assert steps[-1].command == "submit" and steps[-1].result is None

    doc = json.loads(traj.read_text())
    assert doc["messages"] == result.messages
    assert [m["role"] for m in doc["messages"]] == ["system", "user"] + ["assistant", "user"] * 4 + ["assistant"]
    assert doc["messages"][0]["content"] == prompts.system_prompt()
    assert doc["messages"][3]["content"].startswith("<returncode>0</returncode>\n<output>\n")
    info = doc["info"]
    assert info["session_id"] == 7 and info["task"]["id"] == "slugify-separators"
    assert info["exit_status"] == "Submitted" and info["reward"] == 1.0 and info["patch"] == result.patch
    assert info["test"]["passed"] is True and info["limits"]["steps"] == 15
    assert set(info["timings"]) >= {"open", "setup", "agent", "model", "commands", "test", "total"}
    assert info["timings"] == result.timings
    t = result.timings
    assert 0 < t["commands"] <= t["agent"] and 0 <= t["model"] <= t["agent"] <= t["total"]


def test_replay_with_a_wrong_fix_fails_and_the_test_says_so(tmp_path):
    result = run_task(
        load_task(EXAMPLES / "intervals.yaml"),
        ReplayModel.from_file(EXAMPLES / "replays" / "intervals-wrong-fix.json"),
        trajectory_path=tmp_path / "t.json",
    )
    assert (result.success, result.reward, result.exit_status) == (False, 0.0, "Submitted")
    assert result.test_returncode == 1 and "failed" in result.test_output
    assert "reverse=True" in result.patch
    assert json.loads((tmp_path / "t.json").read_text())["info"]["test"]["passed"] is False


def test_the_right_fix_for_the_same_task_passes():
    result = run_task(load_task(EXAMPLES / "intervals.yaml"), ReplayModel.from_file(EXAMPLES / "replays" / "intervals-solve.json"))
    assert result.success and "start <= merged[-1][1]" in result.patch


TINY = Task.from_dict(
    {
        "id": "tiny",
        "repo": {"files": {"flag.txt": "off\n"}},
        "instruction": "Turn the flag on.",
        "test": "grep -qx on flag.txt",
        "limits": {"steps": 3, "command_timeout": 20},
    }
)


def test_step_limit_stops_the_loop_and_the_test_still_judges():
    model = ReplayModel([bash("echo on > flag.txt"), bash("true"), bash("true"), bash("true"), bash("submit")])
    result = run_task(TINY, model)
    assert result.exit_status == "StepLimit" and result.steps == 3
    assert len(model.calls) == 3  # checked before the call: the fourth reply was never asked for
    assert result.success  # the work was done before the limit; the test decides, not the exit


def test_consecutive_format_errors_stop_the_loop():
    model = ReplayModel(["no block here", "```python\nprint(1)\n```", bash("echo on > flag.txt"), "still nothing",
                         "```bash\n```", "two\n```bash\nls\n```\n```bash\nls\n```", bash("submit")])
    result = run_task(replace(TINY, limits=Limits(steps=20)), model)
    assert result.exit_status == "FormatErrors"
    assert result.steps == 6 and result.success  # the clean step in between reset the count
    errors = [m for m in result.messages if m["content"] == prompts.FORMAT_ERROR]
    assert len(errors) == 5


def test_cost_limit_and_used_up_model():
    costly = ReplayModel([{"content": bash("true"), "cost": 0.3}] * 5)
    result = run_task(replace(TINY, limits=Limits(cost=0.5)), costly)
    assert result.exit_status == "CostLimit" and result.steps == 2 and result.cost == pytest.approx(0.6)
    assert not result.success and result.reward == 0.0

    short = run_task(TINY, ReplayModel([bash("true")]))
    assert short.exit_status == "ModelError" and "used up" in short.exit_detail


def test_a_replay_cannot_sample_and_is_refused_before_anything_runs(tmp_path):
    from skillgraft.agent.models.base import ModelError, Sampling

    with pytest.raises(ModelError, match="cannot sample"):
        run_task(TINY, ReplayModel([bash("submit")]), sampling=Sampling(1.0, stream=1), trajectory_path=tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_wall_time_cuts_the_running_command_and_stops_the_loop():
    steps = []
    model = ReplayModel([bash("sleep 30; echo on > flag.txt"), bash("submit")])
    result = run_task(replace(TINY, limits=Limits(wall_time=2, command_timeout=60)), model, on_step=steps.append)
    assert result.exit_status == "TimeLimit" and len(model.calls) == 1
    assert steps[0].result.timed_out and not result.success


def test_tool_call_replies_are_recorded_as_openai_tool_messages():
    model = ReplayModel([{"content": "", "tool_command": "echo on > flag.txt"}, {"content": "done", "tool_command": "submit"}])
    result = run_task(TINY, model)
    assert result.success and result.exit_status == "Submitted"
    call, answer = result.messages[2], result.messages[3]
    assert call["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "echo on > flag.txt"}'}
    assert answer == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": answer["content"]}
    assert model.calls[1][3]["role"] == "tool"  # the model saw the tool message it will be recorded with


def test_setup_commands_run_first_and_a_failing_one_skips_the_agent():
    ok = Task.from_dict({**TINY.to_dict(), "setup": ["echo on > flag.txt"]})
    result = run_task(ok, ReplayModel([bash("submit")]))
    assert result.success and result.exit_status == "Submitted"

    broken = Task.from_dict({**TINY.to_dict(), "setup": ["echo preparing; exit 4"]})
    model = ReplayModel([bash("submit")])
    result = run_task(broken, model)
    assert result.exit_status == "SetupFailed" and "exited 4" in result.exit_detail and "preparing" in result.exit_detail
    assert model.calls == [] and not result.success


def test_a_failed_setup_is_never_solved_even_when_the_test_would_pass():
    already = Task.from_dict({**TINY.to_dict(), "repo": {"files": {"flag.txt": "on\n"}}, "setup": ["sleep 5"],
                              "limits": {"steps": 3, "command_timeout": 1}})
    result = run_task(already, ReplayModel([bash("submit")]))
    assert result.exit_status == "SetupFailed" and not result.success and result.reward == 0.0
    assert result.test_returncode is None and "not run" in result.test_output


def test_editing_the_tests_solves_nothing_and_the_trajectory_says_so(tmp_path):
    task = load_task(EXAMPLES / "slugify.yaml")
    assert task.test_files
    cheat = ReplayModel([bash("printf 'def test_nothing():\\n    pass\\n' > test_slugify.py && "
                              "printf 'import pytest\\n' > conftest.py"), bash("submit")])
    traj = tmp_path / "t.json"
    result = run_task(task, cheat, trajectory_path=traj)
    assert not result.success and "failed" in result.test_output
    assert "test_slugify.py" in result.patch  # the patch still shows what the agent did
    info = json.loads(traj.read_text())["info"]
    assert sorted(info["test_files_restored"]) == ["conftest.py", "test_slugify.py"]

    honest = run_task(task, ReplayModel.from_file(EXAMPLES / "replays" / "slugify-solve.json"), trajectory_path=traj)
    assert honest.success and "test_files_restored" not in json.loads(traj.read_text())["info"]


def test_links_stay_links_and_one_leaving_the_repo_is_not_followed(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host only 8d1f\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "flag.txt").write_text("off\n")
    (repo / "leak").symlink_to(secret)
    (repo / "up").symlink_to(tmp_path)  # a folder above the repo: copying it would go in circles
    (repo / "inside").symlink_to("flag.txt")
    task = Task.from_dict({**TINY.to_dict(), "repo": str(repo)})
    model = ReplayModel([bash("readlink leak; cat leak; cat inside; ls up/ | head -3; echo on > flag.txt"), bash("submit")])
    traj = tmp_path / "t.json"
    result = run_task(task, model, trajectory_path=traj)
    assert result.success
    seen = result.messages[3]["content"]
    assert str(secret) in seen and "host only 8d1f" not in seen and "off" in seen
    assert "host only" not in traj.read_text()
    assert json.loads(traj.read_text())["info"]["links_outside_repo"] == ["leak", "up"]


def test_planted_secret_is_redacted_from_the_trajectory(tmp_path, monkeypatch):
    secret = "s3cr3t-value-planted-for-this-test"
    monkeypatch.setenv("SKILLGRAFT_TEST_API_KEY", secret)
    github_token = "ghp_" + "a1B2" * 9
    task = Task.from_dict({**TINY.to_dict(), "repo": {"files": {"flag.txt": "off\n", "creds.txt": f"{secret}\n{github_token}\n"}}})
    model = ReplayModel([bash("cat creds.txt", thought=f"I will not print {secret}"), bash("submit")])
    traj = tmp_path / "t.json"
    result = run_task(task, model, trajectory_path=traj, info={"note": f"caller passed {secret}"})
    text = traj.read_text()
    assert secret in result.messages[3]["content"]  # the run itself saw it ...
    assert secret not in text and github_token not in text  # ... the file does not
    assert text.count("[REDACTED]") >= 4


def test_adapters_are_refused_for_a_model_that_cannot_take_them(tmp_path):
    with pytest.raises(AdapterUnsupported, match="cannot take LoRA adapters"):
        run_task(TINY, ReplayModel([]), loadout=Loadout(SkillMode.parametric, adapter_dir=tmp_path))
    with pytest.raises(LoadoutError, match="cannot take LoRA adapters"):  # refused before any run starts
        make_loadout(None, ReplayModel([]), mode="parametric", adapters=[tmp_path])
    with pytest.raises(ValueError, match="written by the runner"):
        run_task(TINY, ReplayModel([]), info={"reward": 2})
