"""The sandbox image: use the tag if present, else build the Dockerfile, else import a debootstrapped rootfs."""
from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import docker
import docker.errors

from skillgraft.sandbox.base import SandboxUnavailable
from skillgraft.sandbox.image_names import IMAGE_TAG, METHODS
from skillgraft.sandbox.rootfs import AGENT_USER, PACKAGES, ImageBuildError, build_rootfs_tarball

BASE_IMAGE = "debian:bookworm-slim"
DOCKERFILE = Path(__file__).with_name("Dockerfile")
ROOTFS_TARBALL = "sandbox-rootfs-bookworm.tar"

# What the Dockerfile's non-FROM lines would set, given to `docker import` as changes.
IMPORT_CHANGES = [
    "ENV LANG=C.UTF-8",
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "WORKDIR /repo",
    'CMD ["sleep", "infinity"]',
    "LABEL skillgraft.image=sandbox",
]

Report = Callable[[str], None]


@dataclass(frozen=True)
class ImageOutcome:
    tag: str
    method: str  # "existing", "dockerfile" or "debootstrap"
    image_id: str
    seconds: float
    log: Path | None = None


def engine(client: docker.DockerClient | None = None) -> docker.DockerClient:
    """A client that has answered a ping, or SandboxUnavailable saying how to get one."""
    try:
        client = client or docker.from_env()
        client.ping()
        return client
    except (docker.errors.DockerException, OSError) as exc:
        raise SandboxUnavailable(engine_help(exc)) from exc


def engine_help(exc: BaseException) -> str:
    return (
        f"the Docker engine is not reachable ({exc}).\n"
        "  start it:  sudo dockerd --bridge=none --iptables=false &   (or: sudo systemctl start docker)\n"
        "  or point DOCKER_HOST at a running engine,\n"
        "  or run without Docker:  --sandbox bwrap"
    )


def image_exists(client: docker.DockerClient, tag: str = IMAGE_TAG) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def registry_reachable(client: docker.DockerClient, timeout: float = 5.0) -> bool:
    """True when the base image is local or a registry (a configured mirror or Docker Hub) answers."""
    if image_exists(client, BASE_IMAGE):
        return True
    mirrors = (client.info().get("RegistryConfig") or {}).get("Mirrors") or []
    for url in [*mirrors, "https://registry-1.docker.io"]:
        try:
            urllib.request.urlopen(url.rstrip("/") + "/v2/", timeout=timeout)
            return True
        except urllib.error.HTTPError:
            return True  # 401 is the registry asking for a token: it is there
        except (urllib.error.URLError, OSError):
            continue
    return False


def build_from_dockerfile(client: docker.DockerClient, tag: str, log: Path, report: Report) -> str:
    report(f"building {DOCKERFILE.name} from {BASE_IMAGE}")
    with DOCKERFILE.open("rb") as dockerfile, log.open("a") as sink:
        # Host networking: engines started with --bridge=none give build steps no network otherwise.
        for chunk in client.api.build(fileobj=dockerfile, tag=tag, rm=True, pull=True, network_mode="host", decode=True):
            if "error" in chunk:
                sink.write(chunk["error"] + "\n")
                raise ImageBuildError(f"docker build failed: {chunk['error'].strip()} (log: {log})")
            line = (chunk.get("stream") or chunk.get("status") or "").strip()
            if line:
                sink.write(line + "\n")
                report(f"docker build: {line[:120]}")
    return client.images.get(tag).id


def import_rootfs(client: docker.DockerClient, tarball: Path, tag: str, report: Report) -> str:
    report(f"importing {tarball.name} ({tarball.stat().st_size / 2**20:.0f} MiB) as {tag}")
    repository, _, version = tag.rpartition(":")
    # A real file: requests sends it with its length, streamed from disk rather than read into memory.
    with tarball.open("rb") as stream:
        client.api.import_image(src=stream, repository=repository, tag=version, changes=IMPORT_CHANGES)
    return client.images.get(tag).id


def verify(client: docker.DockerClient, tag: str) -> None:
    """A built image must run the tools tasks rely on as the agent user, with no network."""
    probe = "python3 -c 'import pytest' && git --version && patch --version && ps --version && id -u"
    try:
        out = client.containers.run(tag, ["bash", "-lc", probe], user=AGENT_USER, network_mode="none", remove=True)
    except docker.errors.ContainerError as exc:
        raise ImageBuildError(f"the built image {tag} is missing a tool: {exc}") from exc
    if out.decode().strip().splitlines()[-1] != "1000":
        raise ImageBuildError(f"the built image {tag} does not run as uid 1000")


def ensure_image(
    client: docker.DockerClient | None = None,
    tag: str = IMAGE_TAG,
    *,
    rebuild: bool = False,
    fresh_rootfs: bool = False,
    method: str = "auto",
    cache_dir: Path,
    report: Report = lambda message: None,
) -> ImageOutcome:
    """Returns the sandbox image, building it when missing or when rebuild is asked.

    fresh_rootfs also throws away the cached debootstrap tarball, which otherwise makes a rebuild
    an import of seconds instead of a bootstrap of minutes.
    """
    if method not in METHODS:
        raise ValueError(f"unknown build method {method!r}: choose one of {', '.join(METHODS)}")
    start = time.monotonic()
    client = engine(client)
    previous = client.images.get(tag).id if image_exists(client, tag) else None
    if previous and not rebuild:
        return ImageOutcome(tag, "existing", previous, 0.0)

    cache_dir = Path(cache_dir)  # the home's cache folder: the build log and the bootstrapped rootfs
    cache_dir.mkdir(parents=True, exist_ok=True)
    log = cache_dir / "sandbox-build.log"
    with log.open("a") as sink:
        sink.write(f"\n=== building {tag} ({time.strftime('%Y-%m-%d %H:%M:%S')}), packages: {' '.join(PACKAGES)}\n")

    if method == "auto":
        report("checking whether a registry is reachable")
        method = "auto-dockerfile" if registry_reachable(client) else "debootstrap"
    image_id = None
    if method in ("dockerfile", "auto-dockerfile"):
        try:
            image_id = build_from_dockerfile(client, tag, log, report)
        except (ImageBuildError, docker.errors.DockerException) as exc:
            if method == "dockerfile":
                raise ImageBuildError(f"docker build failed: {exc} (log: {log})") from exc
            # The registry answered but the build could not finish (no route to the Debian
            # mirror from build steps, a proxy in the way): the rootfs path may still work.
            report(f"docker build failed ({exc}); bootstrapping instead")
    if image_id is None:
        tarball = cache_dir / ROOTFS_TARBALL
        if fresh_rootfs or not tarball.is_file():
            build_rootfs_tarball(tarball, log, report)
        else:
            report(f"reusing cached rootfs {tarball}")
        image_id = import_rootfs(client, tarball, tag, report)
        method = "debootstrap"
    report("checking the image")
    verify(client, tag)
    if previous and previous != image_id:
        try:
            client.images.remove(previous)  # the replaced build would linger untagged
        except docker.errors.APIError:
            pass  # still used by a container; the engine keeps it until that is gone
    return ImageOutcome(tag, method.removeprefix("auto-"), image_id, time.monotonic() - start, log)
