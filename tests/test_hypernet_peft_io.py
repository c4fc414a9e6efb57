"""PEFT folders: written by us, loaded by PEFT unchanged, with the base model checked."""
from __future__ import annotations

import json

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

from skillgraft.hypernet import lora
from skillgraft.hypernet.lora import LowRank
from skillgraft.hypernet.peft_io import (
    BaseMismatchError,
    check_base,
    load_adapter,
    model_fingerprint,
    peft_cat,
    read_info,
    save_adapter,
)


def _config(**over) -> LlamaConfig:
    base = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    base.update(over)
    return LlamaConfig(**base)


def _model(seed: int = 0, **over) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(_config(**over)).eval()


def _random_delta(model, seed: int, ranks=(4,), modules=("q_proj", "v_proj")) -> lora.LoraDelta:
    g = torch.Generator().manual_seed(seed)
    out, i = {}, 0
    for name, mod in model.named_modules():
        if name.rsplit(".", 1)[-1] in modules:
            r = ranks[i % len(ranks)]
            i += 1
            out[name] = LowRank(B=0.1 * torch.randn(mod.out_features, r, generator=g),
                                A=0.1 * torch.randn(r, mod.in_features, generator=g))
    return out


def _logits(model, ids=None):
    ids = torch.arange(1, 13)[None] if ids is None else ids
    with torch.no_grad():
        return model(input_ids=ids).logits


def _by_hand(base, delta):
    """Base model with ΔW added into the weights directly: ground truth for PEFT's forward."""
    model = _model()
    model.load_state_dict(base.state_dict())
    mods = dict(model.named_modules())
    with torch.no_grad():
        for name, dw in lora.to_dense(delta).items():
            mods[name].weight += dw
    return model


def test_saved_adapter_loads_in_peft_and_applies_exact_delta(tmp_path):
    base = _model()
    delta = _random_delta(base, 1)
    folder = save_adapter(delta, tmp_path / "a", base_model_name="tiny-llama",
                          fingerprint=model_fingerprint(base), metadata={"skill": "x"}, hypernet_ckpt="abc")
    assert {p.name for p in folder.iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["r"] == config["lora_alpha"] == 4 and not config["use_rslora"]
    want = _logits(_by_hand(base, delta))
    peft_model = PeftModel.from_pretrained(_model(), str(folder)).eval()
    got = _logits(peft_model)
    assert not torch.allclose(_logits(base), want, atol=1e-3)  # the delta does something
    assert torch.allclose(got, want, atol=1e-5)


def test_per_module_ranks_roundtrip_through_rank_pattern(tmp_path):
    base = _model()
    delta = _random_delta(base, 2, ranks=(4, 2, 4, 6))
    folder = save_adapter(delta, tmp_path / "a", base_model_name="tiny", fingerprint=model_fingerprint(base))
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["r"] == 4 and config["rank_pattern"] == config["alpha_pattern"] and config["rank_pattern"]
    loaded, info = load_adapter(folder)
    assert info.ranks == lora.ranks(delta) and info.fingerprint == model_fingerprint(base)
    for name in delta:
        assert torch.allclose(loaded[name].dense(), delta[name].dense())
    peft_model = PeftModel.from_pretrained(_model(), str(folder)).eval()
    assert torch.allclose(_logits(peft_model), _logits(_by_hand(base, delta)), atol=1e-5)


def test_loads_foreign_peft_adapter_with_rslora_scaling_folded_in(tmp_path):
    base = _model()
    cfg = LoraConfig(r=4, lora_alpha=16, use_rslora=True, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(_model(), cfg).eval()
    want = _logits(peft_model)
    peft_model.save_pretrained(str(tmp_path / "foreign"))
    delta, info = load_adapter(tmp_path / "foreign")
    assert info.fingerprint is None and set(info.target_modules) == {"q_proj", "v_proj"}
    assert torch.allclose(_logits(_by_hand(base, delta)), want, atol=1e-5)
    # Re-saved in our form (scaling folded, alpha = r) it behaves identically.
    save_adapter(delta, tmp_path / "ours", base_model_name=None, fingerprint=model_fingerprint(base))
    again = PeftModel.from_pretrained(_model(), str(tmp_path / "ours")).eval()
    assert torch.allclose(_logits(again), want, atol=1e-5)


def test_fingerprint_from_meta_config_real_and_wrapped_model_agree():
    real = _model()
    with torch.device("meta"):
        meta = LlamaForCausalLM(_config())
    wrapped = get_peft_model(_model(), LoraConfig(r=2, target_modules=["q_proj"]))
    fp = model_fingerprint(real)
    assert fp == model_fingerprint(meta) == model_fingerprint(_config()) == model_fingerprint(wrapped)
    assert fp != model_fingerprint(_config(num_hidden_layers=3))
    assert fp != model_fingerprint(_config(hidden_size=64))


def test_adapter_on_other_base_is_refused(tmp_path):
    base = _model()
    folder = save_adapter(_random_delta(base, 3), tmp_path / "a", base_model_name="tiny-llama",
                          fingerprint=model_fingerprint(base))
    assert check_base(folder, _model(seed=5)).fingerprint == model_fingerprint(base)  # weights may differ
    with pytest.raises(BaseMismatchError, match="tiny-llama.*Compile the skill again"):
        check_base(folder, _model(hidden_size=64))
    assert read_info(folder).hypernet_ckpt is None
    with pytest.raises(BaseMismatchError):
        load_adapter(folder, base=_config(num_hidden_layers=3))
    assert set(load_adapter(folder, base=_config())[0]) == set(_random_delta(base, 3))


def test_concat_equals_activating_adapters_together(tmp_path):
    base = _model()
    a, b = _random_delta(base, 4), _random_delta(base, 5, ranks=(2,))
    fp = model_fingerprint(base)
    save_adapter(a, tmp_path / "a", base_model_name="t", fingerprint=fp)
    save_adapter(b, tmp_path / "b", base_model_name="t", fingerprint=fp)
    save_adapter(lora.concat([a, b], [1.0, 1.0]), tmp_path / "ab", base_model_name="t", fingerprint=fp)

    together = PeftModel.from_pretrained(_model(), str(tmp_path / "a"), adapter_name="a").eval()
    together.load_adapter(str(tmp_path / "b"), adapter_name="b")
    together.base_model.set_adapter(["a", "b"])
    want = _logits(together)
    cat = PeftModel.from_pretrained(_model(), str(tmp_path / "ab")).eval()
    assert torch.allclose(_logits(cat), want, atol=1e-5)

    # PEFT's own rank concatenation agrees, weights included.
    peft_cat(together, ["a", "b"], [1.0, 1.0], "ab_peft")
    together.base_model.set_adapter("ab_peft")
    assert torch.allclose(_logits(together), want, atol=1e-5)
    peft_cat(together, ["a", "b"], [0.5, -2.0], "weighted")
    together.base_model.set_adapter("weighted")
    weighted = lora.concat([a, b], [0.5, -2.0])
    assert torch.allclose(_logits(together), _logits(_by_hand(base, weighted)), atol=1e-5)


def test_peft_cat_of_one_rslora_adapter_at_weight_one_reproduces_it(tmp_path):
    cfg = LoraConfig(r=8, lora_alpha=8, use_rslora=True, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(_model(), cfg, adapter_name="one").eval()
    want = _logits(peft_model)
    peft_cat(peft_model, ["one"], [1.0], "merged")
    peft_model.base_model.set_adapter("merged")
    assert torch.allclose(_logits(peft_model), want, atol=1e-5)
    # And two rsLoRA adapters concatenated match them active together.
    peft_model.add_adapter("two", cfg)
    peft_model.base_model.set_adapter(["one", "two"])
    both = _logits(peft_model)
    peft_cat(peft_model, ["one", "two"], [1.0, 1.0], "cat")
    peft_model.base_model.set_adapter("cat")
    assert torch.allclose(_logits(peft_model), both, atol=1e-5)


def test_empty_or_missing_adapters_are_refused(tmp_path):
    with pytest.raises(ValueError):
        save_adapter({}, tmp_path / "e", base_model_name=None, fingerprint=None)
    with pytest.raises(FileNotFoundError):
        load_adapter(tmp_path / "nothing")
