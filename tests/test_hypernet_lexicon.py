"""The lexical channel: adapters whose B columns are the base's own embeddings of a skill's tokens."""
from __future__ import annotations

import random

import pytest
import torch
from peft import PeftModel
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from skillgraft.hypernet.apply import generated_lora
from skillgraft.hypernet.checkpoint import save_checkpoint
from skillgraft.hypernet.compile import Compiler
from skillgraft.hypernet.hypernetwork import HypernetConfig, Hypernetwork
from skillgraft.hypernet.targets import find_targets
from skillgraft.hypernet.train import TrainConfig, train_stage1
from tests.test_hypernet_train import make_tokenizer
from tests.tiny_llama import build_tiny_llama

TARGETS = ("q_proj", "v_proj", "o_proj")
LEXICAL = HypernetConfig(hidden=64, embed_dim=16, rank=4, target_modules=TARGETS, lexical_targets=("o_proj",),
                         lexical_rank=3, lexical_layer=1)
SKILL = "# rename\n\nReplace the word apple with pear, then run the tests again.\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    corpus = [SKILL, "Run pytest first, read the failure, fix it.", "grep -rn 'def name(' . then sed -i"] * 5
    return build_tiny_llama(tmp_path_factory.mktemp("tiny") / "base", corpus)


def _wake(compiler: Compiler) -> None:
    """Stands in for training: gives the zero-initialised coefficient and B heads weights."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for head in compiler.net.heads.values():
            out = head.to_c if hasattr(head, "to_c") else head.to_b
            out.weight.copy_(torch.randn(out.weight.shape, generator=g))


def test_lexical_columns_are_the_bases_embeddings_of_the_skills_tokens(folder):
    compiler = Compiler.load(None, folder, config=LEXICAL)  # loads the base's weights from its folder
    [fresh] = compiler.compile([SKILL])
    assert all(float(lr.dense().abs().max()) == 0.0 for lr in fresh.values())  # untrained: ΔW = 0
    _wake(compiler)
    [delta] = compiler.compile([SKILL])
    base = AutoModelForCausalLM.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    rows = base.get_output_embeddings().weight[tok(SKILL, add_special_tokens=False)["input_ids"]].detach()
    others = base.get_output_embeddings().weight[tok("Run pytest first", add_special_tokens=False)["input_ids"]].detach()
    o_projs = [path for path in delta if path.endswith("o_proj")]
    assert o_projs and all(delta[p].rank == 3 for p in o_projs) and delta["model.layers.0.self_attn.q_proj"].rank == 4

    def off_span(B: torch.Tensor, basis: torch.Tensor) -> float:
        basis, B = basis.T.double(), B.double()  # repeated tokens make the basis rank-deficient
        fit = torch.linalg.lstsq(basis, B, driver="gelsd").solution
        return float((basis @ fit - B).norm() / B.norm())

    for path in o_projs:
        B = delta[path].B
        assert float(B.norm()) > 0
        assert off_span(B, rows) < 1e-4  # every column is a mix of the skill's own token directions
        assert off_span(B, others) > 0.1  # and not of another text's


def test_lexical_adapter_loads_in_peft_and_matches_the_hooks(folder, tmp_path):
    compiler = Compiler.load(None, folder, config=LEXICAL)
    _wake(compiler)
    out = compiler.compile_to_dir(SKILL, tmp_path / "adapter")
    base = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.arange(3, 20)[None]
    with torch.no_grad():
        with generated_lora(base, compiler.net(compiler.encoder.encode([SKILL]))):
            hooked = base(input_ids=ids).logits
        plain = base(input_ids=ids).logits
        peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder), str(out)).eval()(input_ids=ids).logits
    assert torch.allclose(hooked, peft, atol=1e-5) and not torch.allclose(peft, plain, atol=1e-3)


def test_a_lexical_checkpoint_compiles_alike_after_reloading_and_needs_the_bases_weights(folder, tmp_path):
    compiler = Compiler.load(None, folder, config=LEXICAL)
    _wake(compiler)
    save_checkpoint(compiler.net, compiler.meta, tmp_path / "ckpt")
    again = Compiler.load(tmp_path / "ckpt", folder)
    [a], [b] = compiler.compile([SKILL]), again.compile([SKILL])
    assert all(torch.allclose(a[p].dense(), b[p].dense()) for p in a)
    config = AutoConfig.from_pretrained(folder)
    config._name_or_path = ""  # a configuration alone: no weights to read the skill with
    with pytest.raises(ValueError, match="base model's folder"):
        Compiler.load(tmp_path / "ckpt", config)


def test_lexical_targets_must_be_targets_that_write_one_width(folder):
    model = AutoModelForCausalLM.from_pretrained(folder)
    with pytest.raises(ValueError, match="not among the target modules"):
        Hypernetwork(HypernetConfig(lexical_targets=("o_proj",)), find_targets(model, ("q_proj", "v_proj")))
    spec = find_targets(model, ("o_proj", "up_proj"))
    with pytest.raises(ValueError, match="one output width"):
        Hypernetwork(HypernetConfig(target_modules=("o_proj", "up_proj"), lexical_targets=("o_proj", "up_proj")), spec)


WORDS = [a + b + c for a in ("ka", "lo", "mi", "su", "te", "vo", "ne", "ri") for b in ("mp", "rd", "sk", "lt", "nx", "vy")
         for c in ("a", "o", "u", "is", "en")]


def _word_skills(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, 3)) + "\n" for _ in range(n)]


def test_the_lexical_channel_carries_literals_of_skills_it_never_saw(tmp_path):
    """Skills of three invented words (240 of them, so a held-out skill's words are mostly new):
    a sentence vector barely tells such texts apart, their own tokens do. On held-out skills the
    lexical hypernetwork reconstructs the text with clearly lower loss than the same hypernetwork
    without the channel."""
    torch.set_num_threads(1)
    skills = _word_skills(60, seed=0)
    tok = make_tokenizer(skills + WORDS)
    losses = {}
    for name, hcfg in {"pooled": HypernetConfig(hidden=64, embed_dim=16, rank=4, target_modules=TARGETS),
                       "lexical": LEXICAL}.items():
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                             num_attention_heads=4, num_key_value_heads=2, initializer_range=0.15,
                                             tie_word_embeddings=True)).eval()
        cfg = TrainConfig(steps=100, batch_size=8, lr=3e-3, max_len=64, heldout=0.25, ratios=(1.0, 0.0, 0.0),
                          progress=False, hypernet=hcfg)
        result = train_stage1((model, tok), skills, tmp_path / name, cfg)
        losses[name] = result.evaluation
    assert losses["lexical"]["adapter"] < losses["pooled"]["adapter"] - 0.5, losses
