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
    memory = json.loads((SHIPPED / "hypernet" / "memory.json").read_text())  # as train_hypernet writes it
    assert memory["layers"] == list(default_model.MEMORY_LAYERS) and len(memory["reference"]) == default_model.MEMORY_REFERENCE


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
    adapter = compiler.compile_to_dir(for_family("wrong_boolean")[0].body, models_dir / "compiled")
    # the skill's commands are written into the memory's band of down_proj modules, and only there
    written = compiler.memory.modules()
    assert written == [f"model.layers.{i}.mlp.down_proj" for i in default_model.MEMORY_LAYERS]
    targets = json.loads((adapter / "adapter_config.json").read_text())["target_modules"]
    assert set(written) <= set(targets) and "down_proj" not in targets
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


def test_the_shipped_memory_is_what_write_memory_writes(models_dir, tmp_path):
    """The same twelve expert runs, tokenised alike; only pytest's timings ("in 0.05s") may differ."""
    import re

    from transformers import AutoTokenizer

    policy = ensure_policy(models_dir, show_progress=False)
    ours = json.loads(default_model.write_memory(tmp_path, policy).read_text())
    shipped = json.loads((SHIPPED / "hypernet" / "memory.json").read_text())
    assert {k: v for k, v in ours.items() if k != "reference"} == {k: v for k, v in shipped.items() if k != "reference"}
    tokenizer = AutoTokenizer.from_pretrained(policy)
    untimed = [[re.sub(r" in [0-9.]+s", "", tokenizer.decode(ids)) for ids in d["reference"]] for d in (ours, shipped)]
    assert untimed[0] == untimed[1]
