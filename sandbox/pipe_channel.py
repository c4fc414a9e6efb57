"""JSON lines to and from a command server that is a child process (bubblewrap's), over its pipes."""
from __future__ import annotations

import json
import os
import select
import subprocess
import time

from skillgraft.sandbox.server_channel import ServerGone, take_message


class PipeChannel:
    def __init__(self, proc: subprocess.Popen):
        assert proc.stdin is not None and proc.stdout is not None, "the server is started with both pipes"
        self.proc = proc
        self._stdin, self._fd = proc.stdin, proc.stdout.fileno()
        self._buffer = bytearray()

    def send(self, message: dict) -> None:
        try:
            self._stdin.write(json.dumps(message).encode() + b"\n")
            self._stdin.flush()
        except OSError as exc:
            raise ServerGone(f"cannot write to the command server: {exc}") from exc

    def receive(self, deadline: float) -> dict:
        """The next JSON line the server writes, waiting at most until deadline (time.monotonic)."""
        while True:
            message = take_message(self._buffer)
            if message is not None:
                return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServerGone("the command server did not answer in time")
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if not ready:
                continue
            data = os.read(self._fd, 1 << 16)
            if not data:
                raise ServerGone(f"the command server exited (status {self.proc.poll()})")
            self._buffer += data

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
