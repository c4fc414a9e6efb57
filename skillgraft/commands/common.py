"""Options and helpers shared by the sub-commands."""
from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console

from skillgraft.settings import Settings, load_settings

console = Console()
err_console = Console(stderr=True)

HomeOption = typer.Option(None, "--home", envvar="SKILLGRAFT_HOME", help="Folder holding all state (default ~/.skillgraft).")
StoreOption = typer.Option(None, "--store", envvar="SKILLGRAFT_STORE", help="SQLAlchemy URL of the store (default: SQLite file in the home folder).")
JsonOption = typer.Option(False, "--json", help="Print JSON for scripts instead of tables.")


def settings_from(home: Optional[str], store: Optional[str]) -> Settings:
    return load_settings(home, store)


def fail(message: str, code: int = 1) -> "typer.Exit":
    """Prints a one-line error and returns the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)
