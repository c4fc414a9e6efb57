"""A run as what learning needs: the task, the steps taken, the verdict.

A run just finished gives its steps as the loop had them (`episode_from_run`). A stored
trajectory holds the messages exactly as the model saw them, so its steps are recovered with
the same parser the agent uses (`load_episode`); replies that did not parse were format errors
and are not steps.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from skillgraft.agent.prompts import FormatError, is_submit, parse_action
from skillgraft.agent.runner import RunResult
from skillgraft.agent.task import Task

_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*)</output>", re.DOTALL)
_SKILL = re.compile(r'<skill name="([^"]+)">')
_BASH = re.compile(r"```bash\s*\n.*?\n?```", re.DOTALL)


@dataclass
class Step:
    thought: str
    command: str
    output: str = ""
    returncode: int | None = None
    changed: bool | None = None  # whether it changed the repository's files, where the run knew


@dataclass
class Episode:
    task_id: str
    instruction: str
    steps: list[Step]
    success: bool
    family: str | None = None
    skills: list[str] = field(default_factory=list)  # names of the skills shown in context
    test_output: str = ""
    path: Path | None = None

    @property
    def commands(self) -> list[str]:
        return [s.command for s in self.steps]

    def transcript(self, limit: int = 6000) -> str:
        """The steps as plain text for a reader (a summariser or generator model), capped."""
        lines = [f"Task: {self.instruction}"]
        for i, s in enumerate(self.steps, 1):
            out = s.output if len(s.output) < 600 else s.output[:300] + "\n…\n" + s.output[-300:]
            lines.append(f"[{i}] $ {s.command}\n(returncode {s.returncode})\n{out.rstrip()}")
        lines.append(f"Verdict: {'tests passed' if self.success else 'tests failed'}")
        if not self.success and self.test_output:
            lines.append("Test output:\n" + self.test_output[-1500:])
        text = "\n\n".join(lines)
        return text if len(text) <= limit else text[: limit // 2] + "\n…\n" + text[-limit // 2 :]


def _text(message: dict) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # OpenAI content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content


def _thought(reply: str) -> str:
    return _BASH.sub("", reply).strip()


def steps_from_messages(messages: list[dict]) -> list[Step]:
    steps: list[Step] = []
    pending: Step | None = None
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            content = _text(message)
            command = None
            for call in message.get("tool_calls") or []:  # tool-calling models put the command here
                try:
                    command = json.loads(call["function"]["arguments"]).get("command")
                except (KeyError, TypeError, ValueError):
                    command = None
            if command is None:
                try:
                    command = parse_action(content)
                except FormatError:
                    pending = None
                    continue
            pending = Step(thought=_thought(content), command=command)
            steps.append(pending)
        elif role in ("user", "tool") and pending is not None:
            text = _text(message)
            rc = _RETURNCODE.search(text)
            out = _OUTPUT.search(text)
            pending.returncode = int(rc.group(1)) if rc else None
            pending.output = out.group(1) if out else text
            pending = None
    return steps


def episode_from_dict(data: dict, path: Path | None = None) -> Episode:
    messages = data.get("messages") or []
    info = data.get("info") or {}
    first_user = next((_text(m) for m in messages if m.get("role") == "user"), "")
    instruction = first_user.rsplit("Task:", 1)[-1].strip() if "Task:" in first_user else first_user.strip()
    task = info["task"] if isinstance(info.get("task"), dict) else {}
    test = info["test"] if isinstance(info.get("test"), dict) else {}
    success = info.get("success")
    if success is None:
        success = bool(test.get("passed", info.get("reward", 0) == 1))
    steps = steps_from_messages(messages)
    changed = info.get("changed")
    if isinstance(changed, list) and len(changed) == len(steps):  # written where the run went back when stuck
        for step, value in zip(steps, changed):
            step.changed = value if isinstance(value, bool) else None
    return Episode(
        task_id=str(task.get("id") or info.get("task_id") or (path.stem if path else "task")),
        instruction=task.get("instruction") or instruction,
        steps=steps,
        success=bool(success),
        family=task.get("family") or info.get("family"),
        skills=_SKILL.findall(first_user),
        test_output=str(test.get("output") or info.get("test_output") or ""),
        path=path,
    )


def episode_from_run(task: Task, result: RunResult) -> Episode:
    """The episode of a run just finished, from the branch it ended on (no file is read): the
    steps of a branch it went back from taught nothing that led to the end."""
    steps = [Step(_thought(s.reply), s.command, s.result.output if s.result else "",
                  s.result.returncode if s.result else None, s.changed)
             for s in result.kept if s.command is not None]
    return Episode(task_id=task.id, instruction=task.instruction, steps=steps, success=result.success,
                   family=task.family, skills=list(result.skills), test_output=result.test_output,
                   path=result.trajectory_path)


def load_episode(path: Path) -> Episode:
    path = Path(path)
    return episode_from_dict(json.loads(path.read_text()), path)


def useful_steps(episode: Episode) -> list[Step]:
    """The steps that mattered: the submit and commands that failed to run are dropped."""
    return [s for s in episode.steps if not is_submit(s.command) and s.returncode not in (126, 127)]
