"""The bubblewrap sandbox, for machines without a Docker engine.

Each command runs in a fresh bwrap: the host's root read-only, a copy of the repository read-write
at /repo, home folders and /run (the Docker socket) hidden, no network, its own pid namespace.
When a command's bash exits, the namespace's first process exits and the kernel kills everything
left in it; on a timeout, killing bwrap does the same. What bwrap cannot enforce is a memory total
or a process count for the sandbox: a per-process address-space limit stands in for the first.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from skillgraft.sandbox.base import AGENT_ENV, WORKDIR, ExecResult, SandboxError, SandboxLimits, SandboxUnavailable, parse_bytes
from skillgraft.sandbox.exec_server import OutputCap, collect
from skillgraft.sandbox.git_state import GIT_START
from skillgraft.sandbox.lifecycle import TrackedSandbox, register

HIDDEN = ("/root", "/home", "/run", "/tmp")  # secrets, sockets and scratch of the host stay out
SPECIAL = {"proc", "dev", "sys"}
AGENT_UID = 1000
def bwrap_binary() -> str:
    path = shutil.which("bwrap")
    if not path:
        raise SandboxUnavailable("bubblewrap is not installed: apt-get install bubblewrap (or use --sandbox docker)")
    return path


class BwrapSandbox(TrackedSandbox):
    """A copy of repo in a temporary folder, commands run in bubblewrap with it at /repo.

    The folder (the repository, the sandbox's /tmp and home) is a tmpfs of the disk limit's size
    when skillgraft runs as root, so a write past the limit fails with "No space left on device"
    and the host's disk is not touched. Without root no file system can be mounted, and the bound
    is per file only (RLIMIT_FSIZE): `disk_bound` says which one holds.
    """

    def __init__(self, repo: Path, limits: SandboxLimits | None = None):
        self.repo = Path(repo)
        self.limits = limits or SandboxLimits()
        self.bwrap = bwrap_binary()
        if not self.repo.is_dir():
            raise SandboxError(f"repository folder {self.repo} does not exist")
        self._closed = False
        self.root = Path(tempfile.mkdtemp(prefix="skillgraft-bwrap-"))
        self.disk_bound = "per-file"
        register(self)
        try:
            self._bound_disk()
            try:
                shutil.copytree(self.repo, self.root / "repo", symlinks=True)
            except OSError as exc:
                raise SandboxError(f"cannot copy the repository into the sandbox (disk limit {self.limits.disk}): {exc}") from exc
            for folder in ("home", "tmp"):
                (self.root / folder).mkdir()
            self._write_identity()
            self._check_works()
            result = self._run(GIT_START, max(60.0, self.limits.command_timeout), self.limits.output_limit)
            if result.returncode != 0:
                raise SandboxError(f"could not record the repository's start state: {result.output.strip()}")
        except BaseException:
            self.close()
            raise

    def _bound_disk(self) -> None:
        if os.geteuid() != 0:
            return
        size = parse_bytes(self.limits.disk)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "skillgraft-sandbox", str(self.root)],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            raise SandboxUnavailable(f"cannot mount the sandbox's bounded folder: {mounted.stderr.strip()}")
        self.disk_bound = "tmpfs"

    def _write_identity(self) -> None:
        """passwd and group files naming uid 1000 `agent`, laid over the host's inside the sandbox."""
        for name, line in (("passwd", "agent:x:1000:1000:agent:/home/agent:/bin/bash"), ("group", "agent:x:1000:")):
            host = Path("/etc") / name
            kept = [row for row in (host.read_text().splitlines() if host.is_file() else []) if row.split(":")[2:3] != ["1000"]]
            (self.root / name).write_text("\n".join([*kept, line]) + "\n")

    def _check_works(self) -> None:
        probe = subprocess.run([*self._argv(), "true"], capture_output=True, text=True, env=self._env())
        if probe.returncode != 0:
            raise SandboxUnavailable(
                f"bubblewrap cannot create a sandbox here: {probe.stderr.strip()}\n"
                "  it needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or root;\n"
                "  or use --sandbox docker"
            )

    def _argv(self) -> list[str]:
        argv = [self.bwrap]
        for entry in sorted(os.listdir("/")):
            path = f"/{entry}"
            if entry in SPECIAL or path in HIDDEN or path == WORKDIR:
                continue
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path) or os.path.isfile(path):
                argv += ["--ro-bind", path, path]
        argv += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys"]
        argv += ["--tmpfs", "/root", "--tmpfs", "/run", "--tmpfs", "/home"]
        argv += ["--ro-bind", str(self.root / "passwd"), "/etc/passwd", "--ro-bind", str(self.root / "group"), "/etc/group"]
        argv += ["--bind", str(self.root / "home"), "/home/agent", "--bind", str(self.root / "tmp"), "/tmp"]
        # The interpreter running skillgraft may live under a hidden folder (pyenv under /root, a
        # project's venv under /tmp): it comes back read-only, mounted after the sandbox's own /tmp
        # and home so that neither covers it, and `python` and its packages work inside.
        for prefix in dict.fromkeys([sys.base_prefix, sys.prefix]):
            if any(prefix == hidden or prefix.startswith(hidden + "/") for hidden in HIDDEN):
                argv += ["--ro-bind", prefix, prefix]
        argv += ["--bind", str(self.root / "repo"), WORKDIR, "--chdir", WORKDIR]
        argv += ["--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--hostname", "sandbox"]
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
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
        }

    def _limit_memory(self) -> None:
        # Runs in the child before exec: the closest bwrap gets to a memory limit is per process.
        size = parse_bytes(self.limits.memory)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
        if self.disk_bound == "per-file":
            disk = parse_bytes(self.limits.disk)
            resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))

    # -- the Sandbox protocol ----------------------------------------------------------------

    def execute(self, command: str, timeout: float | None = None) -> ExecResult:
        timeout = self.limits.command_timeout if timeout is None else timeout
        return self._run(command, timeout, self.limits.output_limit)

    def _run(self, command: str, timeout: float, output_limit: int) -> ExecResult:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        cap = OutputCap(output_limit)
        proc = subprocess.Popen(
            # Not a login shell: /etc/profile would reset PATH and lose the interpreter put first.
            [*self._argv(), "bash", "-c", command],
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=self._limit_memory,
        )
        timed_out = collect(proc, time.monotonic() + timeout, cap)
        if timed_out:
            # bwrap and the namespace's first process die; the kernel then kills the rest of it.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        assert proc.stdout is not None  # piped above
        proc.stdout.close()
        output, elided = cap.result()
        code = proc.returncode
        return ExecResult(output=output, returncode=128 - code if code < 0 else code, timed_out=timed_out, elided=elided)

    def _release(self) -> None:
        if self.disk_bound == "tmpfs":
            subprocess.run(["umount", "--lazy", str(self.root)], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def __repr__(self) -> str:
        return f"BwrapSandbox({str(self.repo)!r}, root={str(self.root)!r}, closed={self._closed})"
