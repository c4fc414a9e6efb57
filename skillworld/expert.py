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

import random
from collections.abc import Sequence
from dataclasses import dataclass

from skillgraft.agent.models.base import ModelReply
from skillgraft.agent.prompts import SUBMIT_COMMAND, assistant_reply, instance_prompt, observation, system_prompt
from skillgraft.skillworld.families.base import skill_why
from skillgraft.skillworld.generate import INSTRUCTION, WorldTask

# COLUMNS keeps pytest from cutting the failure message to 80 columns; tail keeps observations short.
RUN_TESTS = "COLUMNS=150 python3 -m pytest -q --tb=no -rf | tail -n 2"
RERUN_TESTS = "python3 -m pytest -q --tb=no | tail -n 1"


def find_command(wt: WorldTask, name: str | None = None) -> str:
    """Shows the named code with line numbers; for a function, the lines around it as well,
    because a misspelt or misused helper is defined just above. name: search for this name
    instead of the one the failing test gives (a mistake the expert recovers from)."""
    lookup = wt.planted.lookup if name is None else wt.planted.lookup.replace(wt.planted.name, name)
    if lookup.startswith("def "):
        return f'grep -rn -B 3 -A 5 "{lookup}" --exclude-dir=tests .'
    return f'grep -rn "{lookup}" --exclude-dir=tests .'


MISTAKES = ("grep-miss", "edit-miss", "wrong-fix")
# The turn a mistake replaces: it is shown to the policy in training but never trained on, so the
# policy learns the recovery that follows a wrong step, not the wrong step itself.
MISTAKE_TURN = {"grep-miss": 1, "edit-miss": 2, "wrong-fix": 2}


def plan(wt: WorldTask, skill_in_context: bool = False, mistake: str | None = None) -> list[tuple[str, str]]:
    """The expert's (thought, command) steps for one task. With the family's skill in context
    the edit's thought defers to the skill whatever the family: a skill in view then always
    means "make its edit", for the families the policy knows as much as for those it does not.

    mistake: one wrong step, then the recovery. "grep-miss" searches for a misspelt name (nothing
    is found, so the search is repeated with the test's name); "edit-miss" makes the edit with a
    misspelt old text (sed changes nothing, the tests still fail, so the edit is made again);
    "wrong-fix" makes another family's edit (`wrong_fix`; the tests still fail, so the bug is
    read again and the right edit made)."""
    p = wt.planted
    why = skill_why(p.name, "function" if p.lookup.startswith("def ") else "constant") if skill_in_context else p.why
    edit = (_sentence(why), f"sed -i '{p.sed_script()}' ./{wt.path}")
    find = (f"The failing test is test_{p.name}; find {p.name}.", find_command(wt))
    rerun = ("Run the tests again to check the fix.", RERUN_TESTS)
    steps = [("Run the tests to see what fails.", RUN_TESTS), find, edit, rerun, ("All tests pass; submit.", SUBMIT_COMMAND)]
    if mistake is None:
        return steps
    if mistake == "grep-miss":
        wrong = (find[0], find_command(wt, _misspelt(p.name, wt)))
        again = (f"Nothing matched; search for {p.name} exactly as the test names it.", find[1])
        return [steps[0], wrong, again, *steps[2:]]
    if mistake == "edit-miss":
        old = misspelt_old(wt)
        if old is None:
            raise ValueError(f"{wt.id}: no edit-miss for this task (see misspelt_old)")
        wrong = (edit[0], edit[1].replace(f"s/{p.old}/", f"s/{old}/", 1))
        return _edit_again(steps, wrong, f"The tests still fail: that edit matched nothing. {edit[0]}")
    if mistake == "wrong-fix":
        misread = wrong_fix(wt)
        if misread is None:
            raise ValueError(f"{wt.id}: no wrong-fix for this task (see wrong_fix)")
        thought, script = misread
        wrong = (_sentence(thought), f"sed -i '{script}' ./{wt.path}")
        return _edit_again(steps, wrong, f"The tests still fail: that was not the bug. {edit[0]}")
    raise ValueError(f"unknown mistake {mistake!r}; choose one of {', '.join(MISTAKES)}")


def _edit_again(steps: list[tuple[str, str]], wrong: tuple[str, str], thought: str) -> list[tuple[str, str]]:
    """steps with a wrong edit in place of the edit, a test run that shows it fixed nothing,
    then the right edit (with this thought) and the rest."""
    run_tests, find, edit, rerun, submit = steps
    return [run_tests, find, wrong, ("Run the tests again.", RERUN_TESTS), (thought, edit[1]), rerun, submit]


def can_make(wt: WorldTask, mistake: str) -> bool:
    """Whether `plan(wt, mistake=mistake)` has that wrong step to make on this task."""
    if mistake == "edit-miss":
        return misspelt_old(wt) is not None
    if mistake == "wrong-fix":
        return wrong_fix(wt) is not None
    return True


def _misspelt(text: str, wt: WorldTask, avoid: str = "") -> str:
    """text with one letter dropped, chosen by the task's seed, such that it occurs nowhere in the repository."""
    rng = random.Random(f"misspelt:{wt.id}:{text}")
    spots = [i for i, ch in enumerate(text) if ch.isalnum()]
    rng.shuffle(spots)
    corpus = avoid or "\n".join(wt.files.values())
    for i in spots:
        typo = text[:i] + text[i + 1:]
        if typo.strip() and typo not in corpus:
            return typo
    return ""


def misspelt_old(wt: WorldTask) -> str | None:
    """The edit's old text with one letter dropped so that sed matches nothing, or None when the
    fix inserts a line or its old text has no letter whose loss leaves a pattern absent from the file."""
    p = wt.planted
    if p.insert_import:
        return None
    bare = p.old.rstrip("$")
    typo = _misspelt(bare, wt, avoid=wt.files[wt.path])
    return typo + p.old[len(bare):] if typo else None


def wrong_fix(wt: WorldTask) -> tuple[str, str] | None:
    """A plausible misreading of a function's bug as another family's, as (thought, sed script),
    whose sed changes nothing: a subtraction read as swapped arguments of another function of
    the file, or any other function's bug read as a subtraction. None where no such misreading
    leaves the file unchanged."""
    p = wt.planted
    if not p.lookup.startswith("def "):
        return None
    address = f"/{p.lookup}/,/^$/"
    if p.family == "wrong_operator":
        others = [line[4:line.index("(")] for line in wt.files[wt.path].splitlines()
                  if line.startswith("def ") and not line.startswith(p.lookup)]
        if not others:
            return None
        h = random.Random(f"wrong-fix:{wt.id}").choice(others)
        a, b = p.buggy[0][p.buggy[0].index("(") + 1:p.buggy[0].index(")")].split(", ")
        return (f"the function {p.name} passes the arguments of {h} in the wrong order; swap them.",
                f"{address}s/{h}({b}, {a})/{h}({a}, {b})/")
    block = next(i for i, line in enumerate(p.buggy) if line.startswith(p.lookup))
    if any(" - " in line for line in p.buggy[block:]):
        return None
    return f"the function {p.name} subtracts where it must add; change - to +.", f"{address}s/ - / + /"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


@dataclass
class Step:
    thought: str
    command: str
    output: str = ""
    returncode: int = 0


def messages(steps: Sequence[Step], skills: Sequence[tuple[str, str]] = (), mistake: str | None = None) -> list[dict]:
    """The chat exactly as the agent loop shows it to a model: system, task (with any skills in
    context), then each reply and the observation of its command; the submit ends it.
    mistake: the episode's wrong step (expert.plan), whose reply is marked `"train": False`."""
    out = [{"role": "system", "content": system_prompt()},
           {"role": "user", "content": instance_prompt(INSTRUCTION, skills)}]
    wrong = MISTAKE_TURN[mistake] if mistake else None
    for turn, step in enumerate(steps):
        reply = {"role": "assistant", "content": assistant_reply(step.thought, step.command)}
        if turn == wrong:
            reply["train"] = False
        out.append(reply)
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
