"""The summariser that asks a chat model (any litellm model string) to write the skill."""
from __future__ import annotations

from skillgraft.agent.models.base import Model
from skillgraft.evolve.learn.episode import Episode
from skillgraft.evolve.learn.llm_text import RULES, ask_for_skill
from skillgraft.evolve.learn.summarise import SummaryError

SYSTEM = (
    "You turn a coding agent's successful run into a reusable skill: a short recipe that would let "
    "a weaker agent solve any task of the same kind, not only this one. Keep what generalises (the "
    "order of steps, the commands, what to look for in their output); replace names and values "
    "that belong to this one task with placeholders."
)


class LLMSummariser:
    def __init__(self, model: Model, attempts: int = 3):
        self.model = model
        self.attempts = attempts
        self.name = f"llm:{model.name}"

    def summarise(self, episode: Episode, skill_name: str, previous: str | None = None) -> str:
        if not episode.success:
            raise SummaryError(f"{episode.task_id}: only successful runs are summarised")
        parts = [f"Skill name: {skill_name}"]
        if episode.family:
            parts.append(f"Task family: {episode.family}")
        if previous:
            parts.append(
                "The skill's current text is below. Write its next version: keep what the run "
                f"confirms, fix what it contradicts, add what it teaches.\n\n{previous.strip()}"
            )
        parts.append(f"The successful run:\n\n{episode.transcript()}")
        parts.append(RULES.format(name=skill_name))
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
        return ask_for_skill(self.model, messages, skill_name, self.attempts)
