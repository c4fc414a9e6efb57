"""The command memory: a skill's code spans written into down_proj in closed form."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from skillgraft.hypernet.apply import generated_lora
from skillgraft.hypernet.memory import CommandMemory, LayerMoments, code_pairs, is_literal_edit, read_layers
from tests.tiny_llama import build_tiny_llama

SKILL = ("# Or where and is needed\n\nFind the line with ` or ` in NAME, then join the bounds with and: "
         "`sed -i 's/ or / and /' FILE` and run `python3 -m pytest -q` again.\n")
CORPUS = ["Run the tests first and read the failing line.", "grep -rn 'def name(' . prints the file and its code."]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = build_tiny_llama(tmp_path_factory.mktemp("tiny") / "base", [SKILL, *CORPUS] * 4, intermediate_size=256)
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def _reference(tok) -> list[list[int]]:
    """Token sequences for the moments: more tokens than down_proj has inputs, as C needs."""
    g = torch.Generator().manual_seed(0)
    return [torch.randint(3, len(tok), (100,), generator=g).tolist() for _ in range(30)]


def test_only_literal_edits_are_written_never_templates_or_shared_commands():
    assert is_literal_edit("sed -i '/def NAME(/,/^$/s/ or / and /' FILE")
    assert is_literal_edit("sed -i 's/\"KEY\"]/\"KEYs\"]/' FILE")  # the s is the skill's, KEY the task's
    assert not is_literal_edit("sed -i '/def NAME(/,/^$/s/HELPER(B, A)/HELPER(A, B)/' FILE")
    assert not is_literal_edit("sed -i 's/NAME = OLD/NAME = NEW/' FILE")
    assert not is_literal_edit("""sed -i 's/NAME = "OLD"$/NAME = "NEW"/' FILE""")  # an anchor is no literal
    assert is_literal_edit("sed -i 's/NAME = VALUE$/NAME = -VALUE/' FILE")  # the sign is
    assert is_literal_edit("sed -i 's/return$/return VAR/' FILE")
    assert not is_literal_edit("COLUMNS=150 python3 -m pytest -q --tb=no -rf | tail -n 2")
    assert not is_literal_edit("cat tests/test_a.py")


def test_pairs_stay_inside_literal_edits_and_never_write_a_placeholder(tiny):
    _, tok = tiny
    ids, pairs = code_pairs(tok, SKILL)
    written = tok.decode([y for _, y in pairs])
    assert "and" in written and "-i" in written
    assert "pytest" not in written  # a command every skill shares: the policy knows it
    assert "FILE" not in written and "NAME" not in written and "bounds" not in written
    for t, y in pairs:
        assert ids[t + 1] == y


RECIPES = ("Return what it builds: `sed -i '/def NAME(/,/^$/s/return$/return VAR/' FILE`.\n"
           "Read the plural key: `sed -i '/def NAME(/,/^$/s/\"KEY\"]/\"KEYs\"]/' FILE`.\n")
PIECE = r" ?[A-Z]+| ?[a-z]+|[^\sA-Za-z]| "  # words (capitals apart), each other character alone


def _piece_tokenizer():
    """A word-level tokenizer whose pieces are known: `return`, ` VAR`, `KEY` then `s`, `$`, `/`."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {piece: i for i, piece in enumerate(dict.fromkeys(["<unk>", *re.findall(PIECE, RECIPES)]))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def test_pairs_never_key_a_loop_or_write_a_derived_placeholder():
    tok = _piece_tokenizer()
    ids, pairs = code_pairs(tok, RECIPES)
    keyed = [tuple(tok.convert_ids_to_tokens([ids[t], y])) for t, y in pairs]
    assert ("/", "return") in keyed and ("KEY", "s") in keyed  # the edits are written
    # `return` comes again right before VAR, where the agent writes its own variable: keyed by
    # the first `return`, `$` would follow the second as well, and `$/return` again after it.
    assert not any(key == "return" for key, _ in keyed)
    # KEY in KEYs is the task's key, never a value: only the plural's `s` is the skill's.
    assert not any(value == "KEY" for _, value in keyed)
    # Between a substitution's sides a delimiter, anchor or quote keys no other (`$/`, `"]/"`):
    # such keys, alike everywhere, chain into loops. The address (`/^$/`), every skill's own, is
    # written, and so is the close: they hold the policy's syntax steady against the other keys.
    assert keyed.count(("$", "/")) == 2  # one per recipe, in the address
    assert ('"', "]") not in keyed and keyed.count(("]", "/")) == 1  # the closing `]/`, not the middle one
    # A placeholder's token keys no syntax (KEY then `"`, VAR then `/`): the agent writes its own
    # word there, and in its reasons as well, where the syntax would run on after it.
    assert ("KEY", '"') not in keyed and (" VAR", "/") not in keyed


def _greedy(model, ids, delta=None):
    factors = {path: (lr.A[None], lr.B[None]) for path, lr in (delta or {}).items()}
    with torch.no_grad(), generated_lora(model, factors):
        return model(torch.tensor([ids])).logits[0].argmax(-1).tolist()


def test_the_memory_makes_the_model_write_each_span_token_and_stays_quiet_elsewhere(tiny):
    model, tok = tiny
    ids, pairs = code_pairs(tok, SKILL)
    memory = CommandMemory(model, tok, LayerMoments.measure(model, _reference(tok), [1]), scale=2.0)
    [delta] = memory.write([SKILL])
    assert set(delta) == {"model.layers.1.mlp.down_proj"}
    lr = delta["model.layers.1.mlp.down_proj"]
    assert lr.rank == len(pairs)

    before, after = _greedy(model, ids), _greedy(model, ids, delta)
    recalled = sum(after[t] == y for t, y in pairs) / len(pairs)
    known = sum(before[t] == y for t, y in pairs) / len(pairs)
    assert recalled >= 0.8 and known <= 0.3  # the random tiny model knows none of the commands
    # What the memory adds to the layer's output: the value at each key, far less at a token of
    # the prose that no span holds (a random two-layer model's keys are mostly the token itself).
    inputs, _ = read_layers(model, ids, [1])
    added = (inputs[1] @ lr.A.T @ lr.B.T).norm(dim=-1)
    keys = [t for t, _ in pairs]
    in_spans = {ids[t] for t in keys}
    elsewhere = [t for t in range(len(ids)) if ids[t] not in in_spans and (t == 0 or ids[t - 1] not in in_spans)]
    assert len(elsewhere) >= 20
    assert float(added[elsewhere].mean()) < 0.4 * float(added[keys].mean())


def test_a_text_without_code_writes_nothing_and_a_missing_layer_is_named(tiny):
    model, tok = tiny
    reference = _reference(tok)
    memory = CommandMemory(model, tok, LayerMoments.measure(model, reference, [0]))
    assert memory.write(["No commands here, only words."]) == [{}]
    with pytest.raises(ValueError, match="no down_proj in layers \\[5\\]"):
        LayerMoments.measure(model, reference, [5])


def _with_memory(tiny, tmp_path, scale: float) -> tuple[Path, Path, str]:
    """The tiny base saved, and a fresh hypernetwork for it given a memory over layer 1: (the base's
    folder, the checkpoint's, the checkpoint's id before the memory)."""
    from skillgraft.hypernet.checkpoint import save_checkpoint
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.hypernetwork import HypernetConfig
    from skillgraft.hypernet.memory import save_memory_spec

    model, tok = tiny
    folder = tmp_path / "base"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    fresh = Compiler.load(None, folder, config=HypernetConfig(hidden=32, embed_dim=8, rank=2))
    ckpt = tmp_path / "hypernet"
    without = save_checkpoint(fresh.net, fresh.meta, ckpt)
    save_memory_spec(ckpt, [1], _reference(tok), scale=scale)
    return folder, ckpt, without


def test_a_checkpoint_with_a_memory_compiles_both_into_one_peft_adapter(tiny, tmp_path):
    from peft import PeftModel

    from skillgraft.hypernet.checkpoint import checkpoint_id
    from skillgraft.hypernet.compile import Compiler

    model, tok = tiny
    folder, ckpt, without = _with_memory(tiny, tmp_path, scale=2.0)
    assert checkpoint_id(ckpt) != without  # compiled adapters cached under the old id are not reused

    compiler = Compiler.load(ckpt, folder)
    [delta] = compiler.compile([SKILL])
    assert {"model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"} <= set(delta)
    assert "model.layers.0.mlp.down_proj" not in delta
    out = compiler.compile_to_dir(SKILL, tmp_path / "adapter")

    ids, pairs = code_pairs(tok, SKILL)
    with torch.no_grad():
        peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(folder), out).eval()
        guess = peft(torch.tensor([ids])).logits[0].argmax(-1).tolist()
    assert guess == _greedy(model, ids, delta)  # PEFT computes what the compiled ΔW does
    assert sum(guess[t] == y for t, y in pairs) / len(pairs) >= 0.8

    # Beside the skill's text in the prompt, the skill compiles without the memory, under the
    # checkpoint's id without it: the memory's keys would fire on the text itself.
    beside = compiler.beside_text()
    assert beside.checkpoint_id == without and beside.memory is None
    [plain] = beside.compile([SKILL])
    assert set(plain) == set(delta) - {"model.layers.1.mlp.down_proj"}

    # A skill with no literal edit writes no memory, and its adapter wraps no module for one.
    template = "Swap them back: `sed -i 's/HELPER(B, A)/HELPER(A, B)/' FILE`."
    saved = json.loads((compiler.compile_to_dir(template, tmp_path / "template") / "adapter_config.json").read_text())
    assert "model.layers.1.mlp.down_proj" not in saved["target_modules"]
    assert "model.layers.1.mlp.down_proj" in json.loads((out / "adapter_config.json").read_text())["target_modules"]


def test_a_loadout_leaves_the_memory_out_where_the_prompt_shows_the_text(tiny, tmp_path):
    from skillgraft.agent.loadout import GivenSkill, make_loadout
    from skillgraft.agent.models.hf_model import HFModel
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.hypernet.peft_io import load_adapter

    folder, ckpt, _ = _with_memory(tiny, tmp_path, scale=1.0)
    compiler = Compiler.load(ckpt, folder)
    skill = GivenSkill.of_body("or-and", SKILL)
    written = {}
    for mode in ("parametric", "both"):
        loadout = make_loadout(None, HFModel(folder), [skill], mode, compiler=compiler, cache=tmp_path / "cache")
        assert loadout.adapter_dir is not None
        written[mode] = set(load_adapter(loadout.adapter_dir)[0])
    assert "model.layers.1.mlp.down_proj" in written["parametric"]
    assert written["both"] == written["parametric"] - {"model.layers.1.mlp.down_proj"}


def test_a_read_is_not_disturbed_by_other_threads_running_the_same_model(tiny):
    """Runs compile skills on two threads at once, with one base model for reading."""
    from concurrent.futures import ThreadPoolExecutor

    model, tok = tiny
    ids, _ = code_pairs(tok, SKILL)
    alone, _ = read_layers(model, ids, [1])
    other = torch.randint(3, len(tok), (1, 400), generator=torch.Generator().manual_seed(1))

    def busy() -> None:
        with torch.no_grad():
            for _ in range(30):
                model(other)

    with ThreadPoolExecutor(2) as pool:
        noise = pool.submit(busy)
        reads = [pool.submit(read_layers, model, ids, [1]) for _ in range(30)]
        noise.result()
        assert all(torch.equal(r.result()[0][1], alone[1]) for r in reads)


def test_moments_measured_later_are_measured_once_at_the_first_write(tiny):
    model, tok = tiny
    calls = []

    def measure() -> LayerMoments:
        calls.append(1)
        return LayerMoments.measure(model, _reference(tok), [1])

    later = CommandMemory(model, tok, measure, layers=[1], scale=2.0)
    assert later.modules() == ["model.layers.1.mlp.down_proj"] and not calls  # nothing read yet
    [first] = later.write([SKILL])
    later.write([SKILL])
    assert len(calls) == 1
    [eager] = CommandMemory(model, tok, measure(), scale=2.0).write([SKILL])
    path = "model.layers.1.mlp.down_proj"
    assert torch.allclose(first[path].B, eager[path].B) and torch.allclose(first[path].A, eager[path].A)
    with pytest.raises(ValueError, match="need the layers"):
        CommandMemory(model, tok, measure)
