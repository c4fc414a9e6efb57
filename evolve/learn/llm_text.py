"""Asking a chat model for a SKILL.md and not taking no for an answer: extract, validate, retry.

Shared by the summariser and the refinement generator. A reply that breaks the store's rules
is sent back to the model with the rules it broke, as a further turn of the same conversation,
so the second attempt knows what was wrong with the first.
"""
from __future__ import annotations

import re

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt

from skillgraft.agent.models.base import Model
from skillgraft.evolve.learn.summarise import SummaryError, check_skill_text
from skillgraft.skills.errors import SkillFormatError

_FENCE = re.compile(r"^(`{3,})[ \t]*([\w-]*)[ \t]*\n(.*?)^\1[ \t]*$", re.DOTALL | re.MULTILINE)

RULES = (
    "Write the complete SKILL.md file: YAML frontmatter between '---' lines with `name: {name}` "
    "(exactly that) and a `description` of one to 1024 characters saying what the skill does and "
    "when to use it; no other frontmatter keys than name, description, license, compatibility, "
    "metadata, allowed-tools. Then a Markdown body with the procedure as numbered steps, giving "
    "exact commands in ```bash blocks and placeholders like <file> for what differs between tasks. "
    "Reply with the file inside one ```markdown block and nothing else."
)


def extract_skill_md(reply: str) -> str:
    """The SKILL.md in a reply: the last markdown-ish fenced block holding frontmatter, else the reply."""
    blocks = [(lang, body) for _f, lang, body in _FENCE.findall(reply)]
    for lang, body in reversed(blocks):
        if body.lstrip().startswith("---") and lang.lower() in ("", "markdown", "md", "skill", "yaml"):
            return body.strip() + "\n"
    return reply.strip() + "\n"


def ask_for_skill(model: Model, messages: list[dict], skill_name: str, attempts: int = 3) -> str:
    """Queries until the reply is a valid SKILL.md named `skill_name`; SummaryError after `attempts`."""
    conversation = list(messages)

    def attempt() -> str:
        reply = model.query(conversation).content
        text = extract_skill_md(reply)
        try:
            return check_skill_text(text, skill_name)
        except SkillFormatError as exc:
            conversation.append({"role": "assistant", "content": reply})
            conversation.append(
                {
                    "role": "user",
                    "content": "That file was refused:\n"
                    + "\n".join(f"- {p.field}: {p.rule}" for p in exc.problems)
                    + "\nSend the corrected complete file. "
                    + RULES.format(name=skill_name),
                }
            )
            raise

    try:
        for step in Retrying(stop=stop_after_attempt(attempts), retry=retry_if_exception_type(SkillFormatError)):
            with step:
                text = attempt()
        return text
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        raise SummaryError(f"{model.name}: no valid SKILL.md for {skill_name!r} after {attempts} attempts: {cause}") from cause
