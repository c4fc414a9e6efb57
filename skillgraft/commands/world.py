"""`skillgraft world …`."""
from __future__ import annotations

import typer

app = typer.Typer(help="world commands.", no_args_is_help=True)
