"""The tiny policy's recipe on a very small config: it trains, its loss falls, and the saved
folder loads as an `hf:` model that takes a compiled LoRA adapter."""
from __future__ import annotations

import pytest

from skillgraft.skillworld.dataset import episode_record
from skillgraft.skillworld.episodes import run_episodes
from skillgraft.skillworld.generate import generate
from skillgraft.skillworld.policy.train import TrainConfig, train_policy


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    episodes = run_episodes([generate("wrong_operator", 1), generate("off_by_one", 2), generate("wrong_boolean", 3)],
                            backend="local")
    assert all(e.success for e in episodes)
    records = [episode_record(e) for e in episodes]
    out = tmp_path_factory.mktemp("policy")
    config = TrainConfig(size="micro", vocab_size=600, context=1024, steps=40, batch_size=4, lr=5e-3, warmup=5, seed=1,
                         context_weight=0.3)
    report = train_policy(records[:2], out, config, show_progress=False)
    return out, report, records


def test_micro_policy_loss_falls(trained):
    _, report, _ = trained
    first = sum(report["losses"][:5]) / 5
    assert report["final_loss"] < 0.7 * first, (first, report["final_loss"])
    assert report["examples"] == 4  # two episodes, each with and without a skill in context


def test_training_carries_on_from_a_saved_policy(trained, tmp_path):
    folder, report, records = trained
    config = TrainConfig(size="micro", context=1024, steps=5, batch_size=4, lr=1e-3, warmup=1, seed=2,
                         init_from=str(folder))
    more = train_policy(records[:2], tmp_path / "more", config, show_progress=False)
    # it starts where the first run ended, not from a fresh model's loss, with the same tokenizer
    assert more["first_loss"] < 0.5 * report["first_loss"], (more["first_loss"], report["first_loss"])
    assert (tmp_path / "more" / "tokenizer.json").read_text() == (folder / "tokenizer.json").read_text()


def test_saved_policy_loads_with_hf_and_takes_a_compiled_adapter(trained, tmp_path):
    from skillgraft.agent.models.factory import make_model
    from skillgraft.agent.prompts import instance_prompt, system_prompt
    from skillgraft.hypernet.compile import Compiler
    from skillgraft.skillworld.library import for_family

    folder, _, _ = trained
    model = make_model(f"hf:{folder}", max_new_tokens=12)
    chat = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": instance_prompt("Fix it.")}]
    before = model.query(chat).content
    assert isinstance(before, str)
    rendered = model.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert rendered.endswith("<|assistant|>") and rendered.startswith("<|system|>")

    compiler = Compiler.load(None, str(folder), seed=0)
    adapter = compiler.compile_to_dir(for_family("wrong_operator")[0].body, tmp_path / "adapter")
    model.load_adapter(adapter)
    assert model.query(chat).content == before  # an untrained hypernetwork compiles ΔW = 0
    model.unload_adapter()


def test_a_lora_expert_learns_a_new_family_and_loads_on_the_policy(trained, tmp_path):
    from skillgraft.agent.models.factory import make_model
    from skillgraft.hypernet.lora import frobenius_norm
    from skillgraft.hypernet.peft_io import check_base, load_adapter
    from skillgraft.skillworld.policy.lora_expert import train_lora_expert

    folder, _, records = trained
    unseen = [r for r in records if r["family"] == "wrong_boolean"]
    report = train_lora_expert(folder, unseen, tmp_path / "expert", rank=4, steps=40, lr=3e-2, show_progress=False)
    assert report["families"] == ["wrong_boolean"] and report["final_loss"] < 0.95 * report["first_loss"], report
    delta, info = load_adapter(tmp_path / "expert")
    assert {lr.rank for lr in delta.values()} == {4} and frobenius_norm(delta) > 0
    assert check_base(tmp_path / "expert", str(folder)).fingerprint == info.fingerprint
    # the policy itself is untouched: the expert lives only in the adapter
    model = make_model(f"hf:{folder}", max_new_tokens=12)
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "Fix it."}]
    before = model.query(chat).content
    model.load_adapter(tmp_path / "expert")
    model.unload_adapter()
    assert model.query(chat).content == before


def test_train_expert_command_registers_a_checkpoint(trained, tmp_path):
    from typer.testing import CliRunner

    from skillgraft.evolve.cycleqd.population import select_checkpoints
    from skillgraft.cli import app
    from skillgraft.skills.store import Store

    folder, _, _ = trained
    home = tmp_path / "home"
    args = ["world", "train-expert", str(tmp_path / "expert"), "-f", "wrong_boolean", "--policy", str(folder),
            "--episodes", "1", "--steps", "3", "--register", "--home", str(home)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    store = Store.at(home)
    (adapter_id,) = select_checkpoints(store, ["kind:checkpoint"])
    record = store.adapter(adapter_id)
    assert record.name == "expert-wrong_boolean" and record.provenance["expert"] == ["wrong_boolean"]
    assert record.rank == 8 and store.adapter_path(adapter_id).is_dir()
    bad = CliRunner().invoke(app, [*args[:5], "--policy", str(folder), "--anchor-loss", "l2", "--home", str(home)])
    assert bad.exit_code == 2 and "--anchor-loss l2" in bad.output


def test_a_drill_episode_is_shown_only_with_its_skill(trained):
    """Without its skill a drill's edit cannot be known, so no example may show it that way."""
    from skillgraft.skillworld.policy.data import conversations, corpus

    drill = run_episodes([generate("drill_min_max", 4)], backend="local")[0]
    assert drill.success
    record = episode_record(drill)
    convs = conversations([record], seed=0)
    assert len(convs) == 1 and "s/min(/max(/" in convs[0][1]["content"]
    assert len(conversations(trained[2][:1], seed=0)) == 2  # a seen family's: with and without
    assert any("`min(` where the tests need `max(`" in text for text in corpus([record]))


def test_with_a_skill_in_context_every_edit_thought_defers_to_the_skill(trained):
    """A seen family's edit comes with its own diagnosis when no skill is shown, and with the
    skill's when one is: a skill in view always means "make its edit", never "ignore it"."""
    from skillgraft.skillworld.expert import plan
    from skillgraft.skillworld.policy.data import conversations

    without, with_skill = conversations(trained[2][:1], seed=0)  # a wrong_operator episode, seed 1
    name = generate("wrong_operator", 1).planted.name

    def edit_thought(conv):
        (reply,) = [m["content"] for m in conv if m["role"] == "assistant" and "sed -i" in m["content"]]
        return reply.splitlines()[0]

    assert "<skill" not in without[1]["content"] and "<skill" in with_skill[1]["content"]
    assert edit_thought(without) == f"The function {name} subtracts where it must add; change - to +."
    assert edit_thought(with_skill) == f"The function {name} has the bug the skill describes; make the skill's edit."
    # the commands and what they print are the episode's own either way
    assert [m["content"] for m in without[2:] if m["role"] == "user"] == [m["content"] for m in with_skill[2:] if m["role"] == "user"]
    constant = generate("wrong_constant", 5)
    assert plan(constant, skill_in_context=True)[2][0].startswith(f"The constant {constant.planted.name} has the bug")


def test_the_context_loss_adds_to_the_assistant_loss_it_reports():
    import torch

    from skillgraft.hypernet.fit import _with_context_loss, collate
    from skillgraft.skillworld.policy.model import build_policy

    torch.manual_seed(0)
    model = build_policy(50, "micro", 64)
    examples = [([5, 6, 7, 8, 9, 10], [0, 0, 0, 1, 1, 0]), ([11, 12, 13, 14], [0, 1, 1, 1])]
    ids, labels, attn = collate(examples, pad=0)
    acted, total = _with_context_loss(model, ids, labels, attn, 0.5)
    plain = model(input_ids=ids, attention_mask=attn, labels=labels).loss
    assert torch.allclose(acted, plain, atol=1e-5)  # what is reported means what it meant before
    assert total > acted and torch.allclose(_with_context_loss(model, ids, labels, attn, 0.0)[1], acted)


def test_bf16_training_runs_in_bfloat16_only_where_the_device_has_it():
    import torch

    from skillgraft.hypernet.precision import native_bf16
    from skillgraft.hypernet.fit import Schedule, fit
    from skillgraft.skillworld.policy.model import build_policy

    examples = [([5, 6, 7, 8, 9, 10], [0, 0, 0, 1, 1, 0]), ([11, 12, 13, 14], [0, 1, 1, 1])]
    schedule = Schedule(steps=3, batch_size=2, lr=1e-2, warmup=1, weight_decay=0.0, seed=0)

    def losses(bf16: bool) -> list[float]:
        torch.manual_seed(0)
        return fit(build_policy(50, "micro", 64), examples, 0, schedule, show_progress=False, bf16=bf16)

    asked, plain = losses(True), losses(False)
    if native_bf16("cpu"):
        assert asked != plain  # autocast ran: bfloat16 rounding moves the losses
    else:
        assert asked == plain  # emulated bfloat16 would be tens of times slower: float32 ran


def test_the_tokenizer_is_trained_on_the_training_families_text_only(trained):
    """A skill-only family's words must split into pieces the policy has written in training."""
    from skillgraft.skillworld import library
    from skillgraft.skillworld.policy.data import corpus

    records = trained[2]  # wrong_operator, off_by_one (the policy's), wrong_boolean (held out from it)
    texts = set(corpus(records[:2]))
    assert {s.text for s in library.for_family("wrong_operator")} <= texts
    assert not {s.text for s in library.for_family("wrong_boolean")} & texts
    assert {s.text for s in library.for_family("wrong_boolean")} <= set(corpus(records))


def test_a_merge_ready_expert_replays_other_families_at_drawn_scales(trained, tmp_path, monkeypatch):
    from skillgraft.skillworld.policy import lora_expert

    folder, _, records = trained
    unseen = [r for r in records if r["family"] == "wrong_boolean"]
    replay = [r for r in records if r["family"] == "off_by_one"]
    drawn, saved = [], []
    real_fit, real_delta = lora_expert.fit, lora_expert.lora_delta

    def lora_scales(model):
        return {m.scaling["default"] for m in model.modules() if hasattr(m, "lora_A") and "default" in m.lora_A}

    def watching_fit(model, *args, before_step=None, **kw):
        def step(i):
            before_step(i)
            drawn.append(lora_scales(model))
        return real_fit(model, *args, before_step=step, **kw)

    def watching_delta(model):
        saved.append(lora_scales(model))
        return real_delta(model)

    monkeypatch.setattr(lora_expert, "fit", watching_fit)
    monkeypatch.setattr(lora_expert, "lora_delta", watching_delta)
    report = lora_expert.train_lora_expert(folder, unseen, tmp_path / "expert", rank=4, steps=12, replay=replay,
                                           min_scale=0.5, show_progress=False)
    assert report["families"] == ["wrong_boolean"] and report["replay"] == 1 and report["min_scale"] == 0.5
    assert len(drawn) == 12 and all(len(s) == 1 and 0.5 <= min(s) <= 1.0 for s in drawn)  # one scale for all modules
    assert len({min(s) for s in drawn}) > 1
    assert saved == [{1.0}]  # the adapter is saved at its full scale (lora_alpha = rank)
    with pytest.raises(ValueError, match="min_scale"):
        lora_expert.train_lora_expert(folder, unseen, tmp_path / "bad", rank=4, steps=1, min_scale=0.0,
                                      show_progress=False)


def test_an_anchored_expert_leaves_other_families_edit_replies_as_the_policy_has_them(trained, tmp_path):
    """Both anchors: on another family's edit reply, the expert trained with the KL anchor moves the
    policy's next-token distributions, and the one trained with the margin anchor the
    log-probabilities of the policy's top tokens, less than the same expert trained without one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from skillgraft.hypernet.peft_io import load_adapter
    from skillgraft.skillworld.edit_replay import applied, edit_replay, reply_log_probs
    from skillgraft.skillworld.expert import messages
    from skillgraft.skillworld.dataset import record_steps
    from skillgraft.hypernet.anchor import anchor_term
    from skillgraft.skillworld.policy.lora_expert import train_lora_expert

    folder, _, records = trained
    unseen, other = [records[2]], [records[0]]
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    replay = edit_replay(AutoTokenizer.from_pretrained(folder), messages(record_steps(other[0], False)))

    def moved(delta) -> dict[str, float]:
        with torch.no_grad():
            before = reply_log_probs(model, replay)
            with applied(model, delta):
                after = reply_log_probs(model, replay)
        return {kind: anchor_term(before, after, kind).item() for kind in ("kl", "margin")}

    far = {}
    for kind, weight in (("none", 0.0), ("kl", 5.0), ("margin", 5.0)):
        report = train_lora_expert(folder, unseen, tmp_path / kind, rank=4, steps=20, lr=3e-2,
                                   anchors=other if weight else (), anchor_weight=weight,
                                   anchor_loss="kl" if kind == "none" else kind, show_progress=False)
        assert report["anchors"] == (1 if weight else 0)
        far[kind] = moved(load_adapter(tmp_path / kind)[0])
    for kind in ("kl", "margin"):
        assert far["none"][kind] > 0 and far[kind][kind] < 0.5 * far["none"][kind], far
    with pytest.raises(ValueError, match="anchor loss must be one of kl, margin"):
        train_lora_expert(folder, unseen, tmp_path / "bad", rank=4, steps=1, anchors=other, anchor_loss="l2",
                          show_progress=False)


def test_a_lora_policy_on_a_chat_base_learns_the_replies_and_loads_as_an_adapter(trained, tmp_path):
    """The default model's recipe in small: behaviour cloning into a LoRA on every linear layer of
    a frozen base, rendered with the base's chat template, saved in the project's PEFT format."""
    from skillgraft.agent.models.factory import make_model
    from skillgraft.hypernet.peft_io import load_adapter
    from skillgraft.skillworld.policy.data import conversations
    from skillgraft.skillworld.policy.lora_policy import ALL_LINEAR, LoraPolicyConfig, encode, train_lora_policy

    folder, _, records = trained
    convs = conversations(records, seed=0, skill_share=0.5)[:2]
    config = LoraPolicyConfig(rank=8, steps=80, batch_size=2, lr=1e-2, warmup=2, bf16=False)
    report = train_lora_policy(folder, convs, tmp_path / "policy", config, base_name="micro", metadata={"recipe": "r1"},
                               show_progress=False)
    # the micro base is weak and the adapter small: it learns the two conversations slowly, but it learns
    assert report["final_loss"] < 0.9 * sum(report["losses"][:3]) / 3, report["losses"]
    assert report["tokens"] == sum(len(encode(make_model(f"hf:{folder}").tokenizer, c, config.max_tokens)[0]) for c in convs)
    delta, info = load_adapter(tmp_path / "policy", base=str(folder))
    assert {p.rsplit(".", 1)[-1] for p in delta} == set(ALL_LINEAR) and info.metadata["recipe"] == "r1"
    model = make_model(f"hf:{folder}", max_new_tokens=8)
    chat = convs[0][:2]
    before = model.query(chat).content
    model.load_adapter(tmp_path / "policy")
    assert model.query(chat).content != before
