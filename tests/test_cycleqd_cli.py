"""`skillgraft evolve cycleqd`: input checks, and a real run with the agent in Docker sandboxes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cycleqd_support import random_adapter_for, tiny_policy
from skillgraft.cli import app
from skillgraft.skills.store import Store

runner = CliRunner()


def _task_file(path: Path, task_id: str, test: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "id": task_id, "repo": {"files": {"README.md": "tiny\n"}}, "instruction": "Nothing to do; submit.",
        "test": test, "limits": {"steps": 1, "wall_time": 120, "command_timeout": 20, "cost": 0},
    }))
    return path


def _invoke(home: Path, *args: str):
    return runner.invoke(app, ["evolve", "cycleqd", "--home", str(home), *args])


def test_needs_two_task_sets(tmp_path: Path):
    one = _task_file(tmp_path / "t" / "a.yaml", "a", "true")
    result = _invoke(tmp_path / "home", "--tasks", f"a={one}")
    assert result.exit_code == 2
    assert "at least two task sets" in result.output


def test_bad_population_task_path_and_settings_are_refused(tmp_path: Path):
    a = _task_file(tmp_path / "t" / "a.yaml", "a", "true")
    b = _task_file(tmp_path / "t" / "b.yaml", "b", "true")
    result = _invoke(tmp_path / "home", "--tasks", f"a={a}", "--tasks", f"b={b}")
    assert result.exit_code == 2 and "matches no stored adapter" in result.output
    result = _invoke(tmp_path / "home", "--tasks", f"a={a}", "--tasks", f"b={tmp_path / 'missing.yaml'}")
    assert result.exit_code == 2 and "missing.yaml" in result.output
    result = _invoke(tmp_path / "home", "--tasks", f"a={a}", "--tasks", f"b={b}", "--sampling", "roulette")
    assert result.exit_code == 2 and "unknown sampling" in result.output
    result = _invoke(tmp_path / "home", "--tasks", f"a={a}", "--tasks", f"b={b}", "--population", "nonsense")
    assert result.exit_code == 2 and "population" in result.output
    result = _invoke(tmp_path / "home", "--tasks", f"a={a}", "--tasks", f"b={b}", "--soup-size", "-1")
    assert result.exit_code == 2 and "--soup-size" in result.output


@pytest.mark.docker
def test_runs_with_the_agent_in_sandboxes_and_resumes(tmp_path: Path):
    home = tmp_path / "home"
    model = tiny_policy(tmp_path / "policy")
    store = Store.at(home)
    parent = None
    for seed in (1, 2):
        folder = random_adapter_for(model, tmp_path / f"adapter{seed}", seed)
        from skillgraft.hypernet.peft_io import read_info

        parent = store.commit_global(folder, parent, {"method": "test"}, base_fingerprint=read_info(folder).fingerprint).id
    store.close()
    # the verdict comes from each task's test command, so every adapter solves "easy" and fails "hard"
    easy = _task_file(tmp_path / "sets" / "easy" / "e.yaml", "easy-1", "true")
    hard = _task_file(tmp_path / "sets" / "hard" / "h.yaml", "hard-1", "false")
    args = ["--tasks", f"easy={easy.parent}", "--tasks", f"hard={hard}", "--model", f"hf:{model}",
            "--children", "1", "--seed", "4", "--merge-scale", "2", "--merge-scale", "1", "--soup-size", "1", "--json"]
    result = _invoke(home, "--generations", "1", *args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    gens = report["generations"]
    assert [g["generation"] for g in gens] == [0, 1]
    start = gens[0]["archives"]
    assert start["easy"]["best_quality"] == 1.0 and start["hard"]["best_quality"] == 0.0
    assert gens[0]["evaluations"] == 4  # two checkpoints x two task sets, one episode each
    merge = report["merge"]
    # scores cannot differ between adapters here, so the merge only ties the global and is not promoted
    assert merge["candidate_scores"] == {"easy": 1.0, "hard": 0.0} and not merge["accepted"]
    # both scales tie on the search's tasks, so the smaller is kept
    assert merge["scale_scores"] == {"1.0": 0.5, "2.0": 0.5} and merge["scale"] == 1.0
    # the soup tries at most one elite, and a tie adds nothing
    assert len(merge["soup"]) <= 1 and all(step["kept"] is None for step in merge["soup"])
    assert [Path(p).name for p in report["heatmaps"]] == [f"run{report['run_id']}-easy.png", f"run{report['run_id']}-hard.png"]
    assert all(Path(p).is_file() for p in report["heatmaps"])

    # resumed without --tasks (read from the run) and with the human-readable report
    resumed = _invoke(home, "--generations", "2", "--resume", str(report["run_id"]), "--model", f"hf:{model}",
                      "--no-merge")
    assert resumed.exit_code == 0, resumed.output
    assert f"CycleQD run {report['run_id']} after 2 generations" in resumed.stdout
    assert "2 | hard |" in resumed.stdout  # generation 2 optimised the second task set
    with Store.at(home) as st:
        assert st.qd_run(report["run_id"]).generation == 2
        assert len(st.global_history()) == 2  # nothing promoted
    changed = _invoke(home, "--generations", "3", "--resume", str(report["run_id"]), "--model", f"hf:{model}",
                      "--seed", "5")
    assert changed.exit_code == 2 and "--seed differs" in changed.output
