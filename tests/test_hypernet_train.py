"""Training stages on a tiny real Llama built from a config, with a BPE tokenizer trained here."""
from __future__ import annotations

import json
import random

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from skillgraft.hypernet.checkpoint import read_meta
from skillgraft.hypernet.compile import Compiler
from skillgraft.hypernet.evaluate import collate, token_loss
from skillgraft.hypernet.hypernetwork import HypernetConfig
from skillgraft.hypernet.objectives import SECTION_PROMPT, read_trajectory, render_chat, stage1_example, stage2_example
from skillgraft.hypernet.train import TrainConfig, split_heldout, train_stage1, train_stage2

TOOLS = ["pytest", "ruff", "mypy", "git bisect", "pip", "make", "docker", "sed", "grep", "tox", "black", "coverage"]
ACTS = ["find the failing test", "fix the import order", "pin the dependency", "rerun only failures",
        "bisect the regression", "format the file"]
SMALL = HypernetConfig(hidden=128, embed_dim=32, rank=8)


def make_skills(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        tool, act, other = rng.choice(TOOLS), rng.choice(ACTS), rng.choice(TOOLS)
        out.append(
            f"# {tool} {act}\n\nUse {tool} to {act}. First run `{tool} --help` and read the output.\n\n"
            f"## Steps\n\n1. Run `{tool}` in the repo root.\n2. If it fails, {act} with {other}.\n3. Run `{tool}` again.\n\n"
            f"## Pitfalls\n\nDo not call {other} before {tool}. Keep the {tool} output short.\n"
        )
    return out


def make_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>")


def make_base(vocab: int, seed: int = 0) -> LlamaForCausalLM:
    # A wider init than the default 0.02 so that the frozen random base's logits have range
    # enough for an adapter to move them (a pretrained base has this by training).
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.15)
    return LlamaForCausalLM(config).eval()


@pytest.fixture
def one_thread():
    # Two cores shared with other test processes: one thread per process avoids oversubscription.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_stage1_training_lowers_heldout_reconstruction_loss_and_resumes(tmp_path, one_thread):
    skills = make_skills(40)
    tok = make_tokenizer(skills)
    model = make_base(len(tok))
    cfg = TrainConfig(steps=120, batch_size=8, lr=3e-3, max_len=160, heldout=0.2, save_every=50,
                      progress=False, hypernet=SMALL)
    result = train_stage1((model, tok), skills, tmp_path / "ckpt", cfg)
    ev = result.evaluation
    assert set(ev) == {"none", "context", "adapter", "both"} and result.heldout_size == 8
    # Held-out skills were never trained on: the compiled adapter must still cut their loss.
    assert ev["adapter"] < ev["none"] - 1.0, ev
    assert sum(result.train_loss[-10:]) / 10 < sum(result.train_loss[:10]) / 10 - 1.0
    meta = read_meta(tmp_path / "ckpt")
    assert meta.training["steps"] == 120 and meta.training["heldout_eval"]["adapter"] == pytest.approx(ev["adapter"])

    # The checkpoint compiles adapters that reproduce the evaluated loss on a held-out skill.
    compiler = Compiler.load(tmp_path / "ckpt", model)
    assert compiler.checkpoint_id == result.checkpoint_id

    # Resuming continues from step 120 with the saved optimizer state, not from scratch.
    more = train_stage1((model, tok), skills, tmp_path / "ckpt", TrainConfig(**{**cfg.__dict__, "steps": 125}))
    assert more.steps == 125 and len(more.train_loss) == 125 and more.train_loss[:120] == result.train_loss
    assert more.checkpoint_id != result.checkpoint_id


def test_stage1_objectives_score_only_targets():
    skills = make_skills(2)
    tok = make_tokenizer(skills)
    rng = random.Random(0)
    text = skills[0]
    full = stage1_example(0, text, "full", tok, 512, rng).tokens()
    assert full.target[0] is False and all(full.target[1:])
    assert tok.decode([i for i, t in zip(full.ids, full.target) if t], skip_special_tokens=True) == text
    section = stage1_example(0, text, "section", tok, 512, rng).tokens()
    scored = tok.decode([i for i, t in zip(section.ids, section.target) if t], skip_special_tokens=True)
    prompt = tok.decode([i for i, t in zip(section.ids, section.target) if not t], skip_special_tokens=True)
    assert scored.startswith("## ") and scored not in prompt and prompt.endswith(SECTION_PROMPT)
    prefix = stage1_example(0, text, "prefix", tok, 512, rng).tokens()
    assert 0 < sum(prefix.target) < len(prefix.ids) - 1
    ctx = stage1_example(0, text, "full", tok, 512, rng).tokens(with_context=True)
    assert len(ctx.ids) > len(full.ids) and sum(ctx.target) == sum(full.target)
    cut = stage1_example(0, text, "full", tok, 40, rng)
    assert len(cut.tokens().ids) == 40 and sum(cut.tokens(True).target) == sum(cut.tokens().target)


def _trajectory(skill_name: str, skill_text: str, tool: str) -> dict:
    return {
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": f'<skill name="{skill_name}">\n{skill_text}\n</skill>\n\nTask: make the tests pass.'},
            {"role": "assistant", "content": f"Run {tool} first.\n```bash\n{tool}\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nok</output>"},
            {"role": "assistant", "content": "Done.\n```bash\nsubmit\n```"},
        ],
        "info": {"skills": [{"name": skill_name, "text": skill_text}], "task_id": "t"},
    }


def test_trajectory_rendering_drops_skill_text_and_scores_assistant_only():
    skills = make_skills(1)
    tok = make_tokenizer(skills + ["Task: make the tests pass. Run submit Done. returncode output"])
    traj = read_trajectory(_trajectory("lint", skills[0], "ruff"))
    example = stage2_example([0], traj, tok, 4096)
    plain, ctx = example.tokens(False), example.tokens(True)
    assert "Use " not in tok.decode(plain.ids) and skills[0].split("\n")[2] in tok.decode(ctx.ids)
    scored = tok.decode([i for i, t in zip(plain.ids, plain.target) if t])
    assert "ruff" in scored and "submit" in scored and "Task" not in scored and "returncode" not in scored
    assert sum(plain.target) == sum(ctx.target)
    direct = render_chat(tok, traj.messages[:3], 4096)
    assert tok.decode([i for i, t in zip(direct.ids, direct.target) if t]).startswith("Run ruff")


def test_a_reply_marked_with_a_weight_weighs_that_much_in_the_loss():
    skills = make_skills(1)
    tok = make_tokenizer(skills + ["Task: make the tests pass. Run submit Done. returncode output"])
    data = _trajectory("lint", skills[0], "ruff")
    data["messages"][2]["weight"] = 4.0
    data["messages"][4]["train"] = False
    rendered = stage2_example([0], read_trajectory(data), tok, 4096).tokens(False)  # marks survive the skill's removal
    weights = {w for w, t in zip(rendered.weight, rendered.target) if t}
    assert weights == {4.0} and "submit" not in tok.decode([i for i, t in zip(rendered.ids, rendered.target) if t])
    model = make_base(len(tok))
    ids, attn, labels, w = collate([rendered], pad_id=0)
    weighted, total = token_loss(model, ids, attn, labels, w)
    plain, n = token_loss(model, ids, attn, labels)
    assert total == 4.0 * n and torch.allclose(weighted, 4.0 * plain)


def test_stage2_trains_from_trajectory_files_and_reports_four_conditions(tmp_path, one_thread):
    skills = make_skills(8, seed=3)
    tok = make_tokenizer(skills + ["Task: make the tests pass. Run first. Done. submit returncode output ok"])
    model = make_base(len(tok))
    files = []
    for i, text in enumerate(skills):
        path = tmp_path / f"traj{i}.json"
        path.write_text(json.dumps(_trajectory(f"s{i}", text, TOOLS[i % len(TOOLS)])))
        files.append(path)
    (tmp_path / "noskill.json").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "info": {}}))
    stage1 = train_stage1((model, tok), skills, tmp_path / "s1", TrainConfig(steps=4, batch_size=2, max_len=128, progress=False, hypernet=SMALL))
    cfg = TrainConfig(steps=6, batch_size=4, max_len=256, heldout=0.25, progress=False, init_from=str(tmp_path / "s1"))
    result = train_stage2((model, tok), files + [tmp_path / "noskill.json"], tmp_path / "s2", cfg)
    assert result.steps == 6 and result.heldout_size == 2
    assert set(result.evaluation) == {"none", "context", "adapter", "both"}
    assert all(v > 0 for v in result.evaluation.values()), result.evaluation
    assert read_meta(tmp_path / "s2").training["stage"] == 2 and stage1.checkpoint_id != result.checkpoint_id
    with pytest.raises(ValueError, match="info\\['skills'\\]"):
        train_stage2((model, tok), [tmp_path / "noskill.json"], tmp_path / "s3", cfg)


def test_heldout_split_is_stable_and_disjoint():
    keys = [f"k{i}" for i in range(20)]
    train, held = split_heldout(keys, 0.25, 7)
    assert len(held) == 5 and not set(train) & set(held) and split_heldout(keys, 0.25, 7) == (train, held)
    assert split_heldout(["only"], 0.5, 0) == ([0], [])
