"""`skillgraft ui`: a read-only web app over the store, rendered on the server.

Pages: skills (search, versions, lineage, diffs), adapters (global history, ΔW per layer),
trajectories (steps, patch, verdict), sessions (learning curves) and CycleQD runs (archives).
Everything it needs ships in this package: templates, one stylesheet, no script from elsewhere.
"""
from skillgraft.ui.app import build_app

__all__ = ["build_app"]
