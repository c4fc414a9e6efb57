"""The hf: backend on a tiny Llama built from a config, with a tokenizer trained here, offline."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from skillgraft.agent import prompts
from skillgraft.agent.models.base import AdapterModel, ModelError, Sampling, SamplingModel
from skillgraft.agent.models.factory import make_model
from skillgraft.agent.models.hf_model import HFModel, plain_chat_text
from tiny_llama import build_tiny_llama

CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)
CORPUS = [prompts.system_prompt(), prompts.instance_prompt("Fix the failing test in slugify.py"),
          prompts.observation("4 passed", 0), prompts.assistant_reply("Look.", "cat slugify.py")]


def build_model(folder: Path, chat_template: str | None) -> Path:
    return build_tiny_llama(folder, CORPUS * 5, vocab_size=400, max_positions=512, chat_template=chat_template)


def build_lora(base: Path, out: Path, seed: int = 1) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = get_peft_model(LlamaForCausalLM.from_pretrained(base),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj", "down_proj"],
                                      init_lora_weights=False))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * 2.0)  # clearly non-zero, so the adapter must change outputs
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_model(tmp_path_factory.mktemp("tiny-chat"), CHAT_TEMPLATE)


@pytest.fixture(scope="module")
def lora(tiny, tmp_path_factory) -> Path:
    return build_lora(tiny, tmp_path_factory.mktemp("lora"))


MESSAGES = [{"role": "system", "content": prompts.system_prompt()},
            {"role": "user", "content": prompts.instance_prompt("Fix the failing test")}]


def test_loads_by_name_uses_the_chat_template_and_decodes_greedily(tiny):
    model = make_model(f"hf:{tiny}", max_new_tokens=12)
    assert isinstance(model, HFModel) and isinstance(model, AdapterModel)
    assert model.device == "cpu" and model.name == f"hf:{tiny}"
    assert model.render(MESSAGES).startswith("<s>system: You are a coding agent")
    assert model.render(MESSAGES).endswith("<s>assistant: ")
    first, second = model.query(MESSAGES), model.query(MESSAGES)
    assert first.content == second.content and first.cost == 0.0
    assert 0 < first.usage["completion_tokens"] <= 12 and first.usage["dropped_messages"] == 0


def test_a_folder_under_the_models_dir_is_found_by_its_name(tiny):
    model = make_model(tiny.name, models_dir=tiny.parent, max_new_tokens=4)
    assert isinstance(model, HFModel) and model.path == tiny


def test_plain_fallback_without_a_chat_template(tmp_path):
    model = HFModel(build_model(tmp_path / "plain", None), max_new_tokens=4)
    assert model.render(MESSAGES) == plain_chat_text(MESSAGES)
    assert model.render(MESSAGES).startswith("<|system|>\n") and model.render(MESSAGES).endswith("<|assistant|>\n")
    assert model.query(MESSAGES).usage["completion_tokens"] > 0


def test_lora_load_changes_outputs_and_unload_restores_them(tiny, lora):
    model = HFModel(tiny, max_new_tokens=16)
    before = model.query(MESSAGES).content
    model.load_adapter(lora)
    adapted = model.query(MESSAGES)
    assert adapted.content != before and adapted.usage["adapter"] == str(lora)
    model.load_adapter(lora)  # loading again replaces rather than stacks
    assert model.query(MESSAGES).content == adapted.content
    model.unload_adapter()
    assert model.adapter_dir is None and model.query(MESSAGES).content == before
    assert not any("lora" in name for name, _ in model._model.named_modules())


def test_adapter_for_another_base_is_refused(tiny, tmp_path):
    # Same layer names, other shapes: the same tokenizer with a base of hidden size 48.
    build_model(tmp_path / "wider", CHAT_TEMPLATE)
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig.from_pretrained(tmp_path / "wider")
    config.hidden_size, config.intermediate_size = 48, 96
    LlamaForCausalLM(config).save_pretrained(tmp_path / "wider")
    other = build_lora(tmp_path / "wider", tmp_path / "other-lora")
    model = HFModel(tiny, max_new_tokens=8)
    before = model.query(MESSAGES).content
    with pytest.raises(ModelError, match="does not fit"):
        model.load_adapter(other)
    with pytest.raises(ModelError, match="not a PEFT adapter folder"):
        model.load_adapter(tmp_path)
    assert model.adapter_dir is None and model.query(MESSAGES).content == before  # no trace left


def test_adapters_written_by_the_hypernet_io_load_and_their_fingerprint_is_checked(tiny, tmp_path):
    from skillgraft.hypernet.lora import LowRank
    from skillgraft.hypernet.peft_io import model_fingerprint, save_adapter

    model = HFModel(tiny, max_new_tokens=8)
    before = model.query(MESSAGES).content
    torch.manual_seed(3)
    delta = {f"model.layers.{i}.self_attn.{m}": LowRank(B=torch.randn(32, 2) * 3, A=torch.randn(2, 32))
             for i in range(2) for m in ("q_proj", "v_proj")}
    good = save_adapter(delta, tmp_path / "good", base_model_name="tiny", fingerprint=model_fingerprint(model._base),
                        target_modules=["q_proj", "v_proj"])
    model.load_adapter(Path(good) if good else tmp_path / "good")
    assert model.query(MESSAGES).content != before
    model.unload_adapter()
    save_adapter(delta, tmp_path / "bad", base_model_name="other", fingerprint="sha256:000000000000000000000000",
                 target_modules=["q_proj", "v_proj"])
    with pytest.raises(ModelError, match="fingerprint"):
        model.load_adapter(tmp_path / "bad")
    assert model.query(MESSAGES).content == before


def test_long_conversations_drop_the_oldest_turns_first(tiny):
    model = HFModel(tiny, max_new_tokens=16, max_context=240)
    turns = []
    for i in range(12):
        turns += [{"role": "assistant", "content": prompts.assistant_reply(f"step {i}", "ls")},
                  {"role": "user", "content": prompts.observation(f"file{i}.py", 0)}]
    ids, dropped = model.prompt_ids(MESSAGES + turns)
    assert len(ids) <= 240 - 16 and dropped > 0 and dropped % 2 == 0
    text = model.tokenizer.decode(ids)
    assert text.startswith("<s>system: You are a coding agent") and "Task: Fix the failing test" in text
    assert "file11.py" in text and "file0.py" not in text
    assert model.query(MESSAGES + turns).usage["dropped_messages"] == dropped


def test_bad_model_folders_are_model_errors(tmp_path):
    with pytest.raises(ModelError, match="no config.json"):
        make_model(f"hf:{tmp_path}")
    with pytest.raises(ModelError, match="leaves no room"):
        HFModel(build_model(tmp_path / "m", None), max_new_tokens=600)


@pytest.mark.docker
def test_run_task_activates_the_adapter_for_the_run_only(tiny, lora, tmp_path):
    from skillgraft.agent.loadout import make_loadout
    from skillgraft.agent.runner import run_task
    from skillgraft.agent.task import Task

    task = Task.from_dict({"id": "flag", "repo": {"files": {"flag.txt": "off\n"}}, "instruction": "Turn the flag on.",
                           "test": "grep -qx on flag.txt", "limits": {"steps": 2}})
    model = HFModel(tiny, max_new_tokens=8)
    result = run_task(task, model, loadout=make_loadout(None, model, mode="parametric", adapters=[lora]),
                      trajectory_path=tmp_path / "t.json")
    assert not result.success and result.exit_status in {"StepLimit", "FormatErrors"}
    assert model.adapter_dir is None  # unloaded again after the run
    import json

    info = json.loads((tmp_path / "t.json").read_text())["info"]
    assert info["adapters"] == [str(lora)] and info["model"] == f"hf:{tiny}"
    assert info["usage"]["completion_tokens"] > 0 and info["usage"]["prompt_tokens"] > 0


def test_models_loaded_by_threads_at_once_all_hold_real_weights(tiny, tmp_path):
    """Loading a tied-embedding model (as the bundled policy is) from several threads at once
    used to leave weights on the meta device in all but one of them."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from transformers import AutoConfig, AutoTokenizer, LlamaForCausalLM

    config = AutoConfig.from_pretrained(tiny)
    config.tie_word_embeddings = True
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny).save_pretrained(tmp_path)
    start = Barrier(4)

    def load(_):
        start.wait()
        return HFModel(tmp_path)

    with ThreadPoolExecutor(4) as pool:
        models = list(pool.map(load, range(4)))
    reference = HFModel(tmp_path)._base.state_dict()
    for model in models:
        weights = model._base.state_dict()
        assert all(torch.equal(weights[k], reference[k]) for k in reference)


def test_the_next_turn_reuses_the_cached_prefix_and_answers_as_without_it(tiny, lora):
    """An agent's next prompt extends the last one: only the new tokens are run, and the reply is
    the one a cold model gives; an adapter change drops the cache."""
    warm = make_model(f"hf:{tiny}", max_new_tokens=6)
    cold = make_model(f"hf:{tiny}", max_new_tokens=6)
    chat = [{"role": "system", "content": prompts.system_prompt()},
            {"role": "user", "content": prompts.instance_prompt("Fix the failing test in slugify.py")}]
    for turn in range(3):
        reply = warm.query(chat)
        cold._cache = None
        assert reply.content == cold.query(chat).content
        if turn:
            assert reply.usage["cached_tokens"] > 0.5 * reply.usage["prompt_tokens"], reply.usage
        chat += [{"role": "assistant", "content": reply.content},
                 {"role": "user", "content": prompts.observation("4 passed", 0)}]
    warm.load_adapter(lora)  # states computed with other weights must not be reused
    reply = warm.query(chat)
    assert reply.usage["cached_tokens"] == 0
    cold.load_adapter(lora)
    cold._cache = None
    assert reply.content == cold.query(chat).content


def test_prompt_lookup_checks_drafts_in_fewer_passes_and_answers_as_plain_greedy(tiny, lora):
    """Drafts copied from the conversation are kept only where the model would have chosen them:
    turn after turn, from a kept cache, with and without an adapter, the replies are transformers'
    plain greedy decoding's, reached in fewer forward passes than they have tokens."""
    drafting = make_model(f"hf:{tiny}", max_new_tokens=40)
    plain = make_model(f"hf:{tiny}", max_new_tokens=40, lookup_tokens=0, reuse_cache=False)
    assert drafting.lookup_tokens > 0
    passes = []
    hook = drafting._base.register_forward_hook(lambda *_: passes.append(1))
    for adapter in (None, lora):
        if adapter:
            drafting.load_adapter(adapter)
            plain.load_adapter(adapter)
        chat = list(MESSAGES)
        for turn in range(3):
            passes.clear()
            reply = drafting.query(chat)
            assert reply.content == plain.query(chat).content
            assert len(passes) < reply.usage["completion_tokens"], (len(passes), reply.usage)
            assert (reply.usage["cached_tokens"] > 0) == (turn > 0)
            chat += [{"role": "assistant", "content": reply.content},
                     {"role": "user", "content": prompts.observation("cat slugify.py\n" * 3, 0)}]
    hook.remove()
    with pytest.raises(ModelError, match="lookup_tokens"):
        make_model(f"hf:{tiny}", lookup_tokens=-1)


def test_sampling_replays_a_conversation_exactly_even_with_other_threads_sampling(tiny):
    """Each reply draws from a generator seeded by the model's seed and the prompt: the same
    conversation replays, another seed draws other replies, and threads sampling at once
    (each with its own model) get what each gets alone."""
    from concurrent.futures import ThreadPoolExecutor

    hot = [make_model(f"hf:{tiny}", max_new_tokens=24, temperature=2.0, seed=s) for s in range(4)]
    alone = [m.query(MESSAGES).content for m in hot]
    assert [m.query(MESSAGES).content for m in hot] == alone
    assert len(set(alone)) > 1
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda m: m.query(MESSAGES).content, hot)) == alone
    greedy = make_model(f"hf:{tiny}", max_new_tokens=24).query(MESSAGES).content
    assert make_model(f"hf:{tiny}", max_new_tokens=24, temperature=1e-4).query(MESSAGES).content == greedy


def test_a_run_can_sample_from_another_stream_and_the_model_is_as_it_was_after(tiny):
    """`sampled` sets one run's temperature and stream: stream 0 is the model's own draws, another
    stream draws other replies for the same conversation and replays them, and once the block
    ends the model decodes as before (here greedily)."""
    model = make_model(f"hf:{tiny}", max_new_tokens=24, seed=3)
    assert isinstance(model, SamplingModel)
    greedy = model.query(MESSAGES).content
    own = make_model(f"hf:{tiny}", max_new_tokens=24, temperature=2.0, seed=3).query(MESSAGES).content
    with model.sampled(Sampling(2.0)):
        assert model.query(MESSAGES).content == own
    streams = []
    for stream in (1, 2, 3):
        with model.sampled(Sampling(2.0, stream)):
            streams.append(model.query(MESSAGES).content)
        with model.sampled(Sampling(2.0, stream)):
            assert model.query(MESSAGES).content == streams[-1]
    assert len(set(streams + [own])) > 1
    assert model.query(MESSAGES).content == greedy and model.temperature == 0.0
    with pytest.raises(ValueError, match="temperature above 0"):
        Sampling(0.0)
