"""The pretrained bases shipped as GGUF packages: converted once into a models folder, loaded by
short name, and taking compiled skills for their own shapes only. These convert the real files
(installed by the set-up), about twenty seconds for SmolLM2 and a minute for Gemma 3."""
from __future__ import annotations

import pytest
import torch

from skillgraft.agent.models.base import ModelError
from skillgraft.agent.models.bases import BASES, MANIFEST, ensure_base, read_manifest
from skillgraft.agent.models.factory import make_model
from skillgraft.hypernet.peft_io import model_fingerprint

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def smollm2(models_dir):
    return ensure_base("smollm2-135m", models_dir)


def test_smollm2_converts_once_with_a_manifest(smollm2, models_dir):
    manifest = read_manifest(smollm2)
    assert manifest["gguf_digest"].startswith("sha256:") and manifest["license"] == "Apache-2.0"
    assert manifest["fingerprint"] == model_fingerprint(str(smollm2))
    assert (smollm2 / "model.safetensors").is_file() and "quantization_config" not in (smollm2 / "config.json").read_text()
    stamp = (smollm2 / MANIFEST).stat().st_mtime_ns
    assert ensure_base("smollm2-135m", models_dir) == smollm2
    assert (smollm2 / MANIFEST).stat().st_mtime_ns == stamp  # the second call converts nothing


def test_smollm2_runs_by_its_short_name_with_its_chat_template(smollm2, models_dir):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(smollm2)
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (30, 576, 49152)
    model = make_model("smollm2-135m", models_dir=models_dir, max_new_tokens=8)
    chat = [{"role": "system", "content": "You answer in one word."}, {"role": "user", "content": "What colour is the sky?"}]
    assert model.render(chat).startswith("<|im_start|>system\nYou answer in one word.<|im_end|>")
    reply = model.query(chat)
    assert reply.usage["completion_tokens"] > 0 and reply.content.strip()


def test_unknown_base_and_a_base_without_a_models_folder_are_clear_errors(tmp_path):
    with pytest.raises(ModelError, match="unknown base"):
        ensure_base("llama-70b", tmp_path)
    with pytest.raises(ModelError, match="models folder"):
        make_model("smollm2-135m")


def test_gemma3_converts_runs_and_compiles_a_skill_for_its_own_shapes(models_dir, smollm2, tmp_path):
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.skillworld.library import for_family

    gemma = ensure_base("gemma3-270m", models_dir)
    assert read_manifest(gemma)["license"] == "Gemma Terms of Use"
    assert not (gemma / BASES["gemma3-270m"].filename).exists()  # the assembled GGUF is not kept
    model = make_model("gemma3-270m", models_dir=models_dir, max_new_tokens=6)
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "def add(a, b):\n    return"}]
    before = model.query(chat).content

    compiler = Compiler.load(None, str(gemma), seed=0)
    with torch.no_grad():  # an untrained hypernetwork emits ΔW = 0; give its B heads weights so it does not
        for head in compiler.net.heads.values():
            head.to_b.bias.normal_(0.0, 2.0)
    adapter = compiler.compile_to_dir(for_family("wrong_operator")[0].body, tmp_path / "skill")
    spec = {m.path for m in compiler.meta.spec.modules}
    assert len(spec) == 2 * 18 and all(".self_attn." in p for p in spec)  # q and v of Gemma's 18 layers
    model.load_adapter(adapter)
    assert model.query(chat).content != before
    model.unload_adapter()
    assert model.query(chat).content == before

    smol = make_model(f"hf:{smollm2}", max_new_tokens=4)
    with pytest.raises(ModelError, match="fingerprint"):
        smol.load_adapter(adapter)  # compiled for Gemma's shapes, refused on SmolLM2
