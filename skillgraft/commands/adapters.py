"""`skillgraft adapters …`."""
from __future__ import annotations

import typer

app = typer.Typer(help="adapters commands.", no_args_is_help=True)
