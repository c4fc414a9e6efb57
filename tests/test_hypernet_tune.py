"""A compiled skill tuned on the run it was learned from, on a real tiny Llama and a real store."""
from __future__ import annotations

import tempfile

import pytest
import torch

from skillgraft.agent import prompts
from skillgraft.agent.skill_adapters import compiled_adapter, compiled_text
from skillgraft.agent.trajectory import TrajectoryWriter, conversation_without_skills
from skillgraft.hypernet.peft_io import load_adapter
from skillgraft.hypernet.tune import TunedCompiler, Tuning, tune_delta
from skillgraft.skills.store import Store
from learn_support import parts  # noqa: F401  (parts is a fixture)

LEARNED = "---\nname: wrong-word\ndescription: Fixing wrong word bugs.\n---\n1. Find NAME: `grep -rn 'NAME =' .`\n"
BY_HAND = "---\nname: by-hand\ndescription: Written by a person.\n---\nRun the tests first.\n"


def run_messages(skill_text: str | None = None) -> list[dict]:
    skills = [("wrong-word", skill_text)] if skill_text else []
    return [
        {"role": "system", "content": prompts.system_prompt()},
        {"role": "user", "content": prompts.instance_prompt("The test suite fails.", skills)},
        {"role": "assistant", "content": "I will look around."},  # no command: a format error
        {"role": "user", "content": prompts.FORMAT_ERROR},
        {"role": "assistant", "content": prompts.assistant_reply("Find the constant.", "grep -rn 'LIMIT =' .")},
        {"role": "user", "content": prompts.observation("./app.py:3:LIMIT = 'north'", 0)},
        {"role": "assistant", "content": prompts.assistant_reply("Fix it.", "sed -i 's/north/south/' app.py")},
        {"role": "user", "content": prompts.observation("", 0)},
        {"role": "assistant", "content": prompts.assistant_reply("Done.", prompts.SUBMIT_COMMAND)},
    ]


def with_adapter(base, delta):
    """The base with `delta` as its PEFT adapter, for reading."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from skillgraft.hypernet.peft_io import save_adapter

    with tempfile.TemporaryDirectory() as folder:
        save_adapter(delta, folder, base_model_name=None, fingerprint=None, target_modules=sorted(delta))
        return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), folder).eval()


def reply_loss(base, delta, conversation) -> float:
    from transformers import AutoTokenizer

    from skillgraft.hypernet.evaluate import token_loss
    from skillgraft.hypernet.fit import collate, pad_id
    from skillgraft.hypernet.objectives import render_chat

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = with_adapter(base, delta)
    tokens = render_chat(tokenizer, conversation, 2048)
    ids, labels, attn = collate([(tokens.ids, [int(t) for t in tokens.target])], pad_id(tokenizer))
    with torch.no_grad():
        total, n = token_loss(model, ids, attn, labels)
    return float(total) / n


def test_tuning_lowers_the_loss_on_the_run_and_keeps_the_adapters_modules_and_ranks(parts):
    base, compiler = parts
    [delta] = compiler.compile([LEARNED])
    before = {name: (lr.A.clone(), lr.B.clone()) for name, lr in delta.items()}
    conversation = run_messages()
    tuned = tune_delta(delta, base, [conversation], Tuning(steps=20, lr=3e-2, start="compiled"))
    assert sorted(tuned) == sorted(delta)
    assert all(tuned[m].rank == delta[m].rank and tuned[m].A.shape == delta[m].A.shape for m in delta)
    for name, (a, b) in before.items():  # the compiled adapter given is left as it was
        assert torch.equal(delta[name].A, a) and torch.equal(delta[name].B, b)
    # a random tiny Llama's logits barely move through q and v at rank 4: 5.69 falls to 5.61 here
    assert reply_loss(base, tuned, conversation) < reply_loss(base, delta, conversation) - 0.04


def test_a_runs_conversation_for_tuning_leaves_out_its_skills_and_does_not_train_a_format_error(tmp_path):
    path = tmp_path / "run.json"
    TrajectoryWriter(path, {"task": {"id": "t1"}}).write(run_messages(LEARNED))
    conversation = conversation_without_skills(path)
    first_user = conversation[1]["content"]
    assert "<skill" not in first_user and "grep -rn 'NAME ='" not in first_user
    assert first_user == prompts.instance_prompt("The test suite fails.")
    marked = [m.get("train", True) for m in conversation if m["role"] == "assistant"]
    assert marked == [False, True, True, True]


def test_a_tuned_compiler_tunes_a_learned_version_on_its_run_and_compiles_a_written_one_as_it_is(parts, tmp_path):
    base, compiler = parts
    tuned = TunedCompiler(compiler, base, Tuning(steps=4, lr=1e-2, start="compiled"))
    assert tuned.checkpoint_id == f"{compiler.checkpoint_id}+tuned-compiled-4x0.01-seed0"
    run = tmp_path / "run.json"
    TrajectoryWriter(run, {"task": {"id": "t1"}}).write(run_messages(LEARNED))
    with Store.at(tmp_path / "store", embedder=lambda: None) as store:
        trajectory = store.add_trajectory(run, "t1", "wrong_word", "Submitted", 1.0, 0.0, 4, {}, [], [])
        learned = store.add_version("wrong-word", LEARNED, "summarised", trajectory_id=trajectory.id)
        by_hand = store.add_version("by-hand", BY_HAND)

        plain_adapter = compiled_adapter(store, compiler, learned)
        tuned_adapter = compiled_adapter(store, tuned, learned)
        assert tuned_adapter.id != plain_adapter.id  # cached apart, by checkpoint id
        assert tuned_adapter.hypernet_ckpt == tuned.checkpoint_id
        assert tuned_adapter.provenance["tuned_on_trajectory"] == trajectory.id
        assert compiled_adapter(store, tuned, learned).id == tuned_adapter.id  # tuned once
        plain, _ = load_adapter(store.adapter_path(plain_adapter.id))
        moved, _ = load_adapter(store.adapter_path(tuned_adapter.id))
        assert sorted(moved) == sorted(plain)
        assert any(not torch.allclose(moved[m].B, plain[m].B) for m in plain)

        # the learner's gate weighs a summary before it is a version: compiled from its text and
        # tuned on its run, it is the adapter the version gets
        candidate = compiled_text(tuned, LEARNED, tmp_path / "cache", run)
        assert compiled_text(tuned, LEARNED, tmp_path / "cache").key != candidate.key
        weighed, _ = load_adapter(candidate.path)
        for m in moved:
            torch.testing.assert_close(weighed[m].B, moved[m].B)

        written = compiled_adapter(store, tuned, by_hand)  # no run to tune on
        assert "tuned_on_trajectory" not in written.provenance
        same, _ = load_adapter(store.adapter_path(written.id))
        reference, _ = load_adapter(store.adapter_path(compiled_adapter(store, compiler, by_hand).id))
        for m in reference:
            torch.testing.assert_close(same[m].A, reference[m].A)
            torch.testing.assert_close(same[m].B, reference[m].B)


def test_a_fresh_start_trains_a_new_lora_on_the_hypernetworks_modules_and_leaves_the_text_out(parts):
    base, compiler = parts
    tuned = TunedCompiler(compiler, base, Tuning(steps=20, start="fresh"))
    assert tuned.tuning.rate == 5e-3 and tuned.checkpoint_id.endswith("+tuned-fresh-20x0.005-seed0")
    conversation = run_messages()
    one, other = (tuned.compile_on_runs(text, [conversation]) for text in (LEARNED, BY_HAND))
    config = compiler.meta.config
    assert {name.rsplit(".", 1)[-1] for name in one} == set(config.target_modules)
    assert all(lr.rank == config.rank for lr in one.values())
    for m in one:  # the text went into nothing: two skills tuned on one run are one adapter
        torch.testing.assert_close(one[m].B, other[m].B)
    zero = {m: type(lr)(B=torch.zeros_like(lr.B), A=lr.A) for m, lr in one.items()}
    assert reply_loss(base, one, conversation) < reply_loss(base, zero, conversation) - 0.04


def other_run() -> list[dict]:
    """A run of another task: the replies an adapter tuned on run_messages() should leave alone."""
    return [
        {"role": "system", "content": prompts.system_prompt()},
        {"role": "user", "content": prompts.instance_prompt("test_total fails: 9 != 10.")},
        {"role": "assistant", "content": prompts.assistant_reply("Find the function.", "grep -rn 'def total(' .")},
        {"role": "user", "content": prompts.observation("./calc.py:7:def total(items):", 0)},
        {"role": "assistant", "content": prompts.assistant_reply("Fix the range.", "sed -i 's/n - 1/n/' calc.py")},
    ]


def replies_moved(base, delta, conversation) -> float:
    """KL from the base to the base with `delta` over the conversation's replies."""
    from transformers import AutoTokenizer

    from skillgraft.hypernet.anchor import anchor_term, replies_log_probs
    from skillgraft.hypernet.objectives import render_chat

    tokens = render_chat(AutoTokenizer.from_pretrained(base), conversation, 2048)
    model = with_adapter(base, delta)
    with torch.no_grad():
        moved = replies_log_probs(model, tokens.ids, tokens.target)
        with model.disable_adapter():
            before = replies_log_probs(model, tokens.ids, tokens.target)
    return anchor_term(before, moved, "kl").item()


def test_anchored_tuning_leaves_the_anchor_runs_replies_closer_to_the_base_and_is_cached_apart(parts):
    base, compiler = parts
    run, other = run_messages(), other_run()
    plain = TunedCompiler(compiler, base, Tuning(steps=20, lr=3e-2))
    wanting = TunedCompiler(compiler, base, Tuning(steps=20, lr=3e-2, anchor_weight=20.0))
    assert not plain.wants_anchors and wanting.wants_anchors
    anchored = wanting.anchored([other], "k1")
    assert not anchored.wants_anchors
    assert anchored.checkpoint_id == f"{compiler.checkpoint_id}+tuned-fresh-20x0.03-seed0+anchor-kl20-k1"
    assert anchored.checkpoint_id != wanting.anchored([other], "k2").checkpoint_id
    free, kept = plain.compile_on_runs(LEARNED, [run]), anchored.compile_on_runs(LEARNED, [run])
    # KL 0.0098 unanchored, 0.00044 anchored here
    assert replies_moved(base, kept, other) < 0.2 * replies_moved(base, free, other)
    zero = {m: type(lr)(B=torch.zeros_like(lr.B), A=lr.A) for m, lr in kept.items()}
    assert reply_loss(base, kept, run) < reply_loss(base, zero, run) - 0.04  # and it still learned the run


@pytest.mark.parametrize("fields, message", [({"steps": 0}, "at least one step"), ({"lr": 0.0}, "above 0"),
                                             ({"start": "scratch"}, "one of compiled, fresh"),
                                             ({"anchor_weight": -1.0}, "0 or more"),
                                             ({"anchor_loss": "l2"}, "one of kl, margin")])
def test_a_tuning_that_cannot_train_is_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Tuning(**fields)
