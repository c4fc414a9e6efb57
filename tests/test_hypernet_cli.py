"""`skillgraft hypernet train|info` and `skillgraft compile` end to end on a tiny saved base."""
from __future__ import annotations

import json

import pytest
from peft import PeftModel
from typer.testing import CliRunner

from skillgraft.cli import app
from test_hypernet_train import make_base, make_skills, make_tokenizer


def _skill_folder(root, name: str, body: str):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: How to {name.replace('-', ' ')}.\n---\n\n{body}")
    return folder


@pytest.fixture
def base_dir(tmp_path):
    texts = make_skills(6)
    tok = make_tokenizer(texts)
    model = make_base(len(tok))
    path = tmp_path / "base"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_train_info_and_compile(tmp_path, base_dir):
    runner = CliRunner()
    home = tmp_path / "home"
    lib = tmp_path / "lib"
    for i, body in enumerate(make_skills(5)):
        _skill_folder(lib, f"skill-{i}", body)
    env = {"SKILLGRAFT_HOME": str(home)}
    res = runner.invoke(app, ["hypernet", "train", "--stage", "1", "--base", str(base_dir), "--skills", str(lib),
                              "--steps", "3", "--batch-size", "2", "--max-len", "96", "--heldout", "0.2", "--json"], env=env)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    ckpt = home / "models" / "hypernet"
    assert summary["steps"] == 3 and summary["checkpoint"] == str(ckpt) and set(summary["heldout_loss"]) == {"none", "context", "adapter", "both"}

    res = runner.invoke(app, ["hypernet", "info", str(ckpt), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["checkpoint_id"] == summary["checkpoint_id"] and info["stage"] == 1 and info["steps"] == 3
    assert info["target_modules"] == ["q_proj", "v_proj"] and info["adapted_modules"] == 4

    # A SKILL.md path compiles straight to a PEFT folder that PEFT loads.
    res = runner.invoke(app, ["compile", str(lib / "skill-0"), "--out", str(tmp_path / "a0"), "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["adapter"] == str(tmp_path / "a0")
    from transformers import AutoModelForCausalLM

    PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), str(tmp_path / "a0"))

    # A store skill is compiled once per (version, checkpoint), then served from the cache.
    from skillgraft.skills.store import Store

    Store(f"sqlite:///{home / 'store.db'}", home / "artifacts").import_skill(lib / "skill-1")
    first = runner.invoke(app, ["compile", "skill-1", "--json"], env=env)
    second = runner.invoke(app, ["compile", "skill-1", "--json"], env=env)
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert not a["cached"] and b["cached"] and a["adapter_id"] == b["adapter_id"]

    res = runner.invoke(app, ["compile", "no-such-skill"], env=env)
    assert res.exit_code == 2 and "neither a file nor a skill" in res.output
    res = runner.invoke(app, ["hypernet", "info", str(tmp_path / "nothing")])
    assert res.exit_code == 2


def test_compile_without_checkpoint_explains(tmp_path):
    res = CliRunner().invoke(app, ["compile", "x"], env={"SKILLGRAFT_HOME": str(tmp_path)})
    assert res.exit_code == 2 and "hypernet train" in res.output
