"""`skillgraft store …`."""
from __future__ import annotations

import typer

app = typer.Typer(help="store commands.", no_args_is_help=True)
