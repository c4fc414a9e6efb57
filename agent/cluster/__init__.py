"""Episodes on a Ray cluster: one actor per worker keeps its model loaded and runs episodes in
sandboxes on its own node; the driver decides the runs and records them, as in a local run.

    check_store(store_url, connect("auto"))  # a cluster of several nodes records into a server
    runner = RayEpisodes(model_factory, workers=4)

Nothing here is imported unless `--ray` is given, so Ray stays an optional dependency.
"""
from skillgraft.agent.cluster.connect import ClusterError, check_store, connect
from skillgraft.agent.cluster.pool import RayEpisodes

__all__ = ["ClusterError", "RayEpisodes", "check_store", "connect"]
