"""`--ray ADDRESS` for the benches that run episodes: the same episodes on a Ray cluster's
workers instead of this process's threads. A bench's own store is a temporary file that only
its driver writes, so no store check applies here."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

HELP = "run the episodes on this Ray cluster (auto, local or host:port), --workers actors per model"


def add_ray_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ray", default=None, help=HELP)


def ray_runner(address: str | None, factory: Callable[[], Any], workers: int) -> Any:
    """RayEpisodes for `factory` on the cluster at `address`, or None without one."""
    if address is None:
        return None
    from skillgraft.agent.cluster import RayEpisodes, connect

    connect(address)
    return RayEpisodes(factory, workers)
