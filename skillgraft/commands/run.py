"""`skillgraft run`."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds the `run` command to the root app."""
