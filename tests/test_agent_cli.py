"""`skillgraft run` and `skillgraft trajectories`: exit codes, files, listings."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillgraft.cli import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"
SOLVE = f"replay:{EXAMPLES / 'replays' / 'slugify-solve.json'}"
WRONG = f"replay:{EXAMPLES / 'replays' / 'intervals-wrong-fix.json'}"


def cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def said(res) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(res.output.split())


def test_bad_inputs_exit_2_with_the_reason(tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text("id: x\nrepo: r\ninstruction: i\ntest: t\ncolour: blue\n")
    res = cli("run", bad, "--model", SOLVE, "--home", tmp_path)
    assert res.exit_code == 2 and "unknown key 'colour'" in said(res)

    res = cli("run", EXAMPLES / "slugify.yaml", "--model", f"hf:{tmp_path / 'none'}", "--home", tmp_path)
    assert res.exit_code == 2 and "no config.json" in said(res)

    res = cli("run", EXAMPLES / "slugify.yaml", "--model", SOLVE, "--skill", tmp_path / "missing.md", "--home", tmp_path)
    assert res.exit_code == 2 and "cannot read" in said(res)

    (tmp_path / "lora").mkdir()
    (tmp_path / "lora" / "adapter_config.json").write_text("{}")
    res = cli("run", EXAMPLES / "slugify.yaml", "--model", SOLVE, "--adapter", tmp_path / "lora", "--home", tmp_path)
    assert res.exit_code == 2 and "cannot take LoRA adapters" in said(res)

    res = cli("run", EXAMPLES / "slugify.yaml", "--sandbox", "vm", "--home", tmp_path)
    assert res.exit_code == 2  # typer's own usage error


@pytest.mark.docker
def test_a_failed_setup_exits_4_as_an_error_not_a_verdict(tmp_path):
    task = tmp_path / "t.yaml"
    task.write_text("id: broken-setup\nrepo: {files: {a.txt: x}}\ninstruction: i\ntest: 'true'\nsetup: ['exit 7']\n")
    res = cli("run", task, "--model", SOLVE, "--home", tmp_path)
    assert res.exit_code == 4 and "SET-UP FAILED" in res.output and "SOLVED" not in res.output


def test_unreachable_engine_exits_3_and_says_how_to_fix_it(tmp_path):
    res = cli("run", EXAMPLES / "slugify.yaml", "--model", SOLVE, "--home", tmp_path,
              env={"DOCKER_HOST": f"unix://{tmp_path / 'no-engine.sock'}"})
    assert res.exit_code == 3 and "--sandbox bwrap" in said(res)


def test_store_runs_are_listed_filtered_by_skill_and_shown(tmp_path):
    from skillgraft.agent.trajectory import TrajectoryWriter
    from skillgraft.skills.store import Store

    home = tmp_path / "home"
    store = Store.at(home)
    version = store.add_version("regex-hints", "---\nname: regex-hints\ndescription: Regex tips.\n---\nUse +.\n")
    for name, skills in (("with-skill", [version.id]), ("without", [])):
        path = tmp_path / f"{name}.json"
        TrajectoryWriter(path, {"task": {"id": name}}).write([{"role": "user", "content": f"run {name}"}])
        store.add_trajectory(path, name, None, "Submitted", 1.0, 0.0, 1, {}, skills, [], model="replay")
    loose = home / "trajectories" / "loose.json"
    TrajectoryWriter(loose, {"task": {"id": "loose"}, "exit_status": "StepLimit", "reward": 0.0}).write([])

    listed = json.loads(cli("trajectories", "ls", "--home", home, "--json").output)
    assert [(e["ref"][:6], e["task_id"]) for e in listed] == [("store:", "without"), ("store:", "with-skill"), ("loose", "loose")]
    only = json.loads(cli("trajectories", "ls", "--skill", "regex-hints", "--home", home, "--json").output)
    assert [e["task_id"] for e in only] == ["with-skill"]
    shown = cli("trajectories", "show", only[0]["ref"], "--home", home)
    assert shown.exit_code == 0 and "run with-skill" in shown.output
    assert cli("trajectories", "ls", "--skill", "x", "--home", tmp_path / "empty").exit_code == 2


@pytest.mark.docker
def test_run_solved_and_not_solved_then_list_and_show(tmp_path):
    home = tmp_path / "home"
    skill = tmp_path / "regex-hints.md"
    skill.write_text("Use + to match runs of characters.")
    res = cli("run", EXAMPLES / "slugify.yaml", "--model", SOLVE, "--home", home, "--skill", skill)
    assert res.exit_code == 0, res.output
    assert "SOLVED" in res.output and "cat slugify.py" in said(res)

    out = tmp_path / "wrong.json"
    res = cli("run", EXAMPLES / "intervals.yaml", "--model", WRONG, "--home", home, "--output", out, "--json")
    assert res.exit_code == 1, res.output
    summary = json.loads(res.output)
    assert summary["success"] is False and summary["exit_status"] == "Submitted" and summary["trajectory"] == str(out)

    listed = json.loads(cli("trajectories", "ls", "--home", home, "--json").output)
    assert [e["task_id"] for e in listed] == ["slugify-separators"]  # --output put the other elsewhere
    first = listed[0]
    assert first["reward"] == 1.0 and first["steps"] == 5 and first["exit_status"] == "Submitted"

    doc = json.loads(Path(first["path"]).read_text())
    assert doc["info"]["skills"] == ["regex-hints"]
    assert '<skill name="regex-hints">\nUse + to match runs of characters.\n</skill>' in doc["messages"][1]["content"]

    shown = cli("trajectories", "show", first["ref"], "--home", home)
    assert shown.exit_code == 0 and "cat slugify.py" in shown.output and "4 passed" in shown.output
    shown = cli("trajectories", "show", out, "--home", home, "--json")
    assert json.loads(shown.output)["info"]["reward"] == 0.0
    assert cli("trajectories", "show", "nothing-here", "--home", home).exit_code == 2
    assert "runs" in cli("trajectories", "ls", "--home", home).output

    from skillgraft.skills.store import Store

    store = Store.at(home)  # once a store exists, runs are recorded in it too
    assert cli("run", EXAMPLES / "slugify.yaml", "--model", SOLVE, "--home", home).exit_code == 0
    (row,) = store.trajectories()
    assert (row.task_id, row.outcome, row.reward, row.steps, row.model) == ("slugify-separators", "Submitted", 1.0, 5, SOLVE)
    listed = json.loads(cli("trajectories", "ls", "--home", home, "--json").output)
    assert [e["ref"] for e in listed] == [f"store:{row.id}", first["ref"]]


def test_runs_table_stays_readable_at_80_columns():
    from rich.console import Console

    from skillgraft.commands.trajectories import Entry, runs_table

    ref = "20261201-184512-skillworld-inverted-comparison-1000001-3f2a"
    entries = [Entry(ref, Path("a.json"), "skillworld-inverted-comparison-1000001", "hf:/root/.skillgraft/models/skillworld",
                     "Submitted", 1.0, 5, 0.0, "2026-12-01T18:45:12"),
               Entry("store:12", Path("b.json"), "slugify-separators", "openai/gpt-4o-mini", "SetupFailed", 0.0, 0, 0.01, None)]
    console = Console(width=80, record=True)
    console.print(runs_table(entries, 80))
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 80

    def column(i: int, rendered: list[str] = lines) -> str:  # the cells of a column, wrapped parts joined back
        return "".join(line.split("│")[i].strip() for line in rendered if "│" in line)

    assert column(0) == ref + "store:12"
    assert column(1) == "skillworld-inverted-comparison-1000001slugify-separators"
    assert column(2) == "hf:…/skillworld" + "openai/gpt-4o-mini"  # a path is shortened, a model string is not
    assert column(3) == "SubmittedSetupFailed" and "…" not in column(0) + column(1) + column(3)
    wide = Console(width=140, record=True)
    wide.print(runs_table(entries, 140))
    rendered = wide.export_text().splitlines()
    assert column(2, rendered) == "hf:/root/.skillgraft/models/skillworld" + "openai/gpt-4o-mini"
    assert column(6, rendered) == "$0.0000$0.0100" and column(7, rendered) == "2026-12-01T18:45:12-"


@pytest.mark.docker
def test_run_hands_unstick_to_a_model_that_samples_unless_told_not_to_and_the_trajectory_says_which(tmp_path):
    import yaml

    from skillgraft.agent.prompts import instance_prompt, system_prompt
    from tiny_llama import build_tiny_llama

    folder = build_tiny_llama(tmp_path / "tiny", [system_prompt(), instance_prompt("Fix it.")] * 5, vocab_size=300)
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump({"id": "two", "repo": {"files": {"a.py": "X = 1\n"}}, "instruction": "Fix it.",
                                    "test": "true", "limits": {"steps": 2}}))
    for flags, expected in (((), {"tries": 3, "temperature": 1.0}), (("--no-unstick",), None)):  # on by default
        out = tmp_path / f"{len(flags)}.json"
        res = cli("run", task, "--model", f"hf:{folder}", "--home", tmp_path / "home", "--output", out, *flags, "--json")
        assert res.exit_code == 0, res.output
        info = json.loads(out.read_text())["info"]
        assert info.get("unstick") == expected and ("redraws" in info) == (expected is not None)
