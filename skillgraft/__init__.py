"""skillgraft: a coding agent whose skills evolve while it works."""

__version__ = "0.1.0"
