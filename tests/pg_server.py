"""A throwaway PostgreSQL server for tests: initdb in a temp folder, listening on loopback only.

Import the fixtures into a test module (`from pg_server import postgres_server, pg_url`).
`pg_url` gives each test a fresh database on the session's server. As root, the server runs
as the `postgres` (or `nobody`) user, because PostgreSQL refuses to run as root.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Iterator, Optional

import pytest


def find_pg_bin() -> Optional[Path]:
    candidates = [Path(p).parent for p in (shutil.which("pg_ctl"), shutil.which("initdb")) if p]
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user() -> Optional[str]:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


class PostgresServer:
    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.user = _server_user()
        self.root = Path(tempfile.mkdtemp(prefix="skillgraft-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        os.chmod(self.root, 0o700)

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=self.root)

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.root} -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", opts, "-w", "-t", "60", "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True) as conn:
            conn.execute(statement)

    def create_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    # On CI the test command installs both, so their absence is a broken set-up, not a skip.
    missing = pytest.fail if os.environ.get("CI") else pytest.skip
    bin_dir = find_pg_bin()
    if bin_dir is None:
        missing("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing("psycopg is not installed (pip install 'psycopg[binary]')")
    server = PostgresServer(bin_dir)
    try:
        server.start()
    except subprocess.CalledProcessError as exc:
        server.stop()
        raise RuntimeError(f"PostgreSQL did not start: {exc.stderr or exc.stdout}") from exc
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)
