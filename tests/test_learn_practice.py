"""Practice: a task the session failed is run again, sampled from other streams of draws, and a
success found so is learned from, while the session keeps the score of its own run. Real store,
real Docker sandbox; the policy is SkillWorld's scripted expert on one stream only."""
from __future__ import annotations

import json
from contextlib import contextmanager

import pytest

from skillgraft.agent import prompts
from skillgraft.agent.models.base import ModelReply, Sampling, SamplingModel
from skillgraft.evolve.learn.loop import LearnConfig, Learner
from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
from skillgraft.skills.store import Store

pytestmark = pytest.mark.docker


class SolvesOnOneStream:
    """Acts as the expert when sampled from stream `solving`; otherwise submits at once, and fails."""

    name = "one-stream-expert"

    def __init__(self, task, solving: int):
        self.task, self.solving, self.stream, self.asked = task, solving, 0, []

    @contextmanager
    def sampled(self, sampling: Sampling):
        self.asked.append((sampling.temperature, sampling.stream))
        self.stream = sampling.stream
        try:
            yield
        finally:
            self.stream = 0

    def query(self, messages):
        from skillgraft.skillworld.expert import ExpertModel

        if self.stream == self.solving:
            return ExpertModel(self.task).query(messages)
        return ModelReply(content=prompts.assistant_reply("Nothing to change.", prompts.SUBMIT_COMMAND))


def test_a_failed_task_is_practised_until_a_run_succeeds_and_that_run_is_learned_from(tmp_path):
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    wt, later = generate("off_by_one", HELDOUT_START + 31), generate("off_by_one", HELDOUT_START + 32)
    model = SolvesOnOneStream(wt, solving=2)
    assert isinstance(model, SamplingModel)
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    config = LearnConfig(skill_mode="context", practice=3, practice_temperature=0.7)
    learner = Learner(store, model, None, OfflineSummariser(), config, tmp_path / "work")
    report = learner.run_session([wt.task()])

    outcome = report.outcomes[0]
    assert not outcome.success and report.successes == 0  # the session keeps its own run's score
    assert outcome.practice == 2 and outcome.learned == "off-by-one@v1"
    assert model.asked == [(0.7, 1), (0.7, 2)]  # stream 3 was not needed
    assert report.summary()["solved_in_practice"] == 1

    # the session holds its own run; the practice runs are recorded outside it, naming it
    session_runs = store.trajectories(session_id=report.session_id)
    assert [t.id for t in session_runs] == [outcome.trajectory_id]
    version = store.latest_version("off-by-one")
    taught = store.trajectory(version.trajectory_id)
    assert taught.session_id is None and taught.reward == 1.0
    info = json.loads(store.trajectory_path(taught).read_text())["info"]
    assert info["practice"] == 2 and info["session_id"] == report.session_id
    assert info["sampling"] == {"temperature": 0.7, "stream": 2}

    # what practice taught reaches the next run of the family
    assert learner.loadout_for(later.task()).refs == ["off-by-one@v1"]

    # a family with no skill of its own: its session run gets none, its practice runs borrow the
    # closest skill, and the success is written into the family's own skill, not the borrowed one
    other = generate("wrong_constant", HELDOUT_START + 34)
    assert learner.loadout_for(other.task()).refs == []
    model = SolvesOnOneStream(other, solving=1)
    report = Learner(store, model, None, OfflineSummariser(), config, tmp_path / "work").run_session([other.task()])
    outcome = report.outcomes[0]
    assert outcome.skills == [] and outcome.practice == 1 and outcome.learned == "wrong-constant@v1"
    borrowed = store.trajectory(store.latest_version("wrong-constant").trajectory_id)
    assert json.loads(store.trajectory_path(borrowed).read_text())["info"]["skills"] == ["off-by-one"]
    assert store.latest_version("off-by-one").number == 1


def test_learning_off_does_not_practise(tmp_path):
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    wt = generate("off_by_one", HELDOUT_START + 33)
    model = SolvesOnOneStream(wt, solving=1)
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    learner = Learner(store, model, None, OfflineSummariser(), LearnConfig(learning=False, skill_mode="context", practice=2),
                      tmp_path / "work")
    outcome = learner.run_session([wt.task()]).outcomes[0]
    assert not outcome.success and outcome.practice is None and model.asked == []
    with pytest.raises(ValueError, match="temperature above 0"):
        LearnConfig(practice=1, practice_temperature=0.0)
