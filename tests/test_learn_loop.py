"""The learning loop end to end: real store, real Docker sandbox, real compiler and LoRA algebra,
a real tiny transformer taking the adapters.

The policy's replies come from SkillWorld's scripted expert (a tiny transformer that solves tasks
takes minutes to train, too long for a test); the adapters the loop builds are loaded, checked
against the base and activated on a real tiny Llama all the same.
"""
from __future__ import annotations


import pytest

from skillgraft.agent.models.hf_model import HFModel
from skillgraft.evolve.learn.global_adapter import EmaConfig
from skillgraft.evolve.learn.loop import LearnConfig, Learner
from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
from learn_support import ExpertInTinyWeights, parts  # noqa: F401  (parts is a fixture)
from skillgraft.skills.store import Store

pytestmark = pytest.mark.docker


def test_loop_learns_from_a_success_and_a_new_learner_carries_on(parts, tmp_path):
    from skillgraft.skillworld.expert import ExpertModel
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    base, compiler = parts
    url, artifacts = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts"
    model = ExpertInTinyWeights(HFModel(base, max_new_tokens=8))
    config = LearnConfig(skill_mode="both", ema=EmaConfig(alpha=0.5, rank=8))
    first, second, third = (generate("off_by_one", HELDOUT_START + s) for s in (21, 22, 23))

    # session 1, empty store: nothing to retrieve, the success becomes skill and global adapter
    store = Store(url, artifacts)
    model.expert = ExpertModel(first)
    r1 = Learner(store, model, compiler, OfflineSummariser(), config, tmp_path / "work").run_session([first.task()])
    o1 = r1.outcomes[0]
    assert o1.success and o1.skills == [] and o1.global_version is None
    assert o1.learned == "off-by-one@v1" and o1.global_after == 1
    v1 = store.latest_version("off-by-one")
    assert v1.origin == "summarised" and v1.trajectory_id == o1.trajectory_id
    compiled = store.find_compiled(v1.id, compiler.checkpoint_id)
    g1 = store.latest_global()
    assert g1.provenance["skill_version_id"] == v1.id and g1.provenance["combined"] == [{"adapter_id": compiled.id, "weight": 1.0}]

    # session 2, a fresh store object and learner (all state is in the store): it starts from
    # the global adapter and the skill that session 1 left behind
    store = Store(url, artifacts)
    learner = Learner(store, model, compiler, OfflineSummariser(), config, tmp_path / "work2")
    model.expert = ExpertModel(second)
    o2 = learner.run_session([second.task()]).outcomes[0]
    assert o2.success and o2.skills == ["off-by-one@v1"] and o2.global_version == 1
    row = store.trajectories(session_id=learner.store.sessions(kind="learn")[-1].id)[0]
    assert row.adapter_ids == [g1.id, compiled.id] and row.skill_version_ids == [v1.id]
    assert model.loaded[-1].is_dir()  # the composed adapter really went into the tiny model's weights
    first_user = next(m for m in store_messages(store, row) if m["role"] == "user")
    assert '<skill name="off-by-one">' in first_user["content"]  # mode "both": the text too
    # the success confirms v1, whose adapter the global adapter already is (the EMA of an adapter
    # with itself): no second global version with the same weights
    assert o2.learned is None and o2.global_after == 1
    assert o2.note == "confirms off-by-one@v1 (1 of 1 runs given it solved); the global adapter already holds its adapter"
    assert [g.id for g in store.global_history()] == [g1.id]

    # learning off: the run is recorded, nothing is learned
    model.expert = ExpertModel(third)
    off = Learner(store, model, compiler, OfflineSummariser(), LearnConfig(skill_mode="both", learning=False),
                  tmp_path / "work3").run_session([third.task()])
    assert off.outcomes[0].success and off.outcomes[0].learned is None
    assert store.latest_global().id == g1.id
    sessions = store.sessions(kind="learn")
    assert len(sessions) == 3 and all(s.ended_at is not None for s in sessions)
    assert sessions[0].summary["learned"] == ["off-by-one@v1"] and sessions[2].config["learning"] is False


def store_messages(store, row):
    import json

    return json.loads(store.trajectory_path(row).read_text())["messages"]


def test_a_learner_that_tunes_folds_the_adapter_tuned_on_the_run_it_learned_from(parts, tmp_path):
    from skillgraft.hypernet.tune import TunedCompiler, Tuning
    from skillgraft.skillworld.expert import ExpertModel
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    base, compiler = parts
    tuned = TunedCompiler(compiler, base, Tuning(steps=2, lr=1e-2))
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    model = ExpertInTinyWeights(HFModel(base, max_new_tokens=8))
    world_task = generate("off_by_one", HELDOUT_START + 24)
    model.expert = ExpertModel(world_task)
    config = LearnConfig(skill_mode="parametric", ema=EmaConfig(alpha=0.5, rank=8))
    outcome = Learner(store, model, tuned, OfflineSummariser(), config, tmp_path / "work").run_session(
        [world_task.task()]).outcomes[0]
    assert outcome.success and outcome.learned == "off-by-one@v1"
    version = store.latest_version("off-by-one")
    adapter = store.find_compiled(version.id, tuned.checkpoint_id)
    assert adapter.provenance["tuned_on_trajectory"] == outcome.trajectory_id == version.trajectory_id
    assert store.find_compiled(version.id, compiler.checkpoint_id) is None  # no untuned adapter was made
    assert store.latest_global().provenance["combined"] == [{"adapter_id": adapter.id, "weight": 1.0}]


def test_parametric_mode_needs_an_adapter_model(parts, tmp_path):
    from skillgraft.agent.models.replay_model import ReplayModel

    _, compiler = parts
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    with pytest.raises(ValueError, match="adapter-capable model"):
        Learner(store, ReplayModel([]), compiler, OfflineSummariser(), LearnConfig(skill_mode="parametric"), tmp_path)


KILLED_SESSION = """
    import sys, time
    from pathlib import Path
    from skillgraft.agent import prompts
    from skillgraft.agent.models.replay_model import ReplayModel
    from skillgraft.agent.task import Task
    from skillgraft.evolve.learn.loop import LearnConfig, Learner
    from skillgraft.evolve.learn.summarise_offline import OfflineSummariser
    from skillgraft.skills.store import Store

    store = Store(sys.argv[1], Path(sys.argv[2]))
    tasks = [Task.from_dict({"id": f"flag-{i}", "repo": {"files": {"flag.txt": "off\\\\n"}}, "instruction": "Turn the flag on.",
                             "test": "grep -qx on flag.txt", "limits": {"steps": 2}}) for i in range(3)]
    model = ReplayModel([prompts.assistant_reply("On.", "echo on > flag.txt"), prompts.assistant_reply("Done.", "submit")] * 3)

    def stop_here(outcome):
        print("done", outcome.task_id, flush=True)
        time.sleep(600)  # killed here, between the first task and the second

    Learner(store, model, None, OfflineSummariser(), LearnConfig(skill_mode="context"), Path(sys.argv[3])).run_session(
        tasks, on_outcome=stop_here, label="resumable")
"""


def test_a_killed_session_is_closed_by_check_and_carried_on_by_the_next_learn(tmp_path):
    from learn_support import killed_at
    from skillgraft.agent import prompts
    from skillgraft.agent.models.replay_model import ReplayModel
    from skillgraft.agent.task import Task

    url, artifacts = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts"
    Store(url, artifacts).close()
    child = killed_at(KILLED_SESSION, [url, str(artifacts), str(tmp_path / "w1")], "done flag-0")

    store = Store(url, artifacts)
    (killed,) = store.sessions(kind="learn")
    assert killed.ended_at is None and killed.config["owner"]["pid"] == child.pid
    report = store.check()
    assert report.ok and report.interrupted == [killed.id]
    closed = store.session(killed.id)
    assert closed.ended_at is not None and closed.summary == {"interrupted": True, "episodes": 1, "successes": 1, "rate": 1.0}
    assert store.check().interrupted == []  # closed once

    tasks = [Task.from_dict({"id": f"flag-{i}", "repo": {"files": {"flag.txt": "off\n"}}, "instruction": "Turn the flag on.",
                             "test": "grep -qx on flag.txt", "limits": {"steps": 2}}) for i in range(3)]
    model = ReplayModel([prompts.assistant_reply("On.", "echo on > flag.txt"), prompts.assistant_reply("Done.", "submit")] * 2)
    learner = Learner(store, model, None, OfflineSummariser(), LearnConfig(skill_mode="context"), tmp_path / "w2")
    report = learner.run_session(tasks, label="resumable")
    assert report.session_id == killed.id and report.number == 1
    assert [o.task_id for o in report.outcomes] == ["flag-0", "flag-1", "flag-2"] and report.successes == 3
    assert len(model.calls) == 4  # only the two tasks it had not run, two replies each
    assert "interrupted" in report.outcomes[0].note
    assert sorted(t.task_id for t in store.trajectories(session_id=killed.id)) == ["flag-0", "flag-1", "flag-2"]
    assert store.session(killed.id).summary["episodes"] == 3 and len(store.sessions(kind="learn")) == 1

    again = Learner(store, ReplayModel([prompts.assistant_reply("Done.", "submit")] * 3), None, OfflineSummariser(),
                    LearnConfig(skill_mode="context"), tmp_path / "w3").run_session(tasks, label="resumable")
    assert again.session_id != killed.id and again.number == 2  # a finished session is never reopened


def test_a_learner_with_anchors_folds_adapters_that_keep_their_runs_and_gives_a_skills_runs_its_own(parts, tmp_path):
    from learn_support import PoolExpert
    from skillgraft.hypernet.tune import TunedCompiler, Tuning
    from skillgraft.skillworld.generate import HELDOUT_START, generate

    base, compiler = parts
    tuned = TunedCompiler(compiler, base, Tuning(steps=2, lr=1e-2, anchor_weight=1.0))
    learnt, again, anchor = (generate(f, HELDOUT_START + s) for f, s in
                             (("off_by_one", 25), ("off_by_one", 26), ("wrong_constant", 27)))
    model = PoolExpert(HFModel(base, max_new_tokens=8), [learnt, again, anchor])
    store = Store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts")
    config = LearnConfig(skill_mode="parametric", ema=EmaConfig(alpha=0.5, rank=8))

    def learner() -> Learner:
        return Learner(store, model, tuned, OfflineSummariser(), config, tmp_path / "work", anchors=[anchor.task()])

    first = learner().run_session([learnt.task()])
    assert first.outcomes[0].success and first.outcomes[0].learned == "off-by-one@v1"
    assert any("keep the model's runs of 1 anchor tasks (1 run)" in note for note in first.notes)
    anchor_run = tmp_path / "work" / "anchors" / "000.json"
    assert anchor_run.is_file()
    version = store.latest_version("off-by-one")
    [folded] = store.latest_global().provenance["combined"]
    kept = store.adapter(folded["adapter_id"])
    assert kept.skill_version_id == version.id
    assert kept.hypernet_ckpt.startswith(tuned.checkpoint_id + "+anchor-kl1-")  # tuned keeping the anchor's run
    assert store.find_compiled(version.id, tuned.checkpoint_id) is None  # no run has retrieved the skill yet

    # a new learner reads the anchor runs instead of running them again; the skill's next run gets
    # the global adapter and the skill's own adapter, tuned without anchors
    written = anchor_run.stat().st_mtime_ns
    second = learner().run_session([again.task()])
    assert anchor_run.stat().st_mtime_ns == written
    assert second.outcomes[0].success and second.outcomes[0].skills == ["off-by-one@v1"]
    own = store.find_compiled(version.id, tuned.checkpoint_id)
    assert own is not None and own.id != kept.id
    row = store.trajectories(session_id=second.session_id)[0]
    assert row.adapter_ids == [store.global_history()[0].id, own.id]
    assert store.latest_global().provenance["combined"][-1]["adapter_id"] == kept.id  # the same anchored adapter
