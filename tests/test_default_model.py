"""The default model as shipped: SmolLM2-135M-Instruct with the SkillWorld policy adapter merged in,
and its hypernetwork. Both are small, match the current recipe and base, are refused with the
rebuilding command when they do not, and the model solves a task in a real sandbox."""
from __future__ import annotations

import json
import shutil

import pytest

from skillgraft.skillworld import default_model
from skillgraft.skillworld.default_model import (
    REBUILD_HYPERNET, REBUILD_POLICY, SHIPPED, StaleArtifactError, ensure_hypernet, ensure_policy, policy_adapter,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


def test_the_shipped_artifacts_are_small_and_record_their_recipe_and_base():
    files = [p for p in SHIPPED.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 40 * 2**20, [(p.name, p.stat().st_size) for p in files]
    policy = json.loads((SHIPPED / "policy" / "skillgraft.json").read_text())
    assert policy["metadata"]["base"] == "smollm2-135m" and policy["metadata"]["base_gguf"].startswith("sha256:")
    hypernet = json.loads((SHIPPED / "hypernet" / "recipe.json").read_text())
    assert hypernet["policy_adapter"] == default_model.weights_digest(SHIPPED / "policy", "adapter_model.safetensors")
    assert not (SHIPPED / "hypernet" / "memory.json").exists()  # the command memory is opt-in: `world memory`


def test_the_shipped_artifacts_match_the_current_recipe(models_dir):
    """Fails when a change to the world, the expert, the skills or a training configuration has not
    been followed by retraining (the error names the command that does it)."""
    assert policy_adapter(models_dir) == SHIPPED / "policy"
    assert ensure_hypernet(models_dir) == SHIPPED / "hypernet"


def test_a_stale_policy_or_hypernetwork_is_refused_with_the_command_that_rebuilds_it(models_dir, monkeypatch):
    monkeypatch.setattr(default_model, "policy_digest", lambda: "policy-0000")
    with pytest.raises(StaleArtifactError, match=REBUILD_POLICY.replace(" ", r"\s+")):
        ensure_policy(models_dir, show_progress=False)
    monkeypatch.undo()
    from skillgraft.skillworld import recipe as world_recipe

    monkeypatch.setattr(world_recipe, "hypernet_digest", lambda weights: "hypernet-0000")
    with pytest.raises(StaleArtifactError, match="skillgraft hypernet train --recipe skillworld"):
        ensure_hypernet(models_dir)
    assert REBUILD_HYPERNET == "skillgraft hypernet train --recipe skillworld"


def test_the_policy_is_refused_on_other_base_weights(models_dir, tmp_path, monkeypatch):
    from skillgraft.agent.models import bases

    folder = bases.ensure_base("smollm2-135m", models_dir)
    copy = tmp_path / "models"
    shutil.copytree(folder, copy / "smollm2-135m")
    manifest = json.loads((copy / "smollm2-135m" / bases.MANIFEST).read_text())
    manifest["gguf_digest"] = "sha256:another-quantisation"
    (copy / "smollm2-135m" / bases.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(StaleArtifactError, match="trained on base weights"):
        policy_adapter(copy)


def test_the_policy_adapter_does_not_load_on_another_architecture(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from skillgraft.hypernet.peft_io import BaseMismatchError, check_base

    other = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=2))
    with pytest.raises(BaseMismatchError, match="fingerprint"):
        check_base(SHIPPED / "policy", other)


def test_the_default_model_is_assembled_once_and_takes_a_compiled_skill(models_dir):
    from skillgraft.agent.models.factory import make_model
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.skillworld.library import for_family

    folder = ensure_policy(models_dir, show_progress=False)
    stamp = (folder / default_model.MERGED).stat().st_mtime_ns
    assert ensure_policy(models_dir, show_progress=False) == folder
    assert (folder / default_model.MERGED).stat().st_mtime_ns == stamp
    compiler = Compiler.load(ensure_hypernet(models_dir), str(folder))
    assert compiler.memory is None
    adapter = compiler.compile_to_dir(for_family("wrong_boolean")[0].body, models_dir / "compiled")
    model = make_model("skillworld", models_dir=models_dir, max_new_tokens=8)
    model.load_adapter(adapter)
    model.unload_adapter()


@pytest.mark.docker
def test_the_default_model_solves_the_demo_task_in_a_sandbox(models_dir):
    """The README's demo: the bundled SkillWorld task (a held-out seed), solved in five steps."""
    from pathlib import Path

    from skillgraft.agent.models.factory import make_model
    from skillgraft.agent.runner import run_task
    from skillgraft.agent.task import load_task

    ensure_policy(models_dir, show_progress=False)
    model = make_model("skillworld", models_dir=models_dir)
    task = load_task(Path(__file__).parents[1] / "examples" / "tasks" / "skillworld-inverted-comparison.yaml")
    result = run_task(task, model, sandbox="docker")
    assert result.success and result.exit_status == "Submitted" and result.steps == 5, (result.exit_status, result.patch)


def test_world_memory_gives_a_copy_of_the_hypernetwork_a_command_memory(models_dir, tmp_path):
    from typer.testing import CliRunner

    from skillgraft.cli import app
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.skillworld.library import for_family

    home = tmp_path / "home"
    home.mkdir()
    (home / "models").symlink_to(models_dir)
    out = tmp_path / "with-memory"
    result = CliRunner().invoke(app, ["world", "memory", str(out), "--home", str(home)])
    assert result.exit_code == 0, result.output
    spec = json.loads((out / "memory.json").read_text())
    assert spec["layers"] == list(default_model.MEMORY_LAYERS) and len(spec["reference"]) == default_model.MEMORY_REFERENCE
    assert not (SHIPPED / "hypernet" / "memory.json").exists()

    compiler = Compiler.load(out, str(ensure_policy(models_dir, show_progress=False)))
    adapter = compiler.compile_to_dir(for_family("wrong_boolean")[0].body, tmp_path / "compiled")
    # the skill's commands are written into the memory's band of down_proj modules, and only there
    written = compiler.memory.modules()
    assert written == [f"model.layers.{i}.mlp.down_proj" for i in default_model.MEMORY_LAYERS]
    targets = json.loads((adapter / "adapter_config.json").read_text())["target_modules"]
    assert set(written) <= set(targets) and "down_proj" not in targets
    again = CliRunner().invoke(app, ["world", "memory", str(out), "--home", str(home)])
    assert again.exit_code == 2 and "not empty" in again.output
