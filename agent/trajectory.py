"""One JSON file per run: the messages exactly as the model saw them, and what came of them.

The file is rewritten after every step through a temporary name and a rename, so a reader (or
a crash) only ever sees a whole file; secrets are redacted before anything touches the disk.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from skillgraft.agent.prompts import FormatError, parse_action
from skillgraft.agent.redact import redact, secret_values
from skillgraft.hypernet.objectives import without_skills

FORMAT = "skillgraft-trajectory-1"


class TrajectoryWriter:
    """Holds the info block of a run and writes it with the current messages."""

    def __init__(self, path: Path | None, info: dict[str, Any] | None = None):
        self.path = Path(path) if path is not None else None
        self.info: dict[str, Any] = dict(info or {})
        # Read once: the environment of a run does not change, and each step rewrites the file.
        self._secrets = secret_values()

    def update(self, **info: Any) -> None:
        self.info.update(info)

    def document(self, messages: list[dict]) -> dict:
        return redact({"format": FORMAT, "info": self.info, "messages": messages}, self._secrets)

    def write(self, messages: list[dict]) -> None:
        if self.path is None:
            return
        write_json_atomic(self.path, self.document(messages))


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, ensure_ascii=False, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_trajectory(path: str | Path) -> dict:
    """Loads a trajectory file; ValueError if it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable trajectory ({exc})") from exc
    if not isinstance(data, dict) or "messages" not in data or "info" not in data:
        raise ValueError(f"{path}: not a skillgraft trajectory (no messages/info)")
    return data


def conversation_without_skills(path: str | Path) -> list[dict]:
    """A run's messages as a model learns from them with no skill in the prompt: every skill
    block taken out of the user messages, and a reply that held no command (a format error)
    kept as context but marked `"train": False`."""
    out = []
    for message in without_skills(read_trajectory(path)["messages"]):
        if message.get("role") == "assistant" and not message.get("tool_calls"):
            try:
                parse_action(message.get("content") or "")
            except FormatError:
                message = {**message, "train": False}
        out.append(message)
    return out
