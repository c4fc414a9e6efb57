"""The summariser that needs no model: a recipe induced from the commands of a successful run.

For worlds without a hosted model. The recipe is the run's own command sequence with the
instance's particulars replaced by placeholders (see abstract.py) and a note for each
placeholder saying where the real value turns up. When the skill already has text, only the
induced section is replaced, so a hand-written procedure is kept and two runs that abstract to
the same recipe give the same text (which the store then keeps as one version).
"""
from __future__ import annotations

import re
from typing import Any

from skillgraft.evolve.learn.abstract import abstract_steps
from skillgraft.evolve.learn.detours import recipe_steps
from skillgraft.evolve.learn.episode import Episode
from skillgraft.evolve.learn.summarise import SummaryError, check_skill_text
from skillgraft.skills.skillmd import DESCRIPTION_MAX, parse, render

SECTION = "## Recipe induced from a successful run"
SECTION_RE = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.DOTALL | re.MULTILINE)
MAX_STEPS = 12


class OfflineSummariser:
    name = "offline"

    def __init__(self, test_command: str | None = None, style: str = "upper"):
        # The task's own test command is how a fix is checked; recipes name it when it is known.
        self.test_command = test_command
        self.style = style  # how placeholders are written: "upper" (FILE) or "angle" (<file>)

    def summarise(self, episode: Episode, skill_name: str, previous: str | None = None) -> str:
        if not episode.success:
            raise SummaryError(f"{episode.task_id}: only successful runs are summarised")
        section = self.recipe_section(episode, told=previous or "")
        if previous:
            doc = parse(previous, folder_name=skill_name)
            body = doc.body.rstrip("\n") + "\n"
            body = SECTION_RE.sub(lambda _m: section, body) if SECTION_RE.search(body) else body + "\n" + section
            text = render(doc.frontmatter, body)
        else:
            if episode.family:
                subject = episode.family.replace("_", " ").replace("-", " ")
                title = f"Fixing {subject} bugs"
                what = f"Fix {subject} bugs in a repository whose test suite fails"
            else:
                title = f"Tasks like {episode.task_id}"
                what = f"Solve tasks like this one: {' '.join(episode.instruction.split())[:300]}"
            description = f"{what}: the command sequence that solved one, its particulars as placeholders."[:DESCRIPTION_MAX]
            body = (
                f"# {title}\n\n"
                "Follow the steps in order. Placeholders in capitals stand for the names and values of "
                "the task at hand: read the real ones from the outputs, as noted at the end.\n\n" + section
            )
            front: dict[str, Any] = {"name": skill_name, "description": description}
            if episode.family:  # lets later successes of the family find their way back here
                front["metadata"] = {"family": episode.family, "origin": "induced"}
            text = render(front, body)
        return check_skill_text(text, skill_name)

    def recipe_section(self, episode: Episode, told: str = "") -> str:
        """The numbered steps of a successful run, its particulars as placeholders; `told` is the
        skill text the recipe extends, whose words stay as they are."""
        steps = recipe_steps(episode)
        if not steps:
            raise SummaryError(f"{episode.task_id}: the run has no commands to learn from")
        pairs, abstraction = abstract_steps(episode, steps, self.style, told)
        kept: list[tuple[str, str]] = []
        for thought, command in pairs:
            if kept and kept[-1][1] == command:  # a repeated command adds nothing to the recipe
                continue
            kept.append((thought, command))
        if len(kept) > MAX_STEPS:  # keep how it starts and how it ends: look, then fix and check
            kept = kept[: MAX_STEPS // 2] + kept[-(MAX_STEPS - MAX_STEPS // 2) :]
        lines = [SECTION, ""]
        for i, (thought, command) in enumerate(kept, 1):
            lines.append(step_line(i, thought, command))
        last = kept[-1][1]
        if (self.test_command and self.test_command in last) or "pytest" in last:
            lines.append(f"{len(kept) + 1}. When that passes (exit status 0), run `submit`.")
        else:
            check = f"`{self.test_command}`" if self.test_command else "the test command"
            lines.append(f"{len(kept) + 1}. Run {check}: exit status 0 means fixed. Then run `submit`.")
        written = "\n".join(t + "\n" + c for t, c in kept)
        used = [ph for ph in abstraction.first_seen if re.search(rf"(?<!\w){re.escape(ph)}(?!\w)", written)]
        if used:
            lines += ["", "Placeholders: " + "; ".join(f"{ph} from {abstraction.first_seen[ph]}" for ph in used) + "."]
        return "\n".join(lines) + "\n"


def step_line(number: int, thought: str, command: str) -> str:
    """One numbered step: the reason, then the command inline, or fenced when inline would break it."""
    thought = (thought or "Run").rstrip(".:;") or "Run"
    if "`" in command or "\n" in command:
        fence = "````" if "```" in command else "```"
        body = "\n".join(f"   {c}" for c in command.splitlines())
        return f"{number}. {thought}:\n   {fence}bash\n{body}\n   {fence}"
    return f"{number}. {thought}: `{command}`"
