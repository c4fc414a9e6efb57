"""Training examples for both stages, as token ids with a mask of the tokens that carry loss.

Every example can be rendered with or without its skill text in the context, which is what
the four-way evaluation (no adapter / skill in context / compiled adapter / both) compares.

Stage 1 (skill reconstruction), three objectives:
  full     from an empty prompt, produce the whole skill
  prefix   given the first part of the skill, produce the rest
  section  given the skill with one Markdown section cut out, produce that section

Stage 2 (skill exploitation): a trajectory — OpenAI-format messages, stored as
{"messages": [...], "info": {"skills": [{"name": ..., "text": ...}], ...}} — with the skill
text removed from the context; loss on the assistant's tokens only.
"""
from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OBJECTIVES = ("full", "prefix", "section")
SECTION_PROMPT = "\n\nThe missing section:\n"
_SKILL_BLOCK = re.compile(r'<skill name="[^"]*">\n.*?\n</skill>\n*', re.DOTALL)
_HEADING = re.compile(r"^#{1,6} ", re.MULTILINE)


@dataclass
class Tokens:
    ids: list[int]
    target: list[bool]  # True where the token is predicted and scored
    weight: list[float] | None = None  # each scored token's weight in the loss (default 1)


@dataclass
class Example:
    """One training or evaluation example of skills `skill_ids` (indices into the skill list)."""

    skill_ids: list[int]
    kind: str
    render: Any  # (with_context: bool) -> Tokens

    def tokens(self, with_context: bool = False) -> Tokens:
        return self.render(with_context)


# ---------------------------------------------------------------- stage 1


def _start_ids(tokenizer) -> list[int]:
    """A first token to predict from: an empty prompt still needs one position."""
    tok = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    return [tok] if tok is not None else []


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"] if text else []


def _pair(tokenizer, prompt: str, target: str, context: str | None, max_len: int) -> Tokens:
    start = _start_ids(tokenizer)
    p = _encode(tokenizer, prompt)
    t = _encode(tokenizer, target)
    if tokenizer.eos_token_id is not None:
        t = t + [tokenizer.eos_token_id]
    # Keep the target whole where possible; cut the prompt from the left, the target from the right.
    t = t[: max(1, max_len - len(start))]
    room = max_len - len(t)
    head = start
    if context:
        # The context gets its own budget, so every condition scores the same target tokens.
        extra = _encode(tokenizer, context.strip() + "\n\n")
        head, room = start + extra, room + len(extra)
    prompt_ids = (head + p)[-room:] if room > 0 else []
    ids = prompt_ids + t
    return Tokens(ids, [False] * len(prompt_ids) + [True] * len(t))


def _cut_at_word(text: str, frac: float) -> int:
    pos = int(len(text) * frac)
    space = text.find(" ", pos)
    return space if 0 < space < len(text) - 1 else pos


def sections(text: str) -> list[tuple[int, int]]:
    """Character spans of the Markdown sections (a heading line up to the next heading)."""
    starts = [m.start() for m in _HEADING.finditer(text)]
    bounds = starts + [len(text)]
    return [(bounds[i], bounds[i + 1]) for i in range(len(starts))]


def stage1_example(skill_id: int, text: str, kind: str, tokenizer, max_len: int, rng: random.Random) -> Example:
    if kind == "section":
        spans = sections(text)
        if len(spans) < 2:
            kind = "prefix"  # nothing to cut out of a one-section skill
        else:
            start, end = spans[rng.randrange(1, len(spans))]
            rest = text[:start] + "[…]\n\n" + text[end:]
            prompt, target = rest.strip() + SECTION_PROMPT, text[start:end].strip()
    if kind == "prefix":
        cut = _cut_at_word(text, rng.uniform(0.2, 0.6))
        prompt, target = text[:cut], text[cut:]
    elif kind == "full":
        prompt, target = "", text
    elif kind != "section":
        raise ValueError(f"unknown objective {kind!r}; choose from {', '.join(OBJECTIVES)}")
    return Example([skill_id], kind, lambda ctx: _pair(tokenizer, prompt, target, text if ctx else None, max_len))


def sample_objective(ratios: Sequence[float], rng: random.Random) -> str:
    return rng.choices(OBJECTIVES, weights=list(ratios))[0]


# ---------------------------------------------------------------- stage 2


@dataclass
class Trajectory:
    messages: list[dict]
    skills: list[tuple[str, str]]  # (name, text)
    source: str


def read_trajectory(source: str | Path | dict) -> Trajectory:
    """A trajectory file (or its parsed dict). Skill texts come from info["skills"][i]["text"]."""
    data = source if isinstance(source, dict) else json.loads(Path(source).read_text())
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"{source if not isinstance(source, dict) else 'trajectory'} has no messages")
    info = data.get("info") or {}
    skills = []
    for s in info.get("skills") or []:
        text = s.get("text") or s.get("body")
        if text:
            skills.append((s.get("name", "skill"), text))
    return Trajectory(messages, skills, str(source) if not isinstance(source, dict) else "<dict>")


def skill_block(name: str, text: str) -> str:
    """The in-context form of a skill, the same shape the agent's task prompt uses."""
    return f'<skill name="{name}">\n{text.strip()}\n</skill>\n\n'


def _with_skills(messages: list[dict], skills: Sequence[tuple[str, str]], in_context: bool) -> list[dict]:
    out, placed = [], False
    for m in messages:
        content = m.get("content") or ""
        if m.get("role") == "user" and isinstance(content, str):
            content = _SKILL_BLOCK.sub("", content)
            if in_context and not placed:
                content = "".join(skill_block(n, t) for n, t in skills) + content
                placed = True
        out.append({**m, "content": content})  # "train" and "weight" marks are kept
    return out


def without_skills(messages: list[dict]) -> list[dict]:
    """The messages with every skill block taken out of the user's."""
    return _with_skills(messages, (), in_context=False)


def _plain_chat(messages: list[dict]) -> str:
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)


def render_chat(tokenizer, messages: list[dict], max_len: int) -> Tokens:
    """Token ids of a conversation, scoring only the assistant's tokens (but for a reply marked
    `"train": False`: a wrong step kept as context for the recovery that follows it).

    Uses the tokenizer's chat template when it has one (the form the model sees when it acts),
    else a plain `<|role|>` format. Assistant spans are found by rendering growing prefixes.
    """
    templated = getattr(tokenizer, "chat_template", None)

    def text_of(msgs: list[dict], generation_prompt: bool) -> str:
        if templated:
            return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=generation_prompt)
        return _plain_chat(msgs) + ("<|assistant|>\n" if generation_prompt else "")

    ids: list[int] = []
    target: list[bool] = []
    weight: list[float] = []
    done = ""
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            before = text_of(messages[:i], True)
            piece = before[len(done):]
            ids += _encode(tokenizer, piece)
            target += [False] * (len(ids) - len(target))
            weight += [1.0] * (len(ids) - len(weight))
            done = before
        upto = text_of(messages[: i + 1], False)
        piece = upto[len(done):]
        new = _encode(tokenizer, piece)
        ids += new
        target += [m["role"] == "assistant" and m.get("train", True)] * len(new)
        weight += [float(m.get("weight", 1.0))] * len(new)
        done = upto
    if len(ids) > max_len:
        # Long episodes keep their start (task and first actions), which carry the skill's use.
        ids, target, weight = ids[:max_len], target[:max_len], weight[:max_len]
    return Tokens(ids, target, weight)


def stage2_example(skill_ids: list[int], traj: Trajectory, tokenizer, max_len: int) -> Example:
    def render(ctx: bool) -> Tokens:
        if not ctx:
            return render_chat(tokenizer, _with_skills(traj.messages, traj.skills, False), max_len)
        # The skill blocks get their own budget, so every condition scores the same tokens.
        extra = len(_encode(tokenizer, "".join(skill_block(n, t) for n, t in traj.skills)))
        return render_chat(tokenizer, _with_skills(traj.messages, traj.skills, True), max_len + extra)

    return Example(skill_ids, "trajectory", render)
