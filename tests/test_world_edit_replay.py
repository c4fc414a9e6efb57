"""Edit replays: the policy's guesses at the expert's edit command, with an adapter applied, as
CycleQD's fast evaluator on SkillWorld."""
from __future__ import annotations

import copy

import pytest
import torch

from skillgraft.evolve.cycleqd.candidate import Candidate
from skillgraft.hypernet.lora import LowRank
from skillgraft.skillworld.dataset import episode_record, record_steps
from skillgraft.skillworld.edit_replay import (EditReplayEvaluator, applied, edit_command_guess, edit_command_right, edit_guess,
                                               edit_replay, edit_reply_guess)
from skillgraft.skillworld.episodes import run_episodes
from skillgraft.skillworld.expert import messages
from skillgraft.skillworld.generate import generate
from skillgraft.skillworld.policy.lora_policy import encode
from tiny_llama import build_tiny_llama


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    episodes = run_episodes([generate("wrong_operator", 1), generate("off_by_one", 2)], backend="local")
    conversations = [messages(record_steps(episode_record(e), False)) for e in episodes]
    corpus = [m["content"] for c in conversations for m in c] * 3
    folder = build_tiny_llama(tmp_path_factory.mktemp("tiny") / "base", corpus, vocab_size=400)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    # Taught both conversations by heart, so that it makes both edits itself: replays that can be right.
    # The conversations hold pytest's timings, so how many steps that takes varies a little: it is
    # taught until it makes both edits (120 steps at least, 480 at most).
    examples = [encode(tokenizer, c, 4096) for c in conversations]
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    torch.manual_seed(0)
    for step in range(480):
        if step >= 120 and step % 40 == 0:
            with torch.no_grad():
                if all(edit_command_right(model.eval(), tokenizer, c, None) for c in conversations):
                    break
            model.train()
        ids, mask = examples[step % 2]
        labels = torch.tensor([[i if m else -100 for i, m in zip(ids, mask)]])
        model(torch.tensor([ids]), labels=labels).loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    return model.eval(), tokenizer, conversations


def _delta(model, scale: float, seed: int) -> dict[str, LowRank]:
    g = torch.Generator().manual_seed(seed)
    delta = {}
    for path, module in model.named_modules():
        if path.endswith(("q_proj", "o_proj")):
            out, inp = module.weight.shape
            delta[path] = LowRank(B=torch.randn(out, 2, generator=g) * scale, A=torch.randn(2, inp, generator=g))
    return delta


def test_a_replay_is_cut_after_the_edit_and_scores_its_command(tiny):
    _, tokenizer, conversations = tiny
    for conversation in conversations:
        replay = edit_replay(tokenizer, conversation)
        ids, mask = encode(tokenizer, conversation, 4096)
        end = len(replay.ids)
        assert ids[:end] == replay.ids and mask[end - 1] and not mask[end]  # the edit reply, whole
        edit = [m["content"] for m in conversation if m["role"] == "assistant"][2]
        command = edit.split("```bash\n")[1].split("\n```")[0]
        assert command.startswith("sed -i ") and command in tokenizer.decode([ids[i] for i in replay.command])
        assert edit.split("```bash")[0].strip() not in tokenizer.decode([ids[i] for i in replay.command])
        assert tokenizer.decode(ids[replay.reply:end]).strip().startswith(edit.split("```bash")[0].strip())
        assert not mask[replay.reply - 1]  # the reply whole, and nothing of the turn before it
    with pytest.raises(ValueError, match="no edit reply"):
        edit_replay(tokenizer, conversations[0][:4])


def test_replayed_guesses_are_the_full_forward_pass_of_the_adapted_weights(tiny):
    model, tokenizer, conversations = tiny
    delta = _delta(model, 0.5, seed=3)
    replay = edit_replay(tokenizer, conversations[0])
    with applied(model, delta):
        adapted = edit_guess(model, replay)
    merged = copy.deepcopy(model)
    modules = dict(merged.named_modules())
    with torch.no_grad():
        for path, lr in delta.items():
            modules[path].weight += lr.B @ lr.A
        ids, _ = encode(tokenizer, conversations[0], 4096)  # the whole conversation, projected everywhere
        full = merged(torch.tensor([ids])).logits[0].argmax(-1).tolist()
    assert adapted == [full[i - 1] for i in replay.command]
    assert adapted != edit_guess(model, replay)  # the adapter was applied, and is gone after the block


def test_the_evaluator_scores_each_task_by_its_own_conversations(tiny):
    model, tokenizer, conversations = tiny
    sets = {"operator": conversations[:1], "both": conversations}
    evaluator = EditReplayEvaluator(sets, model, tokenizer)
    faint, loud = Candidate.of(_delta(model, 1e-6, seed=0)), Candidate.of(_delta(model, 3.0, seed=1))
    requests = [(faint, "both"), (loud, "operator"), (faint, "operator"), (loud, "both")]
    scores = evaluator.evaluate(requests)
    expected = [sum(edit_command_right(model, tokenizer, c, cand.delta) for c in sets[task]) / len(sets[task])
                for cand, task in requests]
    # The taught model makes both edits; a faint adapter leaves that be, a loud one breaks it.
    assert scores == expected == [1.0, 0.0, 1.0, 0.0] and evaluator.calls == 4
    with pytest.raises(ValueError, match="no conversations: none"):
        EditReplayEvaluator({"none": []}, model, tokenizer)


def test_a_guessed_command_shows_each_wrong_token_beside_the_experts(tiny):
    model, tokenizer, conversations = tiny
    replay = edit_replay(tokenizer, conversations[0])
    expert = tokenizer.decode([replay.ids[i] for i in replay.command]).strip()
    right, shown = edit_command_guess(model, tokenizer, conversations[0], None)
    assert right and shown == expert  # the taught model makes the edit: nothing to mark
    loud = _delta(model, 3.0, seed=1)
    right, shown = edit_command_guess(model, tokenizer, conversations[0], loud)
    with applied(model, loud):
        guess = edit_guess(model, replay)
    wrong = sum(g != replay.ids[i] for g, i in zip(guess, replay.command))
    assert not right and wrong > 0 and shown.count("|") - expert.count("|") == wrong
    assert right == edit_command_right(model, tokenizer, conversations[0], loud)


def test_a_reply_written_by_the_model_is_right_when_its_command_is_the_experts(tiny):
    model, tokenizer, conversations = tiny
    edit = [m["content"] for m in conversations[1] if m["role"] == "assistant"][2]
    right, reply = edit_reply_guess(model, tokenizer, conversations[1], None)
    assert right and reply == edit.strip()  # the taught model writes the expert's reply, thought and all
    loud = _delta(model, 3.0, seed=1)
    right, reply = edit_reply_guess(model, tokenizer, conversations[1], loud)
    assert not right and reply != edit.strip()
    # The reply's thought is the model's own: an expert thought that misleads the teacher-forced
    # command (another conversation's) does not reach the reply the model writes.
    swapped = [dict(m) for m in conversations[1]]
    other = [m["content"] for m in conversations[0] if m["role"] == "assistant"][2]
    edit_at = [i for i, m in enumerate(swapped) if m["role"] == "assistant"][2]
    swapped[edit_at]["content"] = other.split("```bash")[0] + "```bash" + edit.split("```bash")[1]
    assert not edit_command_right(model, tokenizer, swapped, None)
    assert edit_reply_guess(model, tokenizer, swapped, None) == (True, edit.strip())
