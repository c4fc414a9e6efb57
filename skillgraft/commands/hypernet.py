"""`skillgraft hypernet …` and `skillgraft compile`."""
from __future__ import annotations

import typer

app = typer.Typer(help="Train and inspect the hypernetwork that compiles skill text into LoRA adapters.", no_args_is_help=True)


def register_compile(root: typer.Typer) -> None:
    """Adds `skillgraft compile` to the root app."""
