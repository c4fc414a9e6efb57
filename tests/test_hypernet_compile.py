"""Compiling skill text into PEFT adapters with a real hypernetwork on tiny real bases."""
from __future__ import annotations

import json

import pytest
import torch
from peft import PeftModel
from transformers import GPT2Config, LlamaConfig, LlamaForCausalLM, MistralConfig, Qwen2Config

from skillgraft.hypernet import lora
from skillgraft.hypernet.apply import generated_lora
from skillgraft.hypernet.checkpoint import checkpoint_id, load_checkpoint, save_checkpoint
from skillgraft.hypernet.compile import Compiler
from skillgraft.hypernet.encoder import BaseHiddenEncoder, make_encoder
from skillgraft.hypernet.hypernetwork import HypernetConfig
from skillgraft.hypernet.peft_io import BaseMismatchError, check_base, model_fingerprint, read_info
from skillgraft.hypernet.targets import find_targets, meta_model

SKILL = "# run-tests\n\nRun `pytest -x` first, read the first failure, fix it, and run again.\n"
OTHER = "# lint\n\nRun `ruff check --fix .` and commit only the files you changed.\n"
SMALL = HypernetConfig(hidden=64, embed_dim=16, rank=4)


def _config(**over) -> LlamaConfig:
    base = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    base.update(over)
    return LlamaConfig(**base)


def _model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(_config()).eval()


def _logits(model):
    with torch.no_grad():
        return model(input_ids=torch.arange(1, 13)[None]).logits


def _wake(compiler: Compiler, seed: int = 1) -> None:
    """Stands in for training: gives the zero-initialised B heads non-zero weights."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for head in compiler.net.heads.values():
            head.to_b.weight.copy_(torch.randn(head.to_b.weight.shape, generator=g) * 0.5)


def test_untrained_hypernetwork_leaves_outputs_unchanged(tmp_path):
    compiler = Compiler.load(None, _config(), config=SMALL)
    folder = compiler.compile_to_dir(SKILL, tmp_path / "a")
    for lr in compiler.compile([SKILL])[0].values():
        assert float(lr.dense().abs().max()) == 0.0
    base = _model()
    peft_model = PeftModel.from_pretrained(_model(), str(folder)).eval()
    assert torch.equal(_logits(peft_model), _logits(base))


def test_compiled_adapter_loads_in_peft_and_matches_functional_application(tmp_path):
    compiler = Compiler.load(None, _config(), config=SMALL)
    _wake(compiler)
    folder = compiler.compile_to_dir(SKILL, tmp_path / "a", metadata={"skill": "run-tests"})
    info = read_info(folder)
    assert info.fingerprint == model_fingerprint(_model()) and info.hypernet_ckpt == compiler.checkpoint_id
    assert info.metadata["skill"] == "run-tests"
    assert set(json.loads((folder / "adapter_config.json").read_text())["target_modules"]) == {"q_proj", "v_proj"}
    base = _model()
    peft_logits = _logits(PeftModel.from_pretrained(_model(), str(folder)).eval())
    assert not torch.allclose(peft_logits, _logits(base), atol=1e-3)
    # The training-time hooks apply the very same ΔW.
    with torch.no_grad():
        factors = compiler.net(compiler.encoder.encode([SKILL]))
        with generated_lora(base, factors):
            hooked = _logits(base)
    assert torch.allclose(hooked, peft_logits, atol=1e-5)


def test_batched_compile_equals_one_by_one_and_skills_differ():
    compiler = Compiler.load(None, _config(), config=SMALL)
    _wake(compiler)
    both = compiler.compile([SKILL, OTHER])
    alone = compiler.compile([OTHER])[0]
    for name in alone:
        assert torch.allclose(both[1][name].dense(), alone[name].dense(), atol=1e-5)
    assert lora.frobenius_norm(lora.subtract(both[0], both[1])) > 1e-3


def test_every_chunk_of_a_long_skill_counts():
    compiler = Compiler.load(None, _config(), config=SMALL)
    _wake(compiler)
    long_a = SKILL + "\n".join(f"Step {i}: check the log for warning {i}." for i in range(200))
    long_b = long_a + "\n## Finally\n\nAlways push with `git push --force-with-lease`, never plain force.\n"
    encoded = compiler.encoder.encode([long_a, long_b])
    assert int(encoded.mask[0].sum()) >= 4 and int(encoded.mask[1].sum()) > int(encoded.mask[0].sum())
    a, b = compiler.compile([long_a, long_b])
    assert lora.frobenius_norm(lora.subtract(a, b)) > 1e-4  # text past the first window changed the adapter


def test_compile_with_meta_device_base_and_other_architectures():
    with torch.device("meta"):
        meta = LlamaForCausalLM(_config())
    compiler = Compiler.load(None, meta, config=SMALL)
    [delta] = compiler.compile([SKILL])
    assert set(delta) == {f"model.layers.{i}.self_attn.{m}" for i in range(2) for m in ("q_proj", "v_proj")}
    assert delta["model.layers.1.self_attn.v_proj"].shape == (16, 32)  # GQA: v is narrower
    for config in (
        Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2),
        MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1),
    ):
        delta = Compiler.load(None, config, config=SMALL).compile([SKILL])[0]
        assert len(delta) == 2 * config.num_hidden_layers
    gpt2 = GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    spec = find_targets(meta_model(gpt2), ("c_attn",))
    assert [(m.path, m.in_features, m.out_features) for m in spec.modules][0] == ("transformer.h.0.attn.c_attn", 32, 96)
    delta = Compiler.load(None, gpt2, config=HypernetConfig(hidden=64, embed_dim=16, rank=4, target_modules=("c_attn",))).compile([SKILL])[0]
    assert delta["transformer.h.1.attn.c_attn"].shape == (96, 32)


def test_unknown_target_module_is_a_clear_error():
    with pytest.raises(ValueError, match="no linear modules named gate_projx"):
        Compiler.load(None, _config(), config=HypernetConfig(target_modules=("q_proj", "gate_projx")))


def test_checkpoint_roundtrip_id_and_base_mismatch(tmp_path):
    compiler = Compiler.load(None, _config(), config=SMALL)
    _wake(compiler)
    ckpt_id = save_checkpoint(compiler.net, compiler.meta, tmp_path / "ckpt")
    assert ckpt_id == checkpoint_id(tmp_path / "ckpt") and ckpt_id.startswith("hn-")
    loaded = Compiler.load(tmp_path / "ckpt", _config())
    assert loaded.checkpoint_id == ckpt_id
    want, got = compiler.compile([SKILL])[0], loaded.compile([SKILL])[0]
    for name in want:
        assert torch.allclose(want[name].dense(), got[name].dense(), atol=1e-6)
    # One more training step (here: a weight change) gives a new id.
    net, meta = load_checkpoint(tmp_path / "ckpt")
    with torch.no_grad():
        next(net.parameters()).add_(1e-3)
    assert save_checkpoint(net, meta, tmp_path / "ckpt2") != ckpt_id
    with pytest.raises(BaseMismatchError, match="train a hypernetwork for this base"):
        Compiler.load(tmp_path / "ckpt", _config(hidden_size=48))
    folder = loaded.compile_to_dir(SKILL, tmp_path / "adapter")
    with pytest.raises(BaseMismatchError):
        check_base(folder, _config(num_hidden_layers=3))


def test_empty_skill_text_is_refused():
    with pytest.raises(ValueError, match="empty skill"):
        Compiler.load(None, _config(), config=SMALL).compile(["  \n"])


def test_base_hidden_encoder_reads_the_base_model():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(["<unk>", "</s>", *"abcdefghijklmnopqrstuvwxyz"])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="</s>", unk_token="<unk>")
    model = _model()
    encoder = make_encoder("base-hidden", base_model=model, tokenizer=tok, layer=1)
    assert isinstance(encoder, BaseHiddenEncoder) and encoder.dim == 32
    out = encoder.encode(["run the tests", "lint"])
    assert out.chunks.shape == (2, 1, 32) and out.mask.all()
    compiler = Compiler.load(None, model, config=HypernetConfig(encoder="base-hidden", encoder_dim=32, encoder_layer=1,
                                                               hidden=64, embed_dim=16, rank=4), base_model=model, tokenizer=tok)
    assert len(compiler.compile(["run the tests"])[0]) == 4
    with pytest.raises(ValueError, match="meta-device"):
        make_encoder("base-hidden", base_model=meta_model(_config()), tokenizer=tok)


def test_gpt2_style_conv1d_adapter_loads_in_peft_and_matches_hooks(tmp_path):
    from transformers import GPT2LMHeadModel

    config = GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    torch.manual_seed(0)
    base = GPT2LMHeadModel(config).eval()
    compiler = Compiler.load(None, config, config=HypernetConfig(hidden=64, embed_dim=16, rank=4, target_modules=("c_attn",)))
    _wake(compiler)
    folder = compiler.compile_to_dir(SKILL, tmp_path / "g")
    fresh = GPT2LMHeadModel(config).eval()
    fresh.load_state_dict(base.state_dict())
    peft_logits = _logits(PeftModel.from_pretrained(fresh, str(folder)).eval())
    with torch.no_grad():
        with generated_lora(base, compiler.net(compiler.encoder.encode([SKILL]))):
            hooked = _logits(base)
    assert torch.allclose(hooked, peft_logits, atol=1e-5)
    assert not torch.allclose(peft_logits, _logits(base), atol=1e-3)
