"""Generators for refinement: given a skill's text and runs made with it, propose a revision.

Two beside each other behind one protocol. The LLM one reads the runs and their feedback and
rewrites the skill (reflective mutation: the model is shown what happened, not a score). The
offline one edits the text with material from successful runs: it splices in a recipe induced
from one, inserts one step it is missing, or drops a step.
"""
from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from skillgraft.agent.models.base import Model
from skillgraft.evolve.learn.abstract import abstract_steps
from skillgraft.evolve.learn.detours import recipe_steps
from skillgraft.evolve.learn.episode import Episode
from skillgraft.evolve.learn.llm_text import RULES, ask_for_skill
from skillgraft.evolve.learn.summarise import check_skill_text
from skillgraft.evolve.learn.summarise_offline import SECTION, SECTION_RE, OfflineSummariser, step_line
from skillgraft.skills.skillmd import parse, render


@runtime_checkable
class Generator(Protocol):
    name: str

    def propose(self, skill_name: str, text: str, episodes: Sequence[Episode], rng: random.Random) -> str | None:
        """A revised SKILL.md, or None when there is nothing to propose from these runs."""
        ...


REFLECT = (
    "An agent was given the skill below while solving coding tasks. After it come some of its runs: "
    "what it did, what the tools answered, and whether the task's tests passed in the end. Work out "
    "why the failed runs failed and what the successful ones did right, including any facts about the "
    "tasks the agent had to discover by trial. Then write a better version of the skill so that the "
    "agent succeeds on tasks like these, failed ones included. Keep what works; be concrete."
)


class LLMGenerator:
    def __init__(self, model: Model, attempts: int = 3, max_runs: int = 4):
        self.model = model
        self.attempts = attempts
        self.max_runs = max_runs
        self.name = f"llm:{model.name}"

    def propose(self, skill_name: str, text: str, episodes: Sequence[Episode], rng: random.Random) -> str | None:
        if not episodes:
            return None
        # Failures first: they are what the revision must fix; one success shows what worked.
        ordered = [e for e in episodes if not e.success] + [e for e in episodes if e.success]
        runs = "\n\n".join(f"### Run {i} ({'passed' if e.success else 'FAILED'})\n{e.transcript(3000)}"
                           for i, e in enumerate(ordered[: self.max_runs], 1))
        prompt = f"{REFLECT}\n\n## Current skill\n\n{text.strip()}\n\n## Runs\n\n{runs}\n\n{RULES.format(name=skill_name)}"
        return ask_for_skill(self.model, [{"role": "user", "content": prompt}], skill_name, self.attempts)


_STEP = re.compile(r"^(\d+)\. ", re.MULTILINE)


def _split_section(body: str) -> tuple[str, list[str], str]:
    """(text before the induced section, its numbered step blocks, text after the steps)."""
    start = body.find(SECTION)
    if start < 0:
        return body, [], ""
    head, rest = body[:start], body[start + len(SECTION):]
    marks = list(_STEP.finditer(rest))
    if not marks:
        return body, [], ""
    end = rest.find("\n\n", marks[-1].start())
    end = len(rest) if end < 0 else end
    blocks = [rest[m.start(): (marks[i + 1].start() if i + 1 < len(marks) else end)].rstrip("\n")
              for i, m in enumerate(marks)]
    return head + SECTION + "\n\n", blocks, rest[end:]


def _join(head: str, blocks: list[str], tail: str) -> str:
    renumbered = [_STEP.sub(f"{i}. ", b, count=1) for i, b in enumerate(blocks, 1)]
    return head + "\n".join(renumbered) + ("\n" + tail.lstrip("\n") if tail.strip() else "\n")


def _block(thought: str, command: str) -> str:
    return step_line(0, thought, command)


class OfflineGenerator:
    """Edits drawn from the steps of successful runs; no model needed."""

    name = "offline"

    def __init__(self, summariser: OfflineSummariser | None = None):
        self.summariser = summariser or OfflineSummariser()

    def propose(self, skill_name: str, text: str, episodes: Sequence[Episode], rng: random.Random) -> str | None:
        wins = [e for e in episodes if e.success and recipe_steps(e)]
        doc = parse(text, folder_name=skill_name)
        head, blocks, tail = _split_section(doc.body)
        edits = []
        if wins:
            edits += ["splice", "insert"]
        if len(blocks) > 2:
            edits.append("drop")
        if not edits:
            return None
        edit = rng.choice(edits)
        if edit == "splice":
            section = self.summariser.recipe_section(rng.choice(wins), told=text)
            if SECTION_RE.search(doc.body):
                body = SECTION_RE.sub(lambda _m: section, doc.body)
            else:
                body = doc.body.rstrip("\n") + "\n\n" + section
        elif edit == "insert":
            win = rng.choice(wins)
            pairs, _ = abstract_steps(win, recipe_steps(win), told=text)
            fresh = [p for p in pairs if not any(p[1] in b for b in blocks)]
            if not fresh:
                return None
            new = _block(*rng.choice(fresh))
            if not blocks:
                body = doc.body.rstrip("\n") + f"\n\n{SECTION}\n\n" + _STEP.sub("1. ", new, count=1) + "\n"
            else:
                at = rng.randrange(len(blocks))  # never after the final check-and-submit step
                body = _join(head, blocks[:at] + [new] + blocks[at:], tail)
        else:
            at = rng.randrange(len(blocks) - 1)
            body = _join(head, blocks[:at] + blocks[at + 1:], tail)
        revised = render(doc.frontmatter, body)
        return check_skill_text(revised, skill_name) if revised != text else None
