"""The agent loop: ask the model for one bash command, run it in the sandbox, show it the result.

Control flow is by exceptions: a step either returns normally or raises FormatProblem (the
reply had no usable command: tell the model and go on) or AgentExit (submitted, a limit was
reached, the model or sandbox failed: stop). Limits are checked before every model call, so
no call is paid for that the run cannot use. Given `Unstick`, a reply that would run a command
again from the files it already ran on sends the run back to before its last change and draws
the reply there anew, and a reply that holds no command is drawn again in its place (agent.unstick).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

from skillgraft.agent import prompts
from skillgraft.agent.models.base import Model, ModelError, ModelReply, Sampling, SamplingModel
from skillgraft.agent.task import Limits
from skillgraft.agent.unstick import REDRAW_STREAM, Mark, Trail, Unstick
from skillgraft.sandbox.base import ExecResult, Sandbox, SandboxError

SUBMITTED = "Submitted"
STEP_LIMIT = "StepLimit"
TIME_LIMIT = "TimeLimit"
COST_LIMIT = "CostLimit"
FORMAT_ERRORS = "FormatErrors"
MODEL_ERROR = "ModelError"
SANDBOX_ERROR = "SandboxError"


@dataclass
class Step:
    """What one model call led to, for live views and logs."""

    number: int
    reply: str
    command: str | None = None
    result: ExecResult | None = None
    format_error: bool = False
    replaced: str | None = None  # a command that would have repeated itself (agent.unstick)
    back_to: int | None = None  # the step the run went back to instead, its files put back as they were
    malformed: str | None = None  # a reply with no command that was drawn again in its place (agent.unstick)
    # whether the command changed the repository's files, once known: where the run names their
    # state before every command (agent.unstick), when the next command comes
    changed: bool | None = None
    cost: float = 0.0  # total so far
    elapsed: float = 0.0


@dataclass
class LoopResult:
    exit_status: str
    detail: str
    steps: int
    cost: float
    elapsed: float
    messages: list[dict] = field(default_factory=list)


class AgentExit(Exception):
    def __init__(self, status: str, detail: str = ""):
        super().__init__(f"{status}: {detail}" if detail else status)
        self.status, self.detail = status, detail


class FormatProblem(Exception):
    """The reply held no single command; the model is told and the loop goes on."""


class AgentLoop:
    def __init__(
        self,
        model: Model,
        sandbox: Sandbox,
        limits: Limits,
        *,
        max_format_errors: int = 3,
        on_step: Callable[[Step], None] | None = None,
        unstick: Unstick | None = None,
    ):
        self.model, self.sandbox, self.limits = model, sandbox, limits
        self.max_format_errors = max_format_errors
        self.on_step = on_step
        # Redraws need a model that can sample; one that cannot (a replay) is never redrawn.
        self.unstick = unstick if isinstance(model, SamplingModel) else None
        self._trail = Trail()
        self.redraws = 0  # model calls made to redraw a repeated command or a malformed reply
        self.rewinds: list[dict] = []  # each time the run went back: at which step, to which, the commands dropped
        self.messages: list[dict] = []
        self.steps = 0
        self.history: list[Step] = []  # every step as it happened, the submit and malformed replies included
        self.abandoned: set[int] = set()  # numbers of the steps on branches the run went back from
        self.cost = 0.0
        self.format_errors = 0  # consecutive
        self.usage: dict[str, int] = {}  # token counts summed over calls, as the backend reports them
        self.model_s = 0.0  # seconds spent waiting for the model
        self.commands_s = 0.0  # seconds spent running commands in the sandbox
        self._start = 0.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def run(self, instruction: str, skills: Sequence[tuple[str, str]] = ()) -> LoopResult:
        self._start = time.monotonic()
        self.messages = [
            {"role": "system", "content": prompts.system_prompt()},
            {"role": "user", "content": prompts.instance_prompt(instruction, skills)},
        ]
        while True:
            try:
                step = self.step()
                self.format_errors = 0
            except FormatProblem:
                self.format_errors += 1
                step = Step(self.steps, self.messages[-2].get("content") or "", format_error=True)
            except AgentExit as done:
                return LoopResult(done.status, done.detail, self.steps, self.cost, self.elapsed, self.messages)
            self._emit(step)

    def kept(self) -> list[Step]:
        """The steps of the branch the run followed to its end: history less the abandoned ones."""
        return [s for s in self.history if s.number not in self.abandoned]

    def _emit(self, step: Step) -> None:
        step.cost, step.elapsed = self.cost, self.elapsed
        self.history.append(step)
        if self.on_step is not None:
            self.on_step(step)

    def check_limits(self) -> None:
        lim = self.limits
        if self.steps >= lim.steps:
            raise AgentExit(STEP_LIMIT, f"{self.steps} model calls")
        if self.elapsed >= lim.wall_time:
            raise AgentExit(TIME_LIMIT, f"{self.elapsed:.0f}s of {lim.wall_time:.0f}s")
        if lim.cost > 0 and self.cost >= lim.cost:
            raise AgentExit(COST_LIMIT, f"${self.cost:.4f} of ${lim.cost:.4f}")
        if 0 < self.max_format_errors <= self.format_errors:
            raise AgentExit(FORMAT_ERRORS, f"{self.format_errors} malformed replies in a row")

    def step(self) -> Step:
        self.check_limits()
        try:
            reply = self._ask(self.messages)
        except ModelError as exc:
            raise AgentExit(MODEL_ERROR, str(exc)) from exc
        self.steps += 1
        malformed = None
        try:
            command = _command_of(reply)
        except prompts.FormatError as exc:
            drawn = self._draw_again(self.unstick) if self.unstick is not None else None
            if drawn is None:
                self.messages.append({"role": "assistant", "content": reply.content})
                self.messages.append({"role": "user", "content": str(exc)})
                raise FormatProblem() from exc
            malformed, (reply, command) = reply.content, drawn
        replaced, back_to = None, None
        if self.unstick is not None and not prompts.is_submit(command):
            state = self._snapshot()
            if state is not None:
                if self._trail.marks:  # the branch's last command ran from there and left `state`
                    last = self._trail.marks[-1]
                    next(s for s in reversed(self.history) if s.number == last.step).changed = state != last.state
                if self._trail.before(state, command):
                    proposed = command
                    reply, command, state, back_to = self._go_back(self.unstick, state, reply, command)
                    replaced = proposed if back_to is not None else None
                self._trail.add(Mark(state, len(self.messages), self.steps, command))
        if reply.tool_command is not None:
            self.messages.append(_tool_call_message(reply.content, command, reply.tool_call_id))
        else:
            self.messages.append({"role": "assistant", "content": reply.content})
        if prompts.is_submit(command):
            self._emit(Step(self.steps, reply.content, command, replaced=replaced, back_to=back_to, malformed=malformed))
            raise AgentExit(SUBMITTED)
        result = self._execute(command)
        text = prompts.observation(result.output, result.returncode, result.timed_out, result.elided)
        if reply.tool_command is not None:
            self.messages.append({"role": "tool", "tool_call_id": reply.tool_call_id, "content": text})
        else:
            self.messages.append({"role": "user", "content": text})
        return Step(self.steps, reply.content, command, result, replaced=replaced, back_to=back_to, malformed=malformed)

    def _ask(self, messages: list[dict]) -> ModelReply:
        """One model call, its time, cost and tokens counted."""
        asked = time.monotonic()
        try:
            reply = self.model.query(messages)
        finally:
            self.model_s += time.monotonic() - asked
        self.cost += reply.cost
        for key, value in reply.usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = self.usage.get(key, 0) + value
        return reply

    def _snapshot(self) -> str | None:
        """The state of the repository's files, or None when it cannot be read."""
        try:
            return self.sandbox.snapshot()
        except SandboxError:
            return None

    def _draws(self, unstick: Unstick, prompt: list[dict]) -> Iterator[ModelReply]:
        """Up to unstick.tries replies to `prompt`, sampled from the streams REDRAW_STREAM, +1, …,
        while the run's time and cost allow; a draw the model fails to give is skipped."""
        model, lim = cast(SamplingModel, self.model), self.limits
        for n in range(unstick.tries):
            if self.elapsed >= lim.wall_time or (lim.cost > 0 and self.cost >= lim.cost):
                return
            self.redraws += 1
            try:
                with model.sampled(Sampling(unstick.temperature, stream=REDRAW_STREAM + n)):
                    drawn = self._ask(prompt)
            except ModelError:
                continue
            yield drawn

    def _draw_again(self, unstick: Unstick) -> tuple[ModelReply, str] | None:
        """The reply just asked for held no command: the first draw at the same point that holds
        one, and its command; None when none does."""
        for drawn in self._draws(unstick, self.messages):
            try:
                return drawn, _command_of(drawn)
            except prompts.FormatError:
                continue
        return None

    def _go_back(self, unstick: Unstick, state: str, reply: ModelReply,
                 command: str) -> tuple[ModelReply, str, str, int | None]:
        """`command` was already run from `state`: goes back along the branch (agent.unstick) and
        draws a reply there that proposes something new. Returns the reply, its command, the state
        it runs from and the step gone back to; the ones given and None when no draw finds one."""
        index = self._trail.back_to(state, command)
        mark = self._trail.marks[index]
        prompt = self.messages[:mark.at]
        for drawn in self._draws(unstick, prompt):
            try:
                fresh = _command_of(drawn)
            except prompts.FormatError:
                continue
            if prompts.is_submit(fresh) or self._trail.before(mark.state, fresh):
                continue
            if mark.state != state:
                try:
                    self.sandbox.rewind(mark.state)
                except SandboxError:
                    break  # the files cannot be put back: go on from where the run is
            dropped = self._trail.cut(index)
            self.abandoned.update(range(mark.step, self.steps))  # malformed replies there included
            self.rewinds.append({"step": self.steps, "back_to": mark.step, "dropped": [m.command for m in dropped]})
            self.messages = prompt
            return drawn, fresh, mark.state, mark.step
        return reply, command, state, None

    def _execute(self, command: str) -> ExecResult:
        # A command may not outlive the run's wall time: it is cut at whichever ends first.
        remaining = self.limits.wall_time - self.elapsed
        timeout = max(1.0, min(self.limits.command_timeout, remaining))
        started = time.monotonic()
        try:
            return self.sandbox.execute(command, timeout=timeout)
        except SandboxError as exc:
            raise AgentExit(SANDBOX_ERROR, str(exc)) from exc
        finally:
            self.commands_s += time.monotonic() - started


def _command_of(reply: ModelReply) -> str:
    """The command a reply proposes; FormatError when it holds no single one."""
    return reply.tool_command if reply.tool_command is not None else prompts.parse_action(reply.content)


def _tool_call_message(content: str, command: str, call_id: str | None) -> dict:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }
        ],
    }
