"""A model that answers with a fixed list of replies, in order: deterministic runs for tests and demos.

The JSON file holds a list; each item is either the reply text, or an object
{"content": str, "tool_command": str | null, "cost": float}.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from skillgraft.agent.models.base import ModelError, ModelReply


class ReplayModel:
    def __init__(self, replies: Sequence[str | dict], name: str = "replay"):
        self.name = name
        self._replies = [_reply(item, i) for i, item in enumerate(replies)]
        self._next = 0
        self.calls: list[list[dict]] = []  # what each query was shown, for inspection

    @classmethod
    def from_file(cls, path: str | Path) -> "ReplayModel":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelError(f"replay file {path}: {exc}") from exc
        if not isinstance(data, list):
            raise ModelError(f"replay file {path}: expected a JSON list of replies")
        return cls(data, name=f"replay:{path}")

    def query(self, messages: list[dict]) -> ModelReply:
        self.calls.append([dict(m) for m in messages])
        if self._next >= len(self._replies):
            raise ModelError(f"{self.name}: all {len(self._replies)} replies used up")
        reply = self._replies[self._next]
        self._next += 1
        return ModelReply(reply.content, reply.cost, reply.tool_command, dict(reply.usage), reply.tool_call_id)


def _reply(item: str | dict, index: int) -> ModelReply:
    if isinstance(item, str):
        return ModelReply(item)
    if isinstance(item, dict) and isinstance(item.get("content", ""), str):
        unknown = set(item) - {"content", "tool_command", "cost"}
        if unknown:
            raise ModelError(f"replay reply {index}: unknown key {sorted(unknown)[0]!r}")
        command = item.get("tool_command")
        return ModelReply(
            content=item.get("content", ""),
            cost=float(item.get("cost", 0.0)),
            tool_command=command,
            tool_call_id=f"call_{index}" if command is not None else None,
        )
    raise ModelError(f"replay reply {index}: expected text or an object with 'content'")
