"""The command server that runs inside a sandbox container.

One long-lived process per sandbox reads JSON requests on stdin, one per line, runs each command
with bash as the unprivileged user, and answers one JSON line on stdout. Starting a process that
is already inside the container costs a fork; a fresh `docker exec` per command costs a runc
exec plus a CLI start, which is most of an agent's per-step overhead.

The server runs as root so that the commands it starts (as the agent user) cannot kill it, and so
that it can see and kill every process a command left behind. This file is copied into the
container with the repository: it must use only the standard library of Debian's python3.
"""
from __future__ import annotations

import codecs
import json
import os
import select
import signal
import subprocess
import sys
import time

QUIET_AFTER_EXIT = 0.1  # seconds of silence after bash exits before a lingering pipe is given up on


class OutputCap:
    """Keeps the head and tail of a stream of bytes as text and counts the characters between."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.head = ""
        self.tail = ""
        self.total = 0

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final)
        self.total += len(text)
        if self.limit <= 0:
            self.head += text
            return
        if len(self.head) < self.head_limit:
            take = self.head_limit - len(self.head)
            self.head += text[:take]
            text = text[take:]
        if text:
            self.tail = (self.tail + text)[-self.tail_limit :]

    def result(self) -> tuple[str, int]:
        """The kept text, with a line marking the cut, and the number of characters cut."""
        self.feed(b"", final=True)
        elided = self.total - len(self.head) - len(self.tail)
        if elided <= 0:
            return self.head + self.tail, 0
        return f"{self.head}\n[... {elided} characters elided ...]\n{self.tail}", elided


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        raw = handle.read().decode(errors="replace")
    # The command name may contain spaces and parentheses; the fields after its last ")" are fixed.
    return raw[raw.rindex(")") + 2 :].split()


def belongs(pid: int, session: int, uid: int, since: int) -> bool:
    """A process is the command's if it is in the command's session, or if the agent user
    started it while the command ran (what escaped the session by setsid or a double fork).

    Commands run one at a time, so an agent process born in that window descends from the
    command. Only /proc/PID/stat is read: it needs no ptrace rights over the agent's processes.
    """
    try:
        fields = _stat_fields(pid)
        if fields[0] == "Z":
            return False
        if int(fields[3]) == session:
            return True
        return os.stat(f"/proc/{pid}").st_uid == uid and int(fields[19]) >= since
    except (OSError, ValueError, IndexError):
        return False


def start_ticks(pid: int) -> int:
    """When a process started, in clock ticks since boot."""
    return int(_stat_fields(pid)[19])


def kill_tree(session: int, uid: int, since: int) -> int:
    """SIGKILLs every process of a command until none is left; returns how many were killed."""
    me = os.getpid()
    killed = 0
    for _ in range(500):
        try:
            os.killpg(session, signal.SIGKILL)  # one signal for the whole group, racing no fork
        except (ProcessLookupError, PermissionError):
            pass
        victims = [pid for pid in _pids() if pid != me and belongs(pid, session, uid, since)]
        if not victims:
            return killed
        killed += _sigkill(victims)
    return killed


def kill_user(uid: int) -> int:
    """SIGKILLs every process of the agent user until none is left (a fork bomb refills the
    process table as fast as single kills empty it, so this loops); returns how many."""
    me = os.getpid()
    killed = 0
    for _ in range(500):
        victims = []
        for pid in _pids():
            try:
                if pid not in (me, 1) and os.stat(f"/proc/{pid}").st_uid == uid and _stat_fields(pid)[0] != "Z":
                    victims.append(pid)
            except (OSError, ValueError, IndexError):
                continue
        if not victims:
            return killed
        killed += _sigkill(victims)
    return killed


def _sigkill(pids: list[int]) -> int:
    """Kills each pid still there, then yields a moment so the dead can be reaped; returns how many."""
    killed = 0
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError):
            pass
    time.sleep(0.005)
    return killed


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def collect(proc: subprocess.Popen, deadline: float, cap: OutputCap) -> bool:
    """Reads proc's output into cap until it ends or deadline passes; True if the deadline passed.

    When bash has exited but a background child still holds the pipe, reading stops after a
    short silence rather than at the deadline: the child is left running, its later output lost.
    """
    assert proc.stdout is not None, "collect reads a process started with stdout=PIPE"
    fd = proc.stdout.fileno()
    exited_at = None
    while True:
        now = time.monotonic()
        if now >= deadline:
            return True
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at >= QUIET_AFTER_EXIT:
            break
        wait = min(deadline - now, QUIET_AFTER_EXIT if exited_at is not None else 0.25)
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            data = os.read(fd, 65536)
            if not data:
                break
            cap.feed(data)
            if exited_at is not None:
                exited_at = time.monotonic()
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        return False
    except subprocess.TimeoutExpired:
        return True  # bash closed its output but kept running


def start(request: dict, user: dict, env: dict) -> subprocess.Popen:
    # Root (Docker) drops to the agent user; a server that already is the agent user (bubblewrap's
    # user namespace) may not call setgroups at all, so it starts the command as itself.
    switch = {"user": user["uid"], "group": user["gid"], "extra_groups": []} if os.geteuid() != user["uid"] else {}
    return subprocess.Popen(
        # A login shell reads /etc/profile; a sandbox that sets its own PATH asks for a plain one.
        ["bash", "-lc" if request.get("login", True) else "-c", request["command"]],
        cwd=request.get("cwd", "/repo"),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # the command's own session: one killpg reaches its whole group
        **switch,
    )


def reap_orphans() -> None:
    """Collects the exit status of every finished process left to this one. As a namespace's
    pid 1 (bubblewrap) the server inherits what commands orphan; called between commands, when
    it has no child of its own still running."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def run(request: dict, user: dict) -> dict:
    env = dict(user["env"], **request.get("env", {}))
    cap = OutputCap(int(request.get("output_limit", 10_000)))
    started = time.monotonic()
    deadline = started + float(request.get("timeout", 60))
    try:
        proc = start(request, user, env)
    except BlockingIOError:
        # The process limit is used up by something an earlier command left running (a fork
        # bomb in the background): nothing can run until it is gone, so all of it goes.
        killed = kill_user(user["uid"])
        cap.feed(f"[sandbox: the process limit was exhausted; killed {killed} leftover processes]\n".encode())
        try:
            proc = start(request, user, env)
        except OSError as exc:
            return {"id": request["id"], "output": f"cannot start command: {exc}", "returncode": 126, "timed_out": False, "elided": 0}
    except OSError as exc:
        return {"id": request["id"], "output": f"cannot start command: {exc}", "returncode": 126, "timed_out": False, "elided": 0}
    try:
        since = start_ticks(proc.pid)
    except (OSError, ValueError, IndexError):
        since = sys.maxsize  # unreadable: fall back to killing by session alone
    timed_out = collect(proc, deadline, cap)
    if timed_out:
        kill_tree(proc.pid, user["uid"], since)
        proc.wait()
    assert proc.stdout is not None  # start() pipes it
    proc.stdout.close()
    output, elided = cap.result()
    code = proc.returncode
    return {
        "id": request["id"],
        "output": output,
        "returncode": 128 - code if code < 0 else code,
        "timed_out": timed_out,
        "elided": elided,
        "seconds": round(time.monotonic() - started, 4),
    }


def serve(uid: int, gid: int, home: str) -> None:
    user = {
        "uid": uid,
        "gid": gid,
        "env": {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": home,
        },
    }
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            # Nothing is written before the first request: bytes sent before the client has
            # switched the HTTP connection to raw reads could be swallowed by its buffer.
            reply = {"id": request["id"], "pong": os.getpid()} if request.get("op") == "ping" else run(request, user)
        except Exception as exc:  # a bad request must not take the server down
            reply = {"id": None, "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
        reap_orphans()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
