"""Behaviour-cloning examples from expert episodes: each episode once without a skill and once
with one of its family's paraphrases in context, as token ids with an assistant-only loss mask.
With the skill in context the expert's edit thought defers to it for every family (see
`expert.plan`), so that the policy learns to read a skill whenever one is there, not only for
the families it cannot fix without one.
A drill's episode comes only with its skill: without it the edit cannot be known, and an example
that shows it anyway would teach the policy to guess."""
from __future__ import annotations

import random
from collections.abc import Iterable

from skillgraft.skillworld import library
from skillgraft.skillworld.dataset import record_steps
from skillgraft.skillworld.expert import messages
from skillgraft.skillworld.families.drills import BY_FAMILY


def conversations(records: Iterable[dict], seed: int = 0, with_skill: bool = True,
                  without_skill: bool = True, skill_share: float = 1.0) -> list[list[dict]]:
    """Each record without a skill, and with one of its family's skills for a share
    `skill_share` of the records (chosen by the seed); a drill's only with its skill."""
    rng = random.Random(seed)
    out = []
    for record in records:
        mistake = record.get("mistake")
        drill = record["family"] in BY_FAMILY
        if without_skill and not drill:
            out.append(messages(record_steps(record), mistake=mistake))
        shown = rng.random() < skill_share  # drawn for every record, so the choice is stable
        if with_skill and (drill or shown):
            skill = library.pick(record["family"], rng, record["seed"])
            out.append(messages(record_steps(record, skill_in_context=True), [(skill.name, skill.body)], mistake))
    return out


def corpus(records: Iterable[dict]) -> list[str]:
    """Text to train the tokenizer on: every message of the episodes and the skills of their
    families. Other families' text (the skill-only ones) is held out like their episodes: a token
    that only it would make is never trained, and the policy could not write it when it copies
    an edit out of such a skill; held out, those words split into pieces the policy has written."""
    records = list(records)
    families = {record["family"] for record in records}
    texts = [m["content"] for record in records for m in messages(record_steps(record))]
    texts += [s.text for s in library.every_skill() if s.family in families]
    return texts
