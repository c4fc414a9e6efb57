"""`skillgraft learn`."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds the `learn` command to the root app."""
