"""The scripted expert: five regular steps that solve any SkillWorld task.

Run the tests and read the failing test's name and message; show the code it names with
line numbers; make one sed edit, addressed by that code's block; run the tests again; submit.
The expert knows the planted bug (it is the generator's other half), but every command it
issues only uses what the observations before it show, so a policy can learn to issue the
same commands.

Trajectories are built with agent.prompts' own functions, and ExpertModel answers through
the agent's Model protocol so that `run_task` can check it in the real sandbox.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.models.base import ModelReply
from agent.prompts import SUBMIT_COMMAND, assistant_reply, instance_prompt, observation, system_prompt
from skillworld.families.base import skill_why
from skillworld.generate import INSTRUCTION, WorldTask

# COLUMNS keeps pytest from cutting the failure message to 80 columns; tail keeps observations short.
RUN_TESTS = "COLUMNS=150 python3 -m pytest -q --tb=no -rf | tail -n 2"
RERUN_TESTS = "python3 -m pytest -q --tb=no | tail -n 1"


def find_command(wt: WorldTask) -> str:
    """Shows the named code with line numbers; for a function, the lines around it as well,
    because a misspelt or misused helper is defined just above."""
    if wt.planted.lookup.startswith("def "):
        return f'grep -rn -B 3 -A 5 "{wt.planted.lookup}" --exclude-dir=tests .'
    return f'grep -rn "{wt.planted.lookup}" --exclude-dir=tests .'


def plan(wt: WorldTask, skill_in_context: bool = False) -> list[tuple[str, str]]:
    """The expert's (thought, command) steps for one task. With the family's skill in context
    the edit's thought defers to the skill whatever the family: a skill in view then always
    means "make its edit", for the families the policy knows as much as for those it does not."""
    p = wt.planted
    why = skill_why(p.name, "function" if p.lookup.startswith("def ") else "constant") if skill_in_context else p.why
    return [
        ("Run the tests to see what fails.", RUN_TESTS),
        (f"The failing test is test_{p.name}; find {p.name}.", find_command(wt)),
        (_sentence(why), f"sed -i '{p.sed_script()}' ./{wt.path}"),
        ("Run the tests again to check the fix.", RERUN_TESTS),
        ("All tests pass; submit.", SUBMIT_COMMAND),
    ]


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


@dataclass
class Step:
    thought: str
    command: str
    output: str = ""
    returncode: int = 0


def messages(steps: Sequence[Step], skills: Sequence[tuple[str, str]] = ()) -> list[dict]:
    """The chat exactly as the agent loop shows it to a model: system, task (with any skills in
    context), then each reply and the observation of its command; the submit ends it."""
    out = [{"role": "system", "content": system_prompt()},
           {"role": "user", "content": instance_prompt(INSTRUCTION, skills)}]
    for step in steps:
        out.append({"role": "assistant", "content": assistant_reply(step.thought, step.command)})
        if step.command != SUBMIT_COMMAND:
            out.append({"role": "user", "content": observation(step.output, step.returncode)})
    return out


class ExpertModel:
    """The expert behind the agent's Model protocol: replies in order, one per call."""

    def __init__(self, wt: WorldTask):
        self.name = "skillworld-expert"
        self._plan = plan(wt)

    def query(self, messages: list[dict]) -> ModelReply:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        thought, command = self._plan[min(turn, len(self._plan) - 1)]
        return ModelReply(content=assistant_reply(thought, command))
