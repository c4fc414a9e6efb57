"""Behaviour-cloning examples from expert episodes: each episode once without a skill and once
with one of its family's paraphrases in context, as token ids with an assistant-only loss mask."""
from __future__ import annotations

import random
from collections.abc import Iterable

from skillworld import library
from skillworld.dataset import record_steps
from skillworld.expert import messages


def conversations(records: Iterable[dict], seed: int = 0, with_skill: bool = True,
                  without_skill: bool = True) -> list[list[dict]]:
    rng = random.Random(seed)
    out = []
    for record in records:
        steps = record_steps(record)
        if without_skill:
            out.append(messages(steps))
        if with_skill:
            skill = library.pick(record["family"], rng)
            out.append(messages(steps, [(skill.name, skill.body)]))
    return out


def corpus(records: Iterable[dict]) -> list[str]:
    """Text to train the tokenizer on: every message of the episodes and every skill."""
    texts = [m["content"] for conv in conversations(records, with_skill=False) for m in conv]
    texts += [s.text for s in library.skills()]
    return texts
