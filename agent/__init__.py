"""The coding agent: task specs, the loop, model backends and trajectories."""
