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
from skillgraft.skillworld.recipe import HYPERNET

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
    memory = json.loads((SHIPPED / "hypernet" / "memory.json").read_text())  # the command memory, as the recipe sets it
    assert memory["layers"] == list(HYPERNET.memory_layers) and len(memory["reference"]) == HYPERNET.memory_reference
    assert (memory["scale"], memory["ridge"]) == (HYPERNET.memory_scale, HYPERNET.memory_ridge)


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


def test_the_pinned_recipes_are_those_of_the_clean_runs_training_takes():
    """Every clean expert run of the recipe's episode sets has its pinned recipe, and no other run:
    a change to the sets or the world shows here before a rebuild fails on it."""
    from skillgraft.skillworld.dataset import record_id
    from skillgraft.skillworld.generate import generate
    from skillgraft.skillworld.recipe import EPISODE_SETS, families_of
    from skillgraft.skillworld.skill_texts import pinned_recipes

    runs = {record_id(generate(f, seed).id, None) for s in EPISODE_SETS if not s.mistake
            for f in families_of(s) for seed in range(s.first_seed, s.first_seed + s.per_family)}
    recipes = pinned_recipes()
    assert set(recipes) == runs
    assert all(text.startswith("# ") and "`" in text for text in recipes.values())


def test_new_pinned_recipes_or_paraphrases_make_the_hypernetwork_stale(models_dir, tmp_path, monkeypatch):
    """The recipes the offline summariser induced are pinned in a file the hypernetwork's recipe
    digests, with the paraphrases (code): rewriting either refuses the trained hypernetwork with the
    command that rebuilds it, and a run that has no pinned recipe names the command that pins them."""
    from skillgraft.skillworld import skill_texts
    from skillgraft.skillworld.skill_texts import REPIN, UnpinnedRunError, first_clean_runs, induced, pin_recipes

    steps = [["Run the tests to see what fails.", "COLUMNS=150 python3 -m pytest -q --tb=no -rf | tail -n 2",
              "FAILED tests/entries_test.py::test_scale_steps - assert 57 == 74\n1 failed, 5 passed in 0.02s\n", 0],
             ["The failing test is test_scale_steps; find scale_steps.",
              'grep -rn -B 3 -A 5 "def scale_steps(" --exclude-dir=tests .',
              "./archive/entries.py:6:def scale_steps(nums):\n./archive/entries.py-8-    for idx in range(len(nums) - 1):\n", 0],
             ["The loop in scale_steps stops one item early; drop the - 1 from the range bound.",
              "sed -i '/def scale_steps(/,/^$/s/ - 1)/)/' ./archive/entries.py", "", 0],
             ["Run the tests again to check the fix.", "python3 -m pytest -q --tb=no | tail -n 1", "6 passed in 0.02s\n", 0]]
    run = {"id": "skillworld-off-by-one-0", "family": "off_by_one", "seed": 0, "success": True, "steps": steps}
    records = [{**run, "id": run["id"] + "+grep-miss", "mistake": "grep-miss"}, run,
               {**run, "id": "skillworld-off-by-one-1", "seed": 1}]
    assert first_clean_runs(records) == [run]
    pinned = tmp_path / "recipes.json"
    recipes = pin_recipes(records, pinned)
    assert list(recipes) == [run["id"], "skillworld-off-by-one-1"] and recipes[run["id"]] == induced(run)
    assert "off_by_one" not in recipes[run["id"]] and "scale_steps" not in recipes[run["id"]]  # abstracted
    with pytest.raises(UnpinnedRunError, match=REPIN):
        skill_texts.made_texts([{**run, "id": "skillworld-off-by-one-9"}], recipes, 0)

    assert ensure_hypernet(models_dir) == SHIPPED / "hypernet"
    rebuild = "pinned recipes.*" + REBUILD_HYPERNET.replace(" ", r"\s+")
    monkeypatch.setattr(skill_texts, "PINNED", pinned)
    with pytest.raises(StaleArtifactError, match=rebuild):
        ensure_hypernet(models_dir)
    monkeypatch.undo()
    monkeypatch.setattr(skill_texts, "paraphrase", lambda body, rng: body.replace("Fix:", "Repair:"))
    with pytest.raises(StaleArtifactError, match=rebuild):
        ensure_hypernet(models_dir)


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
    # the skill's literal edit (`s/ or / and /`) is written into the memory's band of down_proj
    # modules, and only there; a template edit (swapped_arguments) writes none
    band = [f"model.layers.{i}.mlp.down_proj" for i in HYPERNET.memory_layers]
    assert compiler.memory is not None and compiler.memory.modules() == band
    targets = json.loads((adapter / "adapter_config.json").read_text())["target_modules"]
    assert set(band) <= set(targets) and "down_proj" not in targets
    [template] = compiler.compile([for_family("swapped_arguments")[0].body])
    assert not set(band) & set(template)
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
