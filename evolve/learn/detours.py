"""The steps of a successful run that a recipe keeps: the way to the fix without the detours.

A run found by sampling wanders: a search whose pattern grep rejects, an edit whose script sed
rejects, a look at a file that is not there, the same test run twice with nothing done between.
A recipe that keeps those steps teaches them too. A step is a detour when

- it failed (non-zero exit status), it is one simple command (no `&&`, `;`, pipe or newline, so
  the status is that command's own and a failing edit changed nothing), and nothing first shown
  in its output turns up in a later command: it taught the run nothing it used. A failing test
  run whose output gave the expected value the edit then writes is kept;
- or it repeats an earlier command word for word and printed the same: nothing had changed;
- or it taught nothing used later and the run ran the very same command again later: the later
  run does its work (a test run between an edit that changed nothing and the real one);
- or it taught nothing used later, changed no file and a later step did (where the run knew: going
  back names the files' state before every command): an edit whose pattern matched nothing, on
  the way to the edit that did;
- or it is a sed substitution whose pattern and replacement are the same text (`s/"x"/"x"/`).

The submit and commands the shell could not run at all are left out as well (`useful_steps`). The
step after a detour keeps its command but not its reason, which speaks of the detour.
"""
from __future__ import annotations

import re
from dataclasses import replace

from skillgraft.evolve.learn.abstract import SED_SUBSTITUTION, values_in
from skillgraft.evolve.learn.episode import Episode, Step, useful_steps

_COMPOUND = re.compile(r"&&|\|\||[;|\n]|`|\$\(")


def recipe_steps(episode: Episode) -> list[Step]:
    """The run's useful steps less its detours, in order."""
    steps = useful_steps(episode)
    shown = values_in(episode.instruction)
    used = [values_in(s.command) for s in steps]  # per step: values its command holds
    taught: list[set[str]] = []  # per step: values its output showed first
    for step, values in zip(steps, used):
        shown |= values
        taught.append(values_in(step.output) - shown)
        shown |= taught[-1]
    kept: list[Step] = []
    after_detour = False
    for i, step in enumerate(steps):
        later = set().union(*used[i + 1:])
        idle = not (taught[i] & later)  # nothing its output first showed is used later
        rerun = any(s.command == step.command for s in steps[i + 1:])
        missed = step.changed is False and any(s.changed for s in steps[i + 1:])
        if (idle and (_dead_end(step) or rerun or missed) or _no_op_edit(step.command)
                or any(k.command == step.command and k.output == step.output for k in kept)):
            after_detour = True
            continue
        # A reason given just after a detour speaks of it ("the tests still fail: not the bug").
        kept.append(replace(step, thought="") if after_detour else step)
        after_detour = False
    return kept


def _no_op_edit(command: str) -> bool:
    if not command.lstrip().startswith("sed ") or _COMPOUND.search(command):
        return False
    subs = SED_SUBSTITUTION.findall(command + " ")
    return bool(subs) and all(pattern == replacement for _, pattern, replacement in subs)


def _dead_end(step: Step) -> bool:
    return step.returncode not in (0, None) and not _COMPOUND.search(step.command)
