"""`skillgraft sandbox …`."""
from __future__ import annotations

import typer

app = typer.Typer(help="sandbox commands.", no_args_is_help=True)
