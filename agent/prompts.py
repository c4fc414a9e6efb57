"""The text the model sees: system prompt, task prompt, observations, and action parsing.

Kept short on purpose: the default model's policy is trained on these same strings, and every
token of boilerplate costs a small model context.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

SUBMIT_COMMAND = "submit"

SYSTEM_PROMPT = (
    "You are a coding agent working in a git repository at /repo. "
    "Reply with a short thought, then exactly one command in a ```bash block. "
    f"The command's output comes back to you. When the task is done, run `{SUBMIT_COMMAND}`."
)

FORMAT_ERROR = "Format error: reply with exactly one ```bash block holding one command."

_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n?```", re.DOTALL)


class FormatError(ValueError):
    """The reply did not hold exactly one bash block."""


def system_prompt() -> str:
    return SYSTEM_PROMPT


def instance_prompt(instruction: str, skills: Sequence[tuple[str, str]] = ()) -> str:
    """The first user message: the skills given in context (name, body), then the task."""
    parts = []
    for name, body in skills:
        parts.append(f'<skill name="{name}">\n{body.strip()}\n</skill>')
    parts.append(f"Task: {instruction.strip()}")
    return "\n\n".join(parts)


def observation(output: str, returncode: int, timed_out: bool = False, elided: int = 0) -> str:
    """How a command's result is shown to the model."""
    head = f"<returncode>{returncode}</returncode>"
    if timed_out:
        head += "\n<note>the command timed out and was killed</note>"
    if elided:
        head += f"\n<note>{elided} characters of output elided from the middle</note>"
    return f"{head}\n<output>\n{output}</output>"


def _single_block(content: str) -> re.Match[str] | None:
    blocks = list(_BASH_BLOCK.finditer(content))
    return blocks[0] if len(blocks) == 1 and blocks[0].group(1).strip() else None


def parse_action(content: str) -> str:
    """The single bash command in a reply; FormatError if there is not exactly one."""
    block = _single_block(content)
    if block is None:
        raise FormatError(FORMAT_ERROR)
    return block.group(1).strip()


def is_submit(command: str) -> bool:
    return command.strip() == SUBMIT_COMMAND


def assistant_reply(thought: str, command: str) -> str:
    """How an action is written by a scripted expert, in the same shape the model must use."""
    return f"{thought.strip()}\n```bash\n{command}\n```"


def split_reply(content: str) -> tuple[str, str | None]:
    """A reply as (thought, command): the text before its bash block, and the block's command
    (None when the reply did not hold exactly one)."""
    block = _single_block(content)
    if block is None:
        return content.strip(), None
    return content[: block.start()].strip(), block.group(1).strip()


_OBSERVATION = re.compile(r"\A<returncode>(-?\d+)</returncode>\n((?:<note>.*?</note>\n)*)<output>\n(.*)</output>\Z", re.DOTALL)
_NOTE = re.compile(r"<note>(.*?)</note>")


def read_observation(text: str) -> tuple[int, list[str], str] | None:
    """The (return code, notes, output) an `observation` message was written from; None for any
    other message (the task prompt, a format error)."""
    match = _OBSERVATION.match(text)
    if match is None:
        return None
    return int(match.group(1)), _NOTE.findall(match.group(2)), match.group(3)
