"""`skillgraft evolve …`."""
from __future__ import annotations

import typer

app = typer.Typer(help="evolve commands.", no_args_is_help=True)
