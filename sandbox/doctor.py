"""What this machine has and lacks for running sandboxes, with how to fix each gap."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from skillgraft.sandbox.base import SandboxUnavailable
from skillgraft.sandbox.disk_quota import counts_image
from skillgraft.sandbox.image import IMAGE_TAG, engine, image_exists


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    needed: bool = True  # False: only matters for one way of doing things


def check_engine() -> tuple[Check, docker.DockerClient | None]:
    try:
        client = engine()
    except SandboxUnavailable as exc:
        return Check("docker engine", False, str(exc).splitlines()[0],
                     "sudo dockerd --bridge=none --iptables=false &  (or: sudo systemctl start docker; or use --sandbox bwrap)"), None
    version = client.version()
    return Check("docker engine", True, f"Docker {version.get('Version')} (API {version.get('ApiVersion')})"), client


def check_image(client: docker.DockerClient | None, tag: str = IMAGE_TAG) -> Check:
    if client is None:
        return Check("sandbox image", False, "no engine to ask", "start the engine first")
    if image_exists(client, tag):
        image = client.images.get(tag)
        return Check("sandbox image", True, f"{tag} ({image.short_id}, {image.attrs.get('Size', 0) / 2**20:.0f} MiB)")
    return Check("sandbox image", False, f"{tag} is not built", "skillgraft sandbox build")


def check_disk_limit(client: docker.DockerClient | None, tag: str = IMAGE_TAG) -> Check:
    """Whether the engine can bound a container's disk (btrfs with quotas, or XFS with pquota)."""
    if client is None or not image_exists(client, tag):
        return Check("sandbox disk limit", False, "no engine or image to try it with", "start the engine and build the image first")
    try:
        counts_image(client, tag)  # creates a bounded container; an engine that cannot bound one refuses
    except docker.errors.APIError as exc:
        root = client.info().get("DockerRootDir", "?")
        return Check("sandbox disk limit", False, f"the engine cannot bound a container's disk: {exc.explanation or exc}",
                     f"run dockerd with --data-root on btrfs with quotas (scripts/setup.sh does), or on XFS mounted "
                     f"with pquota; today's data root: {root}")
    return Check("sandbox disk limit", True, "each container's writable layer gets the task's disk limit")


def check_bwrap() -> Check:
    path = shutil.which("bwrap")
    if not path:
        return Check("bubblewrap", False, "bwrap not found", "sudo apt-get install bubblewrap", needed=False)
    with tempfile.TemporaryDirectory() as scratch:
        probe = subprocess.run(
            # What a sandbox uses: the namespaces, a tmpfs of bounded size, the server as pid 1.
            [path, "--ro-bind", "/", "/", "--bind", scratch, "/mnt", "--unshare-user", "--unshare-pid", "--unshare-net",
             "--proc", "/proc", "--dev", "/dev", "--size", str(2**20), "--tmpfs", "/tmp", "--as-pid-1",
             "--die-with-parent", "true"],
            capture_output=True, text=True,
        )
    if probe.returncode != 0:
        return Check("bubblewrap", False, f"{path} cannot create a sandbox: {probe.stderr.strip()}",
                     "sudo sysctl -w kernel.unprivileged_userns_clone=1 (or run as root)", needed=False)
    return Check("bubblewrap", True, f"{path} works (user, pid and network namespaces, a bounded tmpfs)", needed=False)


def check_debootstrap(client: docker.DockerClient | None) -> Check:
    has_image = client is not None and image_exists(client)
    path = shutil.which("debootstrap")
    if path:
        return Check("debootstrap", True, f"{path} (builds the image when no registry is reachable)", needed=False)
    return Check("debootstrap", False, "not installed" + ("; not needed while the image exists" if has_image else ""),
                 "sudo apt-get install debootstrap", needed=not has_image)


def check_cache(cache_dir: Path) -> Check:
    tarball = cache_dir / "sandbox-rootfs-bookworm.tar"
    if tarball.is_file():
        return Check("rootfs cache", True, f"{tarball} ({tarball.stat().st_size / 2**20:.0f} MiB)", needed=False)
    return Check("rootfs cache", False, f"no cached rootfs in {cache_dir}", "skillgraft sandbox build makes one when it bootstraps", needed=False)


def diagnose(cache_dir: Path) -> list[Check]:
    engine_check, client = check_engine()
    return [engine_check, check_image(client), check_disk_limit(client), check_bwrap(), check_debootstrap(client),
            check_cache(cache_dir)]
