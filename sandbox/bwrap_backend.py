"""The bubblewrap sandbox, for machines without a Docker engine.

One long-lived bwrap per sandbox: the host's root read-only, home folders and /run (the Docker
socket) hidden, no network, its own pid namespace. Everything the sandbox may write (the copy of
the repository at /repo, /tmp, the agent's home) lives in one tmpfs of the disk limit's size that
bubblewrap mounts inside its own user namespace, so the bound holds with or without root, a write
past it fails with "No space left on device", and nothing of it lands on the host's disk.

Commands go to the command server (exec_server.py) running as the namespace's pid 1: the kernel
delivers no signal from inside the namespace to a pid 1 that has no handler for it, so the agent
(the same user) cannot kill it, and the repository in the tmpfs lives as long as the sandbox.
When skillgraft exits the namespace dies with it (--die-with-parent). What bwrap cannot enforce
is a memory total or a process count: a per-process address-space limit stands in for the first.
"""
from __future__ import annotations

import itertools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from skillgraft.sandbox.base import AGENT_ENV, WORKDIR, ExecResult, SandboxError, SandboxLimits, SandboxUnavailable, parse_bytes
from skillgraft.sandbox.git_state import GIT_START
from skillgraft.sandbox.lifecycle import TrackedSandbox, register
from skillgraft.sandbox.pipe_channel import PipeChannel
from skillgraft.sandbox.server_channel import ServerGone, command_result, exchange

HIDDEN = ("/root", "/home", "/run", "/tmp")  # secrets, sockets and scratch of the host stay out
SPECIAL = {"proc", "dev", "sys"}
AGENT_UID = 1000


def bwrap_binary() -> str:
    path = shutil.which("bwrap")
    if not path:
        raise SandboxUnavailable("bubblewrap is not installed: apt-get install bubblewrap (or use --sandbox docker)")
    return path


# Inside the sandbox: the one bounded folder, what is seen through it, and what is handed in.
BOUNDED = "/sandbox"
SERVER_DIR = "/run/skillgraft"
SOURCE = f"{SERVER_DIR}/source"  # the host's repository, read-only, copied from at the start
LEAD_INTO_BOUNDED = (("repo", WORKDIR), ("tmp", "/tmp"), ("home", "/home/agent"))  # folder in it, path seen
START_TIMEOUT = 120.0
BACKSTOP = 10.0  # beyond a command's own timeout, which the server enforces, before it counts as hung


def _behind_links(path: str) -> str:
    """Where a path inside the sandbox really lies when it passes through one of the links into
    the bounded folder: bubblewrap resolves a link's target against the host while it builds the
    sandbox, so a mount point must be named by its real place."""
    for name, seen_at in LEAD_INTO_BOUNDED:
        if path == seen_at or path.startswith(seen_at + "/"):
            return f"{BOUNDED}/{name}{path[len(seen_at):]}"
    return path


class BwrapSandbox(TrackedSandbox):
    """A copy of repo in a bounded tmpfs inside one bubblewrap, commands run there with it at /repo."""


    def __init__(self, repo: Path, limits: SandboxLimits | None = None):
        self.repo = Path(repo)
        self.limits = limits or SandboxLimits()
        self.bwrap = bwrap_binary()
        if not self.repo.is_dir():
            raise SandboxError(f"repository folder {self.repo} does not exist")
        self._closed = False
        self._ids = itertools.count(1)
        self._channel: PipeChannel | None = None
        # On the host only what is handed in read-only: passwd/group and the server's stderr.
        self.root = Path(tempfile.mkdtemp(prefix="skillgraft-bwrap-"))
        register(self)
        try:
            self._write_identity()
            self._start_server()
            copied = self._run(f"cp -dR --preserve=mode,timestamps {SOURCE}/. {WORKDIR}/", START_TIMEOUT, 4000)
            if copied.returncode != 0:
                raise SandboxError(f"cannot copy the repository into the sandbox (disk limit {self.limits.disk}): "
                                   f"{copied.output.strip()[-500:]}")
            result = self._run(GIT_START, max(60.0, self.limits.command_timeout), self.limits.output_limit)
            if result.returncode != 0:
                raise SandboxError(f"could not record the repository's start state: {result.output.strip()}")
        except BaseException:
            self.close()
            raise

    def _write_identity(self) -> None:
        """passwd and group files naming uid 1000 `agent`, laid over the host's inside the sandbox."""
        for name, line in (("passwd", "agent:x:1000:1000:agent:/home/agent:/bin/bash"), ("group", "agent:x:1000:")):
            host = Path("/etc") / name
            kept = [row for row in (host.read_text().splitlines() if host.is_file() else []) if row.split(":")[2:3] != ["1000"]]
            (self.root / name).write_text("\n".join([*kept, line]) + "\n")

    def _start_server(self) -> None:
        server = Path(__file__).with_name("exec_server.py")
        argv = [*self._argv(), "--ro-bind", str(server), f"{SERVER_DIR}/exec_server.py",
                sys.executable, f"{SERVER_DIR}/exec_server.py", str(AGENT_UID), str(AGENT_UID), "/home/agent"]
        with open(self.root / "server.err", "wb") as errors:
            proc = subprocess.Popen(argv, env=self._env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                    start_new_session=True, preexec_fn=self._limit_memory)
        self._channel = PipeChannel(proc)
        try:
            reply = exchange(self._channel, {"id": next(self._ids), "op": "ping"}, START_TIMEOUT)
        except ServerGone as gone:
            detail = (self.root / "server.err").read_text(errors="replace").strip()[-1500:]
            raise SandboxUnavailable(
                f"bubblewrap cannot create a sandbox here: {detail or gone}\n"
                "  it needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or root;\n"
                "  or use --sandbox docker"
            ) from gone
        if "pong" not in reply:
            raise SandboxError(f"the command server in the sandbox answered {reply!r}")

    def _argv(self) -> list[str]:
        argv = [self.bwrap]
        for entry in sorted(os.listdir("/")):
            path = f"/{entry}"
            if entry in SPECIAL or path in HIDDEN or path == WORKDIR or path == BOUNDED:
                continue
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path) or os.path.isfile(path):
                argv += ["--ro-bind", path, path]
        argv += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys"]
        argv += ["--tmpfs", "/root", "--tmpfs", "/run", "--tmpfs", "/home"]
        argv += ["--ro-bind", str(self.root / "passwd"), "/etc/passwd", "--ro-bind", str(self.root / "group"), "/etc/group"]
        # One bounded tmpfs holds all the sandbox may write; /repo, /tmp and the home folder lead into it.
        argv += ["--size", str(parse_bytes(self.limits.disk)), "--perms", "0755", "--tmpfs", BOUNDED]
        for name, seen_at in LEAD_INTO_BOUNDED:
            argv += ["--dir", f"{BOUNDED}/{name}", "--symlink", f"{BOUNDED}/{name}", seen_at]
        # The interpreter running skillgraft may live under a hidden folder (pyenv under /root, a
        # project's venv under /tmp): it comes back read-only, mounted after the sandbox's own /tmp
        # and home so that neither covers it, and `python` and its packages work inside.
        for prefix in dict.fromkeys([sys.base_prefix, sys.prefix]):
            if any(prefix == hidden or prefix.startswith(hidden + "/") for hidden in HIDDEN):
                argv += ["--ro-bind", prefix, _behind_links(prefix)]
        argv += ["--ro-bind", str(self.repo), SOURCE, "--chdir", WORKDIR]
        argv += ["--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--hostname", "sandbox"]
        argv += ["--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.limits.network:
            argv.append("--unshare-net")
        argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        return argv

    def _env(self) -> dict[str, str]:
        bins = [str(Path(prefix) / "bin") for prefix in dict.fromkeys([sys.prefix, sys.base_prefix])]
        return {
            "PATH": ":".join([*bins, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]),
            "HOME": "/home/agent",
            **AGENT_ENV,
            "TMPDIR": "/tmp",
            "PWD": WORKDIR,  # /repo leads into the bounded folder; the shell keeps showing /repo
        }

    def _limit_memory(self) -> None:
        # Runs in the child before exec: the closest bwrap gets to a memory limit is per process.
        size = parse_bytes(self.limits.memory)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    # -- the Sandbox protocol ----------------------------------------------------------------

    def execute(self, command: str, timeout: float | None = None) -> ExecResult:
        timeout = self.limits.command_timeout if timeout is None else timeout
        return self._run(command, timeout, self.limits.output_limit)

    def _run(self, command: str, timeout: float, output_limit: int) -> ExecResult:
        if self._closed or self._channel is None:
            raise SandboxError("the sandbox is closed")
        request = {"id": next(self._ids), "command": command, "timeout": timeout, "output_limit": output_limit,
                   "cwd": WORKDIR, "env": self._env(), "login": False}  # a login shell would reset PATH
        try:
            reply = exchange(self._channel, request, timeout + BACKSTOP)
        except ServerGone as gone:
            # The repository lived in the namespace: with its server gone, the sandbox is gone.
            self.close()
            raise SandboxError(f"the sandbox's command server stopped: {gone}") from gone
        return command_result(reply)

    def _release(self) -> None:
        if self._channel is not None:
            proc = self._channel.proc
            self._channel.close()  # end of input: the server returns and the namespace ends with it
            self._channel = None
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __repr__(self) -> str:
        return f"BwrapSandbox({str(self.repo)!r}, root={str(self.root)!r}, closed={self._closed})"
