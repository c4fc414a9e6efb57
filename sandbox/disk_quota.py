"""How large a container's size quota must be for it to write a given amount, and no more.

Engines differ in what the quota counts. XFS project quotas (overlay2) and btrfs simple quotas
count only what the container writes; btrfs's full quota groups also count the image's files the
container shares. One probe per engine and image finds out which: a container whose quota is
smaller than the image is refused only where the image counts.
"""
from __future__ import annotations

import threading

import docker
import docker.errors

from skillgraft.sandbox.base import parse_bytes

PROBE = "16m"  # smaller than any sandbox image
_counts_image: dict[tuple[str, str], bool] = {}
_lock = threading.Lock()


def counts_image(client: docker.DockerClient, tag: str) -> bool:
    key = (str(client.api.base_url), tag)
    with _lock:
        if key not in _counts_image:
            try:
                client.containers.create(tag, command=["true"], storage_opt={"size": PROBE},
                                         network_disabled=True).remove(force=True)
                _counts_image[key] = False
            except docker.errors.APIError as exc:
                if "quota exceeded" not in str(exc).lower():
                    raise  # the engine cannot bound a container at all: the caller says so
                _counts_image[key] = True
        return _counts_image[key]


def disk_quota(client: docker.DockerClient, tag: str, writable: str | int) -> int:
    """The size quota of a container from image `tag` that may write `writable` bytes."""
    image = int(client.images.get(tag).attrs.get("Size", 0)) if counts_image(client, tag) else 0
    return image + parse_bytes(writable)
