"""Joining a Ray cluster, and refusing a store the cluster cannot share."""
from __future__ import annotations

import logging
import os
import socket

ADDRESS_HELP = ("auto: the cluster this machine joined with `ray start` (or $RAY_ADDRESS); local: a one-machine "
                "cluster started for this command; or the head's address, host:port or ray://host:10001")


class ClusterError(RuntimeError):
    """No cluster to run on, no worker left on it, or a store its nodes cannot share."""


def connect(address: str) -> int:
    """Joins (or, for "local", starts) the cluster; returns how many nodes are alive in it."""
    if not address or not address.strip():
        raise ClusterError(f"--ray needs an address: {ADDRESS_HELP}")
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray installed: pip install 'skillgraft[ray]'") from None
    _answers(address.strip())
    # A cluster set up for skillgraft's work needs no calls home; a user's own setting wins.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        try:
            ray.init(address=address.strip(), include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ClusterError(f"cannot join a Ray cluster at {address!r}: {exc}. {ADDRESS_HELP}") from exc
    return sum(1 for node in ray.nodes() if node.get("Alive"))


def _answers(address: str, timeout: float = 5.0) -> None:
    """A head's host:port must take a connection: Ray itself would keep retrying for minutes."""
    if address in ("auto", "local") or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except ValueError:
        raise ClusterError(f"--ray {address!r}: the port must be a number. {ADDRESS_HELP}") from None
    except OSError as exc:
        raise ClusterError(f"no Ray head answers at {address} ({exc.strerror or exc}); is `ray start --head` running "
                           f"there? {ADDRESS_HELP}") from None


def check_store(store_url: str, nodes: int) -> None:
    """A SQLite file belongs to one machine: a cluster of several nodes records into a server."""
    if nodes > 1 and store_url.startswith("sqlite"):
        raise ClusterError(
            f"the Ray cluster has {nodes} nodes, but the store is a SQLite file ({store_url}), which only one machine "
            "can hold safely; give a PostgreSQL store every node can reach: --store postgresql+psycopg://USER@HOST/DB "
            "(or $SKILLGRAFT_STORE)")
