"""Edit replays: does the policy, with a given adapter, make the expert's edit?

A SkillWorld family's fix lives in one reply, the edit (turn 2: after running the tests and
finding the failing function). Given a held-out expert conversation up to that reply, the edit
is right when the policy's greedy token is the expert's at every position of the reply's
command, with everything before it (the expert's thought included) given. That is one forward
pass, against the seconds to minutes of a sandbox episode on two cores, which is what a search
over hundreds of adapters (CycleQD) can afford. It is a proxy for success: an episode can still
go wrong before or after its edit, which only the sandbox (AgentEvaluator) measures.

Teacher-forced, the command follows the expert's thought, and a thought can give the command
away: without a skill the expert writes "returns nothing; return acc" before `return acc`, with
one "make the skill's edit". Comparing forms of a skill, `edit_reply_guess` has the policy write
the whole reply itself (greedy, everything before the reply given) and checks its command: what
an agent's turn does, at the cost of decoding the reply token by token.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from skillgraft.agent.prompts import split_reply
from skillgraft.evolve.cycleqd.evaluators import Request
from skillgraft.hypernet.anchor import replies_log_probs
from skillgraft.hypernet.apply import generated_lora
from skillgraft.hypernet.lora import LoraDelta
from skillgraft.hypernet.fit import pad_id
from skillgraft.skillworld.policy.lora_policy import encode

EDIT_TURN = 2


@dataclass(frozen=True)
class EditReplay:
    """A conversation's tokens up to the end of its edit reply, the positions of the command, and
    where the reply begins."""

    ids: list[int]
    command: list[int]
    reply: int


def edit_replay(tokenizer: Any, conversation: list[dict]) -> EditReplay:
    """The conversation cut after its edit reply, with the positions of the reply's command (the
    tokens after its ```bash fence); raises ValueError when it has no edit reply with a command."""
    ids, mask = encode(tokenizer, conversation, 4096)
    turn, in_command, command, end, reply = -1, False, [], None, 0
    for i in range(1, len(ids)):
        if mask[i] and not mask[i - 1]:
            turn += 1
            reply = i if turn == EDIT_TURN else reply
        if turn > EDIT_TURN:
            break
        if mask[i] and turn == EDIT_TURN:
            end = i + 1
            if in_command:
                command.append(i)
            in_command = in_command or "bash" in tokenizer.convert_ids_to_tokens(ids[i])
    if not command or end is None:
        raise ValueError("the conversation has no edit reply with a command (its third assistant turn)")
    return EditReplay(ids[:end], command, reply)


def edit_guess(model: Any, replay: EditReplay) -> list[int]:
    """The model's greedy next token before each position of the command, the expert's tokens
    given (the vocabulary projection only where it is read)."""
    with torch.no_grad():
        hidden = model.get_decoder()(torch.tensor([replay.ids])).last_hidden_state[0]
        return model.get_output_embeddings()(hidden[[i - 1 for i in replay.command]]).argmax(-1).tolist()


def reply_log_probs(model: Any, replay: EditReplay) -> torch.Tensor:
    """The model's next-token log-probabilities at each token of the edit reply (float32, one row
    per token), the logits computed only where they are read."""
    return replies_log_probs(model, replay.ids, [i >= replay.reply for i in range(len(replay.ids))])


def edit_right(model: Any, replay: EditReplay) -> bool:
    """Whether the model's greedy guess is the expert's token at every position of the command."""
    return edit_guess(model, replay) == [replay.ids[i] for i in replay.command]


def edit_reply_guess(model: Any, tokenizer: Any, conversation: list[dict], delta: LoraDelta | None,
                     slack: int = 32) -> tuple[bool, str]:
    """(right, the reply as the model wrote it): the model writes the edit reply itself, greedily,
    from the conversation before it, with `delta` applied; right when the reply's command is the
    expert's. The reply is read up to the end of its first command block."""
    replay = edit_replay(tokenizer, conversation)
    expert = split_reply(_first_block(tokenizer.decode(replay.ids[replay.reply:], skip_special_tokens=True)))[1]
    prompt = torch.tensor([replay.ids[: replay.reply]])
    with applied(model, delta), torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                             max_new_tokens=len(replay.ids) - replay.reply + slack,
                             pad_token_id=pad_id(tokenizer))
    reply = _first_block(tokenizer.decode(out[0, replay.reply:], skip_special_tokens=True))
    return split_reply(reply)[1] == expert, reply.strip()


def _first_block(text: str) -> str:
    """`text` up to the end of its first ```bash block (all of it when it has none)."""
    start = text.find("```bash")
    end = text.find("\n```", start + 7) if start >= 0 else -1
    return text if end < 0 else text[: end + 4]


def applied(model: Any, delta: LoraDelta | None):
    """A context in which `model` computes with `delta` added to its weights (nothing when None)."""
    if not delta:
        return nullcontext()
    return generated_lora(model, {path: (lr.A[None], lr.B[None]) for path, lr in delta.items()})


def edit_command_right(model: Any, tokenizer: Any, conversation: list[dict], delta: LoraDelta | None) -> bool:
    """One conversation's edit, replayed with `delta` applied to the model."""
    return edit_command_guess(model, tokenizer, conversation, delta)[0]


def edit_command_guess(model: Any, tokenizer: Any, conversation: list[dict], delta: LoraDelta | None) -> tuple[bool, str]:
    """(right, the command as the model guessed it): each token the model would have written
    otherwise shown as [guess|expert]."""
    replay = edit_replay(tokenizer, conversation)
    with applied(model, delta):
        guess = edit_guess(model, replay)
    expert = [replay.ids[i] for i in replay.command]
    shown = "".join(tokenizer.decode([e]) if g == e else f"[{tokenizer.decode([g])}|{tokenizer.decode([e])}]"
                    for g, e in zip(guess, expert))
    return guess == expert, shown.strip()


@dataclass
class EditReplayEvaluator:
    """CycleQD's evaluator by edit replays: a task's score is the fraction of its conversations
    whose edit the policy makes with the candidate adapter applied."""

    needs_folder: ClassVar[bool] = False
    task_sets: Mapping[str, Sequence[list[dict]]]  # task name -> held-out expert conversations
    model: Any
    tokenizer: Any
    calls: int = 0  # (candidate, task) pairs scored
    _replays: dict[str, list[EditReplay]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        empty = [name for name, conversations in self.task_sets.items() if not conversations]
        if empty:
            raise ValueError(f"task sets with no conversations: {', '.join(empty)}")
        self._replays = {name: [edit_replay(self.tokenizer, c) for c in conversations]
                         for name, conversations in self.task_sets.items()}

    def evaluate(self, requests: Sequence[Request]) -> list[float]:
        scores = []
        for candidate, task in requests:
            replays = self._replays[task]
            with applied(self.model, candidate.delta):
                scores.append(sum(edit_right(self.model, r) for r in replays) / len(replays))
            self.calls += 1
        return scores


__all__ = ["EditReplay", "EditReplayEvaluator", "applied", "edit_command_right", "edit_command_guess", "edit_guess", "edit_replay",
           "edit_right", "reply_log_probs"]
