"""A Debian rootfs for the sandbox image, bootstrapped with debootstrap when no registry is reachable."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from skillgraft.sandbox.apt_sources import AptSource, debian_mirror
from skillgraft.sandbox.base import SandboxError

SUITE = "bookworm"
PACKAGES = ("python3", "python3-pytest", "git", "patch", "procps")
AGENT_USER = "agent"
AGENT_UID = 1000

Report = Callable[[str], None]

# Git inside the sandbox commits as the agent and trusts /repo whoever owns it.
GITCONFIG = """[user]
\tname = agent
\temail = agent@sandbox
[init]
\tdefaultBranch = main
[safe]
\tdirectory = *
[advice]
\tdetachedHead = false
"""

# Files a minimal container does not need; removing them roughly halves the image.
TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info")


class ImageBuildError(SandboxError):
    """The sandbox image could not be built; the message says which step failed and where the log is."""


def _privileged(argv: Sequence[str]) -> list[str]:
    """debootstrap and chroot need root; use passwordless sudo when not root."""
    if os.geteuid() == 0:
        return list(argv)
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n", *argv]
    raise ImageBuildError("bootstrapping the sandbox rootfs needs root: run as root or with passwordless sudo")


def run_logged(argv: Sequence[str], log: Path, report: Report, step: str) -> None:
    """Runs a command, appending its output to the log and passing each line to report."""
    report(step)
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(argv)}\n")
        sink.flush()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            sink.write(line)
            sink.flush()
            if line.strip():
                report(f"{step}: {line.strip()[:120]}")
        code = proc.wait()
    if code != 0:
        raise ImageBuildError(f"{step} failed (exit {code}); see {log}")


def bootstrap(target: Path, log: Path, report: Report, mirror: AptSource | None = None) -> None:
    """debootstrap a minbase Debian with the sandbox packages and configure the agent user."""
    if not shutil.which("debootstrap"):
        raise ImageBuildError("debootstrap is not installed: apt-get install debootstrap (or make a registry reachable)")
    mirror = mirror or debian_mirror(SUITE)
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", "--components=main"]
    if mirror.signed_by and Path(mirror.signed_by).is_file():
        argv.append(f"--keyring={mirror.signed_by}")
    run_logged(_privileged([*argv, SUITE, str(target), mirror.uri]), log, report, f"debootstrap {SUITE} from {mirror.uri}")
    configure(target, log, report)


def configure(target: Path, log: Path, report: Report) -> None:
    """Adds the non-root agent user, /repo, system git config, and trims caches."""
    run_logged(
        _privileged(["useradd", "--root", str(target), "--create-home", "--uid", str(AGENT_UID), "--user-group", "--shell", "/bin/bash", AGENT_USER]),
        log,
        report,
        "adding user agent",
    )
    root = shlex.quote(str(target))
    script = (
        f"set -e; mkdir -p {root}/repo; chown {AGENT_UID}:{AGENT_UID} {root}/repo; "
        f"cat > {root}/etc/gitconfig; "
        + "; ".join(f"rm -rf {root}/{path}; mkdir -p {root}/{path}" for path in TRIM)
    )
    report("configuring rootfs")
    result = subprocess.run(_privileged(["sh", "-c", script]), input=GITCONFIG, text=True, capture_output=True)
    with log.open("a") as sink:
        sink.write(result.stdout + result.stderr)
    if result.returncode != 0:
        raise ImageBuildError(f"configuring the rootfs failed; see {log}")


def pack(target: Path, tarball: Path, log: Path, report: Report) -> Path:
    """Tars the rootfs to tarball atomically (written beside it, then renamed)."""
    partial = tarball.with_suffix(".partial")
    run_logged(
        _privileged(["tar", "--numeric-owner", "--xattrs", "-C", str(target), "-cf", str(partial), "."]),
        log,
        report,
        "packing rootfs",
    )
    if os.geteuid() != 0:
        subprocess.run(_privileged(["chown", f"{os.getuid()}:{os.getgid()}", str(partial)]), check=True)
    os.replace(partial, tarball)
    return tarball


def build_rootfs_tarball(tarball: Path, log: Path, report: Report, mirror: AptSource | None = None) -> Path:
    """Bootstraps a fresh rootfs in a scratch folder and leaves only the tarball behind."""
    tarball.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="skillgraft-rootfs-", dir=tarball.parent))
    target = scratch / "rootfs"
    try:
        bootstrap(target, log, report, mirror)
        return pack(target, tarball, log, report)
    finally:
        report("removing scratch rootfs")
        subprocess.run(_privileged(["rm", "-rf", "--one-file-system", str(scratch)]), capture_output=True)
