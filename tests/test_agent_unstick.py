"""Going back when the agent would repeat a command from the same files, in a real sandbox."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from skillgraft.agent import prompts
from skillgraft.agent.models.base import ModelReply, Sampling
from skillgraft.agent.models.replay_model import ReplayModel
from skillgraft.agent.runner import run_task
from skillgraft.agent.task import InlineRepo, Limits, Task
from skillgraft.agent.unstick import REDRAW_STREAM, Unstick
from skillgraft.evolve.learn.episode import load_episode

pytestmark = pytest.mark.docker

NO_OP = "sed -i 's/LIMIT = 1/LIMIT = 1/' limits.py"
FIX = "sed -i 's/LIMIT = 1/LIMIT = 2/' limits.py"
WRONG = "sed -i 's/LIMIT = 1/LIMIT = 3/' limits.py"


def _task(steps: int) -> Task:
    files = {"limits.py": "LIMIT = 1\n", "test_limits.py": "from limits import LIMIT\n\ndef test_limit():\n    assert LIMIT == 2\n"}
    return Task(id="limit", instruction="Make the test pass.", repo=InlineRepo(files), test="python3 -m pytest -q",
                limits=Limits(steps=steps, wall_time=300))


RAMBLE = 'THOUGHT: the dict has "values"]"]/"/"/"/"/"/"/"/"/'  # a reply cut at its token limit: no command


class Stubborn:
    """Proposes `greedy` whenever it is asked plainly; a sampled draw proposes `drawn` (None: a
    reply with no command in it)."""

    name = "stubborn"

    def __init__(self, drawn: str = FIX, greedy: str = NO_OP):
        self.drawn, self.greedy = drawn, greedy
        self.sampling: Sampling | None = None
        self.streams: list[int] = []

    @contextmanager
    def sampled(self, sampling: Sampling) -> Iterator[None]:
        before, self.sampling = self.sampling, sampling
        try:
            yield
        finally:
            self.sampling = before

    def query(self, messages: list[dict]) -> ModelReply:
        if self.sampling is None:
            return ModelReply(_reply("Same again.", self.greedy), usage={"completion_tokens": 5})
        self.streams.append(self.sampling.stream)
        return ModelReply(_reply("Something else.", self.drawn), usage={"completion_tokens": 7})


def _reply(thought: str, command: str | None) -> str:
    return RAMBLE if command is None else prompts.assistant_reply(thought, command)


def test_a_command_repeated_from_the_same_files_sends_the_run_back_and_a_redraw_there_solves_it(tmp_path):
    model = Stubborn()
    path = tmp_path / "t.json"
    result = run_task(_task(steps=4), model, trajectory_path=path, unstick=Unstick(tries=2))
    assert result.success and result.steps == 4
    # 1: the no-op runs; 2: proposed again from the same files: back to step 1, where a draw gives
    # the fix; 3: the no-op, new on the fixed files, runs; 4: again: back to step 2 (the last change),
    # where both draws give the fix, already tried there: nothing is undone, the reply stands.
    assert [s.command for s in result.history] == [NO_OP, FIX, NO_OP, NO_OP]
    assert [(s.replaced, s.back_to) for s in result.history] == [(None, None), (NO_OP, 1), (None, None), (None, None)]
    assert model.streams == [REDRAW_STREAM, REDRAW_STREAM, REDRAW_STREAM + 1]
    kept = [m["content"] for m in result.messages if m["role"] == "assistant"]
    assert kept == [prompts.assistant_reply("Something else.", FIX)] + [prompts.assistant_reply("Same again.", NO_OP)] * 2
    assert [s.command for s in result.kept] == [FIX, NO_OP, NO_OP]  # the steps of that conversation
    info = json.loads(path.read_text())["info"]
    assert info["redraws"] == 3 and info["unstick"] == {"tries": 2, "temperature": 1.0}
    assert info["rewinds"] == [{"step": 2, "back_to": 1, "dropped": [NO_OP]}]
    assert info["usage"]["completion_tokens"] == 4 * 5 + 3 * 7  # the redraws' tokens count, not as steps


def test_going_back_puts_the_files_back_before_the_edit_that_led_nowhere(tmp_path):
    model = Stubborn(greedy=WRONG)
    path = tmp_path / "t.json"
    result = run_task(_task(steps=4), model, unstick=Unstick(tries=1), trajectory_path=path)
    # 1: LIMIT becomes 3; 2: the same sed, new on those files, changes nothing; 3: proposed again:
    # back to step 1, the file back to LIMIT = 1, and the draw there (the fix) runs on it.
    assert [s.command for s in result.history] == [WRONG, WRONG, FIX, WRONG]
    assert [s.back_to for s in result.history] == [None, None, 1, None]
    assert [s.command for s in result.kept] == [FIX, WRONG]
    assert result.success and "+LIMIT = 2" in result.patch  # the fix found LIMIT = 1 again: the files were put back
    # what each command did to the files, known once the next command came: the first WRONG changed
    # them, the second did not; on the branch kept, FIX did; the last command's is not known
    assert [s.changed for s in result.history] == [True, False, True, None]
    # the trajectory file keeps them for the branch kept, and a recipe induced from it later reads them
    assert json.loads(path.read_text())["info"]["changed"] == [True, None]
    assert [(s.command, s.changed) for s in load_episode(path).steps] == [(FIX, True), (WRONG, None)]


def test_without_unstick_the_same_model_goes_round_until_its_steps_run_out():
    result = run_task(_task(steps=4), Stubborn())
    assert not result.success and [s.command for s in result.history] == [NO_OP] * 4
    assert all(s.replaced is None for s in result.history)


def test_when_every_redraw_repeats_the_reply_stands():
    model = Stubborn(drawn=NO_OP)
    result = run_task(_task(steps=3), model, unstick=Unstick(tries=3))
    assert [s.command for s in result.history] == [NO_OP] * 3 and not result.success
    assert model.streams == [REDRAW_STREAM, REDRAW_STREAM + 1, REDRAW_STREAM + 2] * 2


def test_a_model_that_cannot_sample_is_never_redrawn(tmp_path):
    replies = [prompts.assistant_reply("Same again.", NO_OP)] * 3
    result = run_task(_task(steps=3), ReplayModel(replies), unstick=Unstick(), trajectory_path=tmp_path / "t.json")
    assert [s.command for s in result.history] == [NO_OP] * 3 and not result.success
    info = json.loads((tmp_path / "t.json").read_text())["info"]
    assert "unstick" not in info and "redraws" not in info  # the trajectory does not claim what did not happen


def test_a_reply_with_no_command_is_drawn_again_in_its_place(tmp_path):
    model = Stubborn(greedy=None)
    path = tmp_path / "t.json"
    result = run_task(_task(steps=2), model, unstick=Unstick(tries=2), trajectory_path=path)
    # each greedy reply rambles to its token limit; the first draw at that same point holds the fix
    assert result.success and [s.command for s in result.history] == [FIX, FIX]
    assert [s.malformed for s in result.history] == [RAMBLE, RAMBLE] and not any(s.format_error for s in result.history)
    assert model.streams == [REDRAW_STREAM, REDRAW_STREAM]
    assistant = [m["content"] for m in result.messages if m["role"] == "assistant"]
    assert assistant == [prompts.assistant_reply("Something else.", FIX)] * 2  # the rambling replies are not kept
    info = json.loads(path.read_text())["info"]
    assert info["malformed"] == [1, 2] and info["redraws"] == 2 and info["rewinds"] == []


def test_when_no_draw_holds_a_command_the_model_is_told_as_before():
    model = Stubborn(greedy=None, drawn=None)
    result = run_task(_task(steps=5), model, unstick=Unstick(tries=2))
    assert result.exit_status == "FormatErrors" and [s.format_error for s in result.history] == [True] * 3
    assert model.streams == [REDRAW_STREAM, REDRAW_STREAM + 1] * 3
    told = [m["content"] for m in result.messages if m["role"] == "assistant"]
    assert told == [RAMBLE] * 3  # the malformed reply stands, each followed by the format error


def test_unstick_refuses_settings_that_cannot_redraw():
    with pytest.raises(ValueError, match="at least one redraw"):
        Unstick(tries=0)
    with pytest.raises(ValueError, match="above 0"):
        Unstick(temperature=0)


def test_the_learner_gives_its_runs_unstick_and_learns_from_the_run_it_rescued(tmp_path):
    from skillgraft.evolve.learn.loop import LearnConfig, Learner
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skills.store import Store

    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    task = replace(_task(steps=3), family="limits")
    stuck = Learner(store, Stubborn(greedy=WRONG), None, OfflineSummariser(), LearnConfig(skill_mode="context"), tmp_path / "off")
    assert not stuck.run_session([task]).outcomes[0].success
    config = LearnConfig(skill_mode="context", unstick=Unstick(tries=1))
    on = Learner(store, Stubborn(greedy=WRONG), None, OfflineSummariser(), config, tmp_path / "on")
    outcome = on.run_session([task]).outcomes[0]
    assert outcome.success and outcome.learned is not None
    body = store.latest_version(outcome.learned.split("@")[0]).body
    # the redraw that ended the run, not the edits of the branch it went back from
    assert "sed -i 's/LIMIT = 1/LIMIT = 2/' FILE" in body and "LIMIT = 3" not in body
    run = next(t for t in store.trajectories() if t.reward > 0)
    info = json.loads(store.trajectory_path(run.id).read_text())["info"]
    assert info["unstick"] == {"tries": 1, "temperature": 1.0} and info["redraws"] == 1


def test_where_the_trail_goes_back_to():
    from skillgraft.agent.unstick import Mark, Trail

    trail = Trail()
    for step, (state, command) in enumerate([("s0", "cat a"), ("s0", "edit"), ("s1", "test"), ("s1", "cat a")], 1):
        trail.add(Mark(state, 2 * step, step, command))
    assert trail.back_to("s1", "test") == 1  # the edit, the last command that changed the files
    assert [m.command for m in trail.cut(1)] == ["edit", "test", "cat a"] and len(trail.marks) == 1
    assert trail.before("s1", "test")  # what was tried stays known when its branch is dropped
    trail.add(Mark("s0", 4, 5, "ls"))
    assert trail.back_to("s0", "ls") == 1  # nothing changed the files: the first run of the command
    assert trail.back_to("s0", "edit") == 0  # it ran only in the dropped branch: the branch's start
    assert trail.before("s1", " test ") and trail.before("s0", "cat  a")  # spacing makes no new command
    assert not trail.before("s0", "cat b")
