"""`skillgraft trajectories …`."""
from __future__ import annotations

import typer

app = typer.Typer(help="trajectories commands.", no_args_is_help=True)
