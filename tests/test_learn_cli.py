"""`skillgraft learn` and `skillgraft refine` from the command line, on a real sandbox and store."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from skillgraft.agent.prompts import assistant_reply
from skillgraft.cli import app

TASK = {"id": "make-two", "repo": {"files": {"calc.py": "def two():\n    return 1\n"}},
        "instruction": "two() must return 2.", "test": "python3 -c 'import calc; assert calc.two() == 2'",
        "limits": {"steps": 4}}


def write(tmp_path: Path, sessions: int) -> tuple[Path, Path]:
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(TASK))
    replies = [assistant_reply("Read it.", "cat calc.py"), assistant_reply("Fix the value.", "sed -i 's/return 1/return 2/' calc.py"),
               assistant_reply("Done.", "submit")] * sessions
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps(replies))
    return task, replay


@pytest.mark.docker
def test_learn_runs_sessions_records_them_and_draws_the_curve(tmp_path):
    task, replay = write(tmp_path, 2)
    home = tmp_path / "home"
    curve = tmp_path / "curve.png"
    result = CliRunner().invoke(app, ["learn", str(task), "--sessions", "2", "--no-baseline", "--model", f"replay:{replay}",
                                      "--home", str(home), "--curve", str(curve), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    on = out["sessions"]["on"]
    assert [s["successes"] for s in on] == [1, 1] and on[0]["learned"] == ["make-two@v1"]
    assert curve.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    from skillgraft.skills.store import Store

    store = Store(f"sqlite:///{home / 'store.db'}", home / "artifacts")
    v = store.latest_version("make-two")
    assert v.origin == "summarised" and "sed -i 's/return 1/return VALUE/' FILE" in v.body
    # unstick (on by default) reaches the learner's config (a replay cannot sample: its runs are never redrawn)
    assert store.session(on[0]["session_id"]).config["unstick"] == {"tries": 3, "temperature": 1.0}
    # the second session had the learned skill in its context (skill mode "context": a replay model takes no adapters)
    second = store.trajectories(session_id=on[1]["session_id"])[0]
    assert second.skill_version_ids == [v.id]
    first_user = next(m for m in json.loads(store.trajectory_path(second).read_text())["messages"] if m["role"] == "user")
    assert '<skill name="make-two">' in first_user["content"]


@pytest.mark.docker
def test_learn_with_workers_runs_a_session_in_waves_each_with_what_the_last_taught(tmp_path):
    """--workers 3 without --ray: a session's three tasks run at once in this process's threads
    (each thread its own model), are recorded in task order, and the next session learns from them."""
    task, replay = write(tmp_path, 3)
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["learn", str(task), str(task), str(task), "--sessions", "2", "--no-baseline",
                                      "--model", f"replay:{replay}", "--workers", "3", "--home", str(home),
                                      "--curve", str(tmp_path / "curve.png"), "--json"])
    assert result.exit_code == 0, result.output
    on = json.loads(result.stdout)["sessions"]["on"]
    assert [s["successes"] for s in on] == [3, 3]
    from skillgraft.skills.store import Store

    store = Store(f"sqlite:///{home / 'store.db'}", home / "artifacts")
    first, second = (sorted(store.trajectories(session_id=s["session_id"]), key=lambda t: t.id) for s in on)
    assert len(first) == len(second) == 3
    assert all(row.skill_version_ids == [] for row in first)  # one wave: nobody had learned anything yet
    v = store.latest_version("make-two")
    assert all(row.skill_version_ids == [v.id] for row in second)
    # the same task three times in one wave: three trajectory files, none overwritten
    written = home / "cache" / "learn" / "trajectories" / f"session-{on[0]['session_id']}"
    assert sorted(p.name for p in written.glob("*.json")) == ["make-two.1.json", "make-two.2.json", "make-two.json"]


def test_learn_refuses_bad_input_with_exit_code_2(tmp_path):
    task, replay = write(tmp_path, 1)
    runner = CliRunner()
    both = runner.invoke(app, ["learn", str(task), "--world", "skillworld", "--home", str(tmp_path)])
    assert both.exit_code == 2 and "one of the two" in both.output
    neither = runner.invoke(app, ["learn", "--home", str(tmp_path)])
    assert neither.exit_code == 2
    parametric = runner.invoke(app, ["learn", str(task), "--model", f"replay:{replay}", "--skill-mode", "parametric",
                                     "--home", str(tmp_path)])
    assert parametric.exit_code == 2 and "takes no adapters" in " ".join(parametric.output.split())
    sampled = runner.invoke(app, ["learn", str(task), "--model", f"replay:{replay}", "--temperature", "0.8",
                                  "--home", str(tmp_path)])
    assert sampled.exit_code == 2 and "a temperature does not apply" in " ".join(sampled.output.split())
    practised = runner.invoke(app, ["learn", str(task), "--model", f"replay:{replay}", "--practice", "2",
                                    "--home", str(tmp_path)])
    assert practised.exit_code == 2 and "cannot sample" in " ".join(practised.output.split())
    cold = runner.invoke(app, ["learn", str(task), "--model", f"replay:{replay}", "--practice", "2",
                               "--practice-temperature", "0", "--home", str(tmp_path)])
    assert cold.exit_code == 2 and "temperature above 0" in " ".join(cold.output.split())
    tuned = runner.invoke(app, ["learn", str(task), "--model", f"replay:{replay}", "--tune-steps", "10",
                                "--home", str(tmp_path)])
    assert tuned.exit_code == 2 and "--tune-steps tunes compiled skills" in " ".join(tuned.output.split())
    anchored = runner.invoke(app, ["learn", str(task), "--model", f"replay:{replay}", "--tune-anchor-weight", "0.5",
                                   "--home", str(tmp_path)])
    assert anchored.exit_code == 2 and "give --tune-steps too" in " ".join(anchored.output.split())
    loose = runner.invoke(app, ["learn", str(task), "--model", f"replay:{replay}", "--anchor-task", str(task),
                                "--home", str(tmp_path)])
    assert loose.exit_code == 2 and "give --tune-anchor-weight too" in " ".join(loose.output.split())
    missing = runner.invoke(app, ["refine", "nope", "--tasks", str(task), "--tasks", str(task), "--home", str(tmp_path),
                                  "--model", f"replay:{replay}"])
    assert missing.exit_code == 2 and "no skill named 'nope'" in " ".join(missing.output.split())


def test_world_validation_holds_the_learned_families_and_one_task_of_each_seen_family():
    from skillgraft.jobs.learning import LearnOptions, plan_sessions
    from skillgraft.skillworld.families import GROUPS, SEEN

    plan, validation = plan_sessions(LearnOptions(world="skillworld", families=["learning"], sessions=2, per_session=3))
    learning = set(GROUPS["learning"])
    session_ids = {t.id for tasks in plan for t in tasks}
    assert not session_ids & {t.id for t in validation}
    by_family = {}
    for t in validation:
        by_family.setdefault(t.family, []).append(t)
    assert {f: len(ts) for f, ts in by_family.items()} == {**{f: 2 for f in learning}, **{f: 1 for f in SEEN}}


def test_world_anchors_are_two_tasks_of_each_seen_family_apart_from_sessions_and_validation():
    from collections import Counter

    from skillgraft.jobs.learning import LearnOptions, anchor_tasks, plan_sessions
    from skillgraft.skillworld.families import SEEN

    options = LearnOptions(world="skillworld", families=["learning"], sessions=2, per_session=3)
    assert anchor_tasks(options) == []  # no anchor weight, no anchors
    anchored = LearnOptions(world="skillworld", families=["learning"], sessions=2, per_session=3, anchor_weight=0.5)
    anchors = anchor_tasks(anchored)
    assert Counter(t.family for t in anchors) == {f: 2 for f in SEEN}
    plan, validation = plan_sessions(anchored)
    assert not {t.id for t in anchors} & ({t.id for tasks in plan for t in tasks} | {t.id for t in validation})


def test_the_learners_temperature_reaches_its_model_and_every_worker_model(tmp_path):
    from skillgraft.agent.prompts import instance_prompt, system_prompt
    from skillgraft.jobs.learning import LearnOptions, _local_episodes, agent_roles
    from skillgraft.settings import load_settings
    from tiny_llama import build_tiny_llama

    folder = build_tiny_llama(tmp_path / "tiny", [system_prompt(), instance_prompt("Fix it.")] * 5, vocab_size=300)
    settings = load_settings(home=tmp_path / "home")
    options = LearnOptions(model=f"hf:{folder}", skill_mode="context", workers=2, temperature=0.7)
    roles = agent_roles(settings, options.model, None, options.skill_mode, "offline", "offline", options.temperature)
    worker = _local_episodes(settings, options).models()
    assert roles.model.temperature == worker.temperature == 0.7
    assert agent_roles(settings, options.model, None, "context", "offline", "offline").model.temperature == 0
