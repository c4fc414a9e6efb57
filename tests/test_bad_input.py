"""Bad input is refused in one line naming the file and what is wrong, and changes nothing."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from skillgraft.cli import app
from skillgraft.skills.adapter_files import AdapterFormatError, check_adapter_files
from skillgraft.skills.store import Store

TASK = "id: t\nrepo: {files: {a.py: 'x = 1'}}\ninstruction: x\ntest: 'true'\n"


def said(result) -> str:
    return " ".join(result.output.split())


@pytest.mark.parametrize("content, expected", [
    (b"\xff\xfei\x00d\x00", "not a UTF-8 text file"),
    (b"id: [x\nrepo: 1\n", "not valid YAML at line 2, column 5"),
    ((TASK + "limits: {command_timeout: .inf}\n").encode(), "limits.command_timeout must be a finite number"),
    ((TASK + "limits: {command_timeout: 1.0e+20}\n").encode(), "limits.command_timeout must be a finite number"),
    ((TASK + "limits: {wall_time: .nan}\n").encode(), "limits.wall_time must be a finite number"),
    ((TASK + "limits: {steps: 1e30}\n").encode(), "limits.steps must be a whole number"),
])
def test_a_bad_task_file_is_one_line_and_exit_2(tmp_path, content, expected):
    task = tmp_path / "task.yaml"
    task.write_bytes(content)
    result = CliRunner().invoke(app, ["run", str(task), "--model", "replay:/nonexistent.json", "--home", str(tmp_path / "h")])
    assert result.exit_code == 2, result.output
    assert expected in said(result) and "task.yaml" in said(result) and "Traceback" not in result.output
    assert not (tmp_path / "h" / "trajectories").exists() or not any((tmp_path / "h" / "trajectories").iterdir())


def _skill(folder: Path, name: str, body: str = "body\n") -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\n{body}")
    return folder / name


def test_links_and_oversized_skills_are_refused_and_the_rest_imported(tmp_path):
    tree = tmp_path / "tree"
    _skill(tree, "good")
    (_skill(tree, "leak") / "secret").symlink_to("/etc/hostname")
    (_skill(tree, "loop") / "again").symlink_to(".")
    (_skill(tree, "dangling") / "gone").symlink_to("/nonexistent")
    _skill(tree, "huge", "x" * 70_000)
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["skills", "import", str(tree), "--json", "--home", str(home)])
    assert result.exit_code == 2
    status = {r["name"]: (r["status"], r["error"]) for r in json.loads(result.stdout)}
    assert status["good"][0] == "created"
    for name in ("leak", "loop", "dangling"):
        assert status[name][0] == "error" and "symbolic link" in status[name][1]
    assert status["huge"][0] == "error" and "over the limit of 64 KiB" in status["huge"][1]
    store = Store.at(home)
    assert [s.name for s in store.skills()] == ["good"]
    one = CliRunner().invoke(app, ["skills", "import", str(tree / "leak"), "--home", str(home)])
    assert one.exit_code == 2 and said(one).startswith("error:") and "leak/secret: file: a symbolic link" in said(one)


@pytest.fixture
def adapter(tmp_path) -> Path:
    from skillgraft.evolve.cycleqd import synthetic_world
    from skillgraft.hypernet.peft_io import save_adapter

    world = synthetic_world(["a", "b"], seed=0)
    return save_adapter(world.experts["a"], tmp_path / "good", base_model_name="tiny", fingerprint="sha256:x",
                        target_modules=["q_proj"])


def _broken(adapter: Path, how: str) -> Path:
    folder = adapter.parent / how
    shutil.copytree(adapter, folder)
    weights, config = folder / "adapter_model.safetensors", folder / "adapter_config.json"
    if how == "truncated":
        weights.write_bytes(weights.read_bytes()[:100])
    elif how == "random":
        weights.write_bytes(bytes(range(256)) * 8)
    elif how == "bad-json":
        config.write_text("{not json")
    elif how == "no-weights":
        weights.unlink()
    elif how == "rank-says-half":
        data = json.loads(config.read_text())
        config.write_text(json.dumps({**data, "r": data["r"] // 2}))
    elif how == "nan":
        tensors = load_file(str(weights))
        first = next(iter(tensors))
        tensors[first][0, 0] = float("nan")
        save_file(tensors, str(weights))
    return folder


BROKEN = {"truncated": "not a readable safetensors file", "random": "not a readable safetensors file",
          "bad-json": "not valid JSON", "no-weights": "cannot be read", "rank-says-half": "rank-4 LoRA",
          "nan": "NaN or infinite"}


@pytest.mark.parametrize("how", list(BROKEN))
def test_a_broken_adapter_never_becomes_a_row(adapter, tmp_path, how):
    folder = _broken(adapter, how)
    with pytest.raises(AdapterFormatError, match=BROKEN[how]):
        check_adapter_files(folder)
    store = Store.at(tmp_path / "home")
    with pytest.raises(AdapterFormatError):
        store.add_adapter(folder, "checkpoint", "sha256:x", 8, 8.0, ["q_proj"], {})
    with pytest.raises(AdapterFormatError):
        store.commit_global(folder, None, {"method": "test"}, base_fingerprint="sha256:x")
    assert store.adapters() == [] and store.artifacts.hashes() == set()


def test_store_check_verify_loads_every_adapter(adapter, tmp_path):
    store = Store.at(tmp_path / "home")
    row = store.add_adapter(adapter, "checkpoint", "sha256:x", 8, 8.0, ["q_proj"], {})
    assert store.check(verify=True).ok
    # damage it in place, keeping the recorded hash out of the way: an adapter's bytes changed
    weights = store.adapter_path(row.id) / "adapter_model.safetensors"
    weights.chmod(0o644)
    tensors = load_file(str(weights))
    tensors[next(iter(tensors))][0, 0] = float("nan")
    save_file(tensors, str(weights))
    report = store.check(verify=True)
    assert not report.ok and report.corrupt and report.corrupt[0].row_id == row.id


def test_a_broken_adapter_is_refused_by_the_model_and_leaves_the_base_as_it_was(adapter, tmp_path):
    from skillgraft.agent.models.base import ModelError
    from skillgraft.agent.models.hf_model import HFModel
    from tiny_llama import build_tiny_llama

    model = HFModel(build_tiny_llama(tmp_path / "base", ["hello world"] * 3), max_new_tokens=4)
    before = {k: v.clone() for k, v in model._base.state_dict().items()}
    for how in ("truncated", "bad-json", "nan"):
        with pytest.raises(ModelError, match=BROKEN[how]):
            model.load_adapter(_broken(adapter, how))
    assert model.adapter_dir is None
    after = model._base.state_dict()
    assert set(after) == set(before) and all(torch.equal(before[k], after[k]) for k in before)
