"""Removing sandbox containers that outlived the run that made them."""
from __future__ import annotations

from dataclasses import dataclass

import docker
import docker.errors

from skillgraft.sandbox.base import LABEL
from skillgraft.sandbox.image import engine
from skillgraft.sandbox.lifecycle import OWNER_HOST, OWNER_PID, owner_alive


@dataclass(frozen=True)
class Leftover:
    container_id: str
    name: str
    status: str
    owner: str  # "pid@host"
    reason: str  # why it goes, or why it stays
    removed: bool


def sandbox_containers(client: docker.DockerClient) -> list:
    # A run that ends between the engine's listing and the look at each container removes its
    # sandbox meanwhile: that one is gone, not an error.
    return client.containers.list(all=True, filters={"label": f"{LABEL}=1"}, ignore_removed=True)


def reap(client: docker.DockerClient | None = None, *, everything: bool = False, dry_run: bool = False) -> list[Leftover]:
    """Removes labelled containers whose owning process is gone (all of them with everything).

    A container made on another host is left alone unless everything is asked: from here its
    owner cannot be seen, and it may be alive.
    """
    client = engine(client)
    report = []
    for container in sandbox_containers(client):
        labels = container.labels
        alive = owner_alive(labels)
        if everything:
            reason, go = "removing all sandboxes", True
        elif alive is None:
            reason, go = "made on another host; kept (use --all)", False
        elif alive:
            reason, go = "owner still running; kept", False
        else:
            reason, go = "owner process is gone", True
        removed = False
        if go and not dry_run:
            try:
                container.remove(force=True)
                removed = True
            except docker.errors.NotFound:
                removed = True  # its owner or another reaper removed it meanwhile
            except docker.errors.APIError as exc:
                # Several reapers at once (each worker of a cluster reaps its host as it starts):
                # the engine refuses a second removal of a container while the first is under way.
                if exc.status_code != 409:
                    raise
                reason, removed = f"{reason}; another reaper was already removing it", True
        report.append(
            Leftover(
                container_id=container.id,
                name=container.name,
                status=container.status,
                owner=f"{labels.get(OWNER_PID, '?')}@{labels.get(OWNER_HOST, '?')}",
                reason=reason,
                removed=removed,
            )
        )
    return report
