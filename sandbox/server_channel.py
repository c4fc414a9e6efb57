"""JSON lines to and from the command server over the raw socket of an attached `docker exec`.

The engine multiplexes the exec's stdout and stderr on one socket in frames: an 8-byte header
(stream, 0, 0, 0, length as big-endian uint32) then the payload. Requests go the other way as
plain bytes on the same socket, which the engine feeds to the server's stdin.
"""
from __future__ import annotations

import json
import logging
import socket
import struct
import time
from typing import Protocol

from skillgraft.sandbox.base import ExecResult, SandboxError

log = logging.getLogger(__name__)

STDOUT, STDERR = 1, 2


class ServerGone(Exception):
    """The server closed its output, or did not answer before the deadline."""


def take_message(buffer: bytearray) -> dict | None:
    """The first whole JSON line in what the server wrote so far, removed from it; None until one is there."""
    newline = buffer.find(b"\n")
    if newline < 0:
        return None
    line = bytes(buffer[:newline])
    del buffer[: newline + 1]
    return json.loads(line)


class Channel(Protocol):
    def send(self, message: dict) -> None: ...
    def receive(self, deadline: float) -> dict: ...


def exchange(channel: Channel, message: dict, wait_s: float) -> dict:
    """Sends one request and returns the server's answer to it; a late answer to an earlier,
    abandoned request is skipped. ServerGone if none comes within wait_s."""
    channel.send(message)
    reply = channel.receive(time.monotonic() + wait_s)
    while reply.get("id") != message["id"] and "error" not in reply:
        reply = channel.receive(time.monotonic() + wait_s)
    return reply


def command_result(reply: dict) -> ExecResult:
    """A command's answer as the sandbox protocol returns it; a refused request is a SandboxError."""
    if "error" in reply:
        raise SandboxError(f"the command server rejected the request: {reply['error']}")
    return ExecResult(output=reply["output"], returncode=reply["returncode"], timed_out=reply["timed_out"],
                      elided=reply["elided"])


class ServerChannel:
    def __init__(self, attached):
        # docker-py hands back a SocketIO over the connection; its socket does the timed reads.
        self.sock: socket.socket = getattr(attached, "_sock", attached)
        self._attached = attached
        self._raw = bytearray()
        self._stdout = bytearray()
        self.stderr = bytearray()

    def send(self, message: dict) -> None:
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise ServerGone(f"cannot write to the command server: {exc}") from exc

    def receive(self, deadline: float) -> dict:
        """The next JSON line the server writes, waiting at most until deadline (time.monotonic)."""
        while True:
            message = take_message(self._stdout)
            if message is not None:
                return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServerGone("the command server did not answer in time")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout as exc:
                raise ServerGone("the command server did not answer in time") from exc
            except OSError as exc:
                raise ServerGone(f"lost the connection to the command server: {exc}") from exc
            if not data:
                detail = self.stderr.decode(errors="replace").strip()[-2000:]
                raise ServerGone("the command server exited" + (f": {detail}" if detail else ""))
            self._raw += data
            self._split_frames()

    def _split_frames(self) -> None:
        while len(self._raw) >= 8:
            stream, size = struct.unpack(">BxxxL", self._raw[:8])
            if len(self._raw) < 8 + size:
                return
            payload = bytes(self._raw[8 : 8 + size])
            del self._raw[: 8 + size]
            if stream == STDERR:
                self.stderr += payload
                del self.stderr[:-8192]  # only the end matters, for the message if the server dies
                log.debug("command server stderr: %s", payload.decode(errors="replace").rstrip())
            else:
                self._stdout += payload

    def close(self) -> None:
        for closable in (self.sock, self._attached):
            try:
                closable.close()
            except OSError:
                pass
