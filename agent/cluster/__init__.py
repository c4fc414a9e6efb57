"""Episodes on a Ray cluster: one actor per worker keeps its model loaded and runs episodes in
sandboxes on its own node; the driver decides the runs and records them, as in a local run.

    runner = RayEpisodes.start("auto", model_factory, workers=4, store_url=url)

Nothing here is imported unless `--ray` is given, so Ray stays an optional dependency.
"""
from skillgraft.agent.cluster.connect import ClusterError, check_store, connect
from skillgraft.agent.cluster.pool import RayEpisodes

__all__ = ["ClusterError", "RayEpisodes", "check_store", "connect"]
