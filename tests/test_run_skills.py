"""`run --skills … --skill-mode …`: store skills reach the model as context, as a compiled
adapter, or both; a hosted model is refused parametric skills."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from skillgraft.agent.task import Task
from skillgraft.jobs.run_skills import SkillSelectionError, prepare
from skillgraft.settings import load_settings
from skillgraft.skills import Store
from test_agent_hf import build_model

BODY = "1. Run the tests.\n2. Find the flipped comparison and flip it back.\n3. Run the tests again.\n"


@pytest.fixture
def setting(tmp_path):
    return load_settings(tmp_path / "home")


@pytest.fixture
def store(setting, tmp_path):
    folder = tmp_path / "skills" / "fix-comparison"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: fix-comparison\ndescription: Fix an inverted comparison operator.\n---\n{BODY}")
    st = Store(setting.store_url, setting.artifacts)
    st.import_skill(folder)
    yield st
    st.close()


TASK = Task.from_dict({"id": "t", "repo": {"files": {"a.py": "x = 1\n"}}, "instruction": "an inverted comparison operator breaks the tests",
                       "test": "true"})


def _checkpoint(model_dir: Path, out: Path) -> Path:
    """A hypernetwork whose output heads are perturbed, so it compiles non-zero adapters."""
    from skillgraft.hypernet.checkpoint import save_checkpoint
    from skillgraft.hypernet.compile import Compiler

    compiler = Compiler.load(None, model_dir)
    torch.manual_seed(3)
    with torch.no_grad():
        for name, p in compiler.net.named_parameters():
            if "to_b" in name:
                p.normal_(std=0.5)
    save_checkpoint(compiler.net, compiler.meta, out)
    return out


def test_context_mode_puts_named_and_retrieved_skills_in_the_prompt(store, setting):
    from skillgraft.agent.models.replay_model import ReplayModel

    model = ReplayModel(["x"])
    named = prepare(store, TASK, model, "replay", ["fix-comparison"], "context", setting)
    assert named.context == [("fix-comparison", BODY)]
    assert named.refs == ["fix-comparison@v1"] and named.adapter_dir is None
    auto = prepare(store, TASK, model, "replay", ["auto"], "context", setting)
    assert auto.context == named.context
    assert prepare(store, TASK, model, "replay", ["none"], "context", setting).context == []


def test_unknown_skill_and_hosted_model_are_refused(store, setting):
    from skillgraft.agent.models.litellm_model import LitellmModel

    with pytest.raises(SkillSelectionError, match="no skill named 'nope'"):
        prepare(store, TASK, LitellmModel("openai/gpt-4o-mini"), "openai/gpt-4o-mini", ["nope"], "context", setting)
    with pytest.raises(SkillSelectionError, match="out of reach"):
        prepare(store, TASK, LitellmModel("openai/gpt-4o-mini"), "openai/gpt-4o-mini", ["fix-comparison"], "parametric", setting)


def test_parametric_mode_compiles_once_and_the_adapter_changes_the_model(store, setting, tmp_path):
    from skillgraft.agent.models.hf_model import HFModel
    from skillgraft.hypernet.tune import Tuning

    model_dir = build_model(tmp_path / "tiny", chat_template=None)
    ckpt = _checkpoint(model_dir, tmp_path / "hn")
    model = HFModel(model_dir, max_new_tokens=8)
    first = prepare(store, TASK, model, f"hf:{model_dir}", ["fix-comparison"], "parametric", setting, hypernet=ckpt)
    again = prepare(store, TASK, model, f"hf:{model_dir}", ["fix-comparison"], "both", setting, hypernet=ckpt)
    assert first.context == [] and again.context == [("fix-comparison", BODY)]
    assert first.adapter_ids == again.adapter_ids  # compiled once, found in the store the second time
    tuned = prepare(store, TASK, model, f"hf:{model_dir}", ["fix-comparison"], "parametric", setting, hypernet=ckpt,
                    tuning=Tuning(3, start="compiled"))
    [tuned_id] = tuned.adapter_ids  # written by hand, from no run: compiled as it is, but kept apart
    assert tuned_id not in first.adapter_ids and store.adapter(tuned_id).hypernet_ckpt.endswith("+tuned-compiled-3x0.0005-seed0")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = torch.tensor([[1, 5, 9, 13]])
    before = base(ids).logits
    adapted = PeftModel.from_pretrained(base, str(first.adapter_dir))(ids).logits
    assert not torch.allclose(before, adapted, atol=1e-4)
    model.load_adapter(first.adapter_dir)  # and the agent's own backend accepts it for this base


def test_parametric_without_a_hypernetwork_says_how_to_get_one(store, setting, tmp_path):
    from skillgraft.agent.models.hf_model import HFModel

    model_dir = build_model(tmp_path / "tiny", chat_template=None)
    with pytest.raises(SkillSelectionError, match="hypernet train"):
        prepare(store, TASK, HFModel(model_dir), f"hf:{model_dir}", ["fix-comparison"], "parametric", setting)
