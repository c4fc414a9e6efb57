"""Where a command's episodes run when it is given `--ray`: workers on a Ray cluster, each
building the same model the command names, from the node's own installation and models folder.

    with cluster_episodes(settings, ClusterOptions("auto", workers=4), model="skillworld") as runner:
        ...  # runner.run_all(jobs), or None when --ray was not given
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from skillgraft.jobs.errors import BAD_INPUT, FAILED, JobError
from skillgraft.sandbox.base import SandboxKind
from skillgraft.settings import Settings

if TYPE_CHECKING:
    from skillgraft.agent.cluster import RayEpisodes
    from skillgraft.agent.cluster.pool import Tally


@dataclass(frozen=True)
class ClusterOptions:
    address: str | None = None  # None: no cluster, episodes run in this process
    workers: int = 2  # actors, each with its own model, one episode at a time
    retries: int = 2  # more tries of an episode whose worker died
    sandbox: SandboxKind = SandboxKind.docker
    image: str | None = None


def join_cluster(settings: Settings, options: ClusterOptions) -> None:
    """Joins the cluster and checks that it can share the store (bad input otherwise): done
    first, so that a wrong address fails before any model is built here."""
    if options.address is None:
        return
    from skillgraft.agent.cluster import ClusterError, check_store, connect

    try:
        check_store(settings.store_url, connect(options.address))
    except ClusterError as exc:
        raise JobError(str(exc), BAD_INPUT) from None


@contextmanager
def cluster_episodes(settings: Settings, options: ClusterOptions, model: str,
                     on_event: Callable[[Tally], None] = lambda tally: None, *,
                     temperature: float | None = None) -> Iterator[RayEpisodes | None]:
    """The cluster's episode runner for `model` (None without an address); its workers are
    stopped on the way out. A cluster that cannot be joined or cannot share the store is bad
    input; one that loses every worker mid-run fails the job."""
    if options.address is None:
        yield None
        return
    if model == "expert":
        raise JobError("the expert is scripted per task and runs here; drop --ray", BAD_INPUT)
    join_cluster(settings, options)
    from skillgraft.agent.cluster import ClusterError, RayEpisodes
    from skillgraft.model_defaults import load_model

    factory = partial(load_model, settings, model, progress=False, temperature=temperature)
    try:
        runner = RayEpisodes(factory, options.workers, sandbox=options.sandbox.value, image=options.image,
                             retries=options.retries, on_event=on_event)
    except ClusterError as exc:
        raise JobError(str(exc), FAILED) from None
    try:
        yield runner
    except ClusterError as exc:
        raise JobError(str(exc), FAILED) from None
    finally:
        runner.close()
