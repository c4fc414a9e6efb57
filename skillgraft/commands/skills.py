"""`skillgraft skills …`."""
from __future__ import annotations

import typer

app = typer.Typer(help="skills commands.", no_args_is_help=True)
