"""The Docker sandbox: one container per task, the repository copied in, commands run by a server inside.

Per command, the client writes one JSON line to a command server already running in the container
(sandbox/exec_server.py) and reads one back, so a step costs a fork inside the container instead
of a new `docker exec`. Timeouts, process-tree kills and output capping happen in the server,
next to the processes; the client keeps a backstop deadline in case the server itself is stuck.
"""
from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container

from skillgraft.sandbox.base import AGENT_ENV, WORKDIR, ExecResult, SandboxError, SandboxLimits, SandboxUnavailable
from skillgraft.sandbox.copy_in import repo_tarball
from skillgraft.sandbox.disk_quota import disk_quota
from skillgraft.sandbox.engine_retry import transient_retry
from skillgraft.sandbox.git_state import GIT_START
from skillgraft.sandbox.image import IMAGE_TAG, engine, image_exists
from skillgraft.sandbox.lifecycle import TrackedSandbox, owner_labels, register
from skillgraft.sandbox.rootfs import AGENT_UID
from skillgraft.sandbox.server_channel import ServerChannel, ServerGone, command_result, exchange

SERVER_SOURCE = Path(__file__).with_name("exec_server.py").read_bytes()
SERVER_PATH = "opt/skillgraft/exec_server.py"  # root-owned in the container: the agent cannot alter it
SERVER_COMMAND = ["python3", "-u", f"/{SERVER_PATH}", str(AGENT_UID), str(AGENT_UID), "/home/agent"]
START_TIMEOUT = 120.0  # seconds for the start snapshot of a large repository
BACKSTOP = 15.0  # seconds past a command's own timeout before the client gives up on the server


class DockerSandbox(TrackedSandbox):
    """A container from the sandbox image holding a copy of repo at /repo.

    Opening it creates the container, copies the repository in and starts it; the command
    server's greeting and the snapshot of the start state are read on first use (wait_ready()
    asks for them at once). close() (also on leaving `with`, at interpreter exit and on SIGTERM)
    removes the container.
    """

    def __init__(self, repo: Path, limits: SandboxLimits | None = None, image: str | None = None,
                 client: docker.DockerClient | None = None):
        self.repo = Path(repo)
        self.limits = limits or SandboxLimits()
        self.image = image or IMAGE_TAG
        self.container: Container | None = None
        self._channel: ServerChannel | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # one request at a time on the channel, whichever thread asks
        self._closed = False
        self.backstop = BACKSTOP
        self._pending: list[int] = []  # requests sent while opening whose answers are not read yet
        if not self.repo.is_dir():
            raise SandboxError(f"repository folder {self.repo} does not exist")
        self.client = engine(client)
        if not image_exists(self.client, self.image):
            raise SandboxUnavailable(
                f"the sandbox image {self.image} is not built: run `skillgraft sandbox build` (or --sandbox bwrap)"
            )
        register(self)
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # -- opening -----------------------------------------------------------------------------

    def _open(self) -> None:
        archive = repo_tarball(self.repo, WORKDIR.lstrip("/"), AGENT_UID, {SERVER_PATH: SERVER_SOURCE})
        self.container = container = self._create()
        transient_retry(container.put_archive)("/", archive)
        # The server is the container's own process: attaching before start saves the exec that
        # would otherwise launch it, and nothing it writes is missed.
        attached = transient_retry(self.client.api.attach_socket)(
            container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        self._channel = ServerChannel(attached)
        transient_retry(container.start)()
        # The server answers in order, so the start snapshot is taken before any later command
        # runs; its answer is collected then, while the caller meanwhile does its own work
        # (an agent asks its model for the first command).
        self._pending = [self._send({"op": "ping"}), self._send({"command": GIT_START, "timeout": START_TIMEOUT})]

    def _create(self) -> Container:
        limits = self.limits
        try:
            return self._create_bounded(limits)
        except docker.errors.APIError as exc:
            if "storage-opt" not in str(exc) and "storage_opt" not in str(exc):
                raise
            raise SandboxUnavailable(
                f"this Docker engine cannot bound a sandbox's disk ({exc.explanation or exc}): its data root must be "
                "a btrfs file system with quotas on (or XFS mounted with pquota). scripts/setup.sh starts such an engine; "
                "`skillgraft sandbox doctor` checks it (or use --sandbox bwrap)"
            ) from exc

    def _create_bounded(self, limits: SandboxLimits) -> Container:
        return transient_retry(self.client.containers.create)(
            self.image,
            command=SERVER_COMMAND,
            stdin_open=True,
            labels=owner_labels(),
            working_dir=WORKDIR,
            network_mode=None if limits.network else "none",
            network_disabled=not limits.network,
            mem_limit=limits.memory,
            memswap_limit=limits.memory,  # no swap on top: a memory hog meets the limit, not the disk
            nano_cpus=int(limits.cpus * 1e9),
            pids_limit=limits.pids,
            # What the container may write (the repository, /tmp, home) is bounded by a quota on its
            # file system; the engine's data root, a file of fixed size, caps all sandboxes together.
            storage_opt={"size": str(disk_quota(self.client, self.image, limits.disk))},
            init=True,  # reaps the orphans a killed command leaves behind
            cap_drop=["ALL"],
            cap_add=["SETUID", "SETGID", "KILL"],  # what the root command server needs, nothing else
            security_opt=["no-new-privileges"],
            detach=True,
        )

    def _message(self, request_id: int, request: dict) -> dict:
        return {"id": request_id, "cwd": WORKDIR, "output_limit": self.limits.output_limit, "env": AGENT_ENV, **request}

    def _send(self, request: dict) -> int:
        request_id = next(self._ids)
        try:
            self._live_channel().send(self._message(request_id, request))
        except ServerGone as gone:
            raise SandboxError(f"the command server in the sandbox is gone: {gone}") from gone
        return request_id

    def wait_ready(self) -> None:
        """Waits for the server's start and the start snapshot; raises SandboxError if either failed."""
        with self._lock:
            self._settle()

    def _settle(self) -> None:
        while self._pending:
            try:
                reply = self._live_channel().receive(time.monotonic() + START_TIMEOUT + self.backstop)
            except ServerGone as gone:
                raise SandboxError(f"the command server in the sandbox did not start: {gone}") from gone
            if reply.get("id") != self._pending.pop(0) or "error" in reply:
                raise SandboxError(f"the command server in the sandbox answered {reply!r}")
            if reply.get("returncode", 0) != 0:
                raise SandboxError(f"could not record the repository's start state: {reply['output'].strip()}")

    def _start_server(self) -> ServerChannel:
        """A second server, started by exec, for when the first stopped answering."""
        exec_id = transient_retry(self.client.api.exec_create)(
            self._live_container().id, SERVER_COMMAND, stdin=True, stdout=True, stderr=True, user="root", workdir=WORKDIR,
        )["Id"]
        channel = ServerChannel(transient_retry(self.client.api.exec_start)(exec_id, socket=True))
        self._ping(channel)
        return channel

    def _ping(self, channel: ServerChannel) -> None:
        try:
            reply = exchange(channel, {"id": next(self._ids), "op": "ping"}, 30)
        except ServerGone as gone:
            raise SandboxError(f"the command server in the sandbox did not start: {gone}") from gone
        if "pong" not in reply:
            raise SandboxError(f"the command server in the sandbox answered {reply!r}")

    def _live_container(self) -> Container:
        if self.container is None:
            raise SandboxError("the sandbox's container was never created")
        return self.container

    def _live_channel(self) -> ServerChannel:
        if self._channel is None:
            raise SandboxError("the sandbox is closed")
        return self._channel

    # -- the Sandbox protocol ----------------------------------------------------------------

    def execute(self, command: str, timeout: float | None = None) -> ExecResult:
        timeout = self.limits.command_timeout if timeout is None else timeout
        return self._run(command, timeout, self.limits.output_limit)

    def _run(self, command: str, timeout: float, output_limit: int) -> ExecResult:
        if self._closed or self._channel is None:
            raise SandboxError("the sandbox is closed")
        with self._lock:
            self._settle()
            try:
                message = self._message(next(self._ids), {"command": command, "timeout": timeout, "output_limit": output_limit})
                reply = exchange(self._channel, message, timeout + self.backstop)
            except ServerGone as gone:
                return self._recover(str(gone))
        return command_result(reply)

    def _recover(self, why: str) -> ExecResult:
        """The server died or hung: kill what the agent left running and start a fresh server."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        container = self._live_container()
        try:
            container.reload()
            if container.status != "running":
                raise SandboxError(f"the sandbox container stopped ({container.status}): {why}")
            container.exec_run(["pkill", "-KILL", "-u", str(AGENT_UID)], user="root")
            self._channel = self._start_server()
        except docker.errors.DockerException as exc:
            raise SandboxError(f"the sandbox became unusable: {why}; {exc}") from exc
        return ExecResult(output=f"the command did not finish and was killed ({why})", returncode=137, timed_out=True)

    def _release(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.container is not None:
            try:
                transient_retry(self.container.remove)(force=True)
            except docker.errors.NotFound:
                pass

    def __repr__(self) -> str:
        name = self.container.short_id if self.container is not None else "-"
        return f"DockerSandbox({str(self.repo)!r}, container={name}, closed={self._closed})"
