"""`skillgraft store …`: is every row's file there, is every file some row's; clear out the rest."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Optional

import typer
from rich.table import Table

from skillgraft.commands.common import HomeOption, JsonOption, StoreOption, console, fail, settings_from
from skillgraft.skills.errors import NotFound, StoreError

if TYPE_CHECKING:
    from skillgraft.skills.embedder import Embedder
    from skillgraft.skills.store import Store

app = typer.Typer(help="Check and clean the store (database rows against artifact files).", no_args_is_help=True)


def open_store(home: Optional[str], store: Optional[str], embedder: Optional[Embedder] = None) -> Store:
    """The store the settings name; an unreachable database is reported, not dumped as a traceback."""
    from skillgraft.skills.store import Store  # SQLAlchemy is loaded by the commands that use it

    settings = settings_from(home, store)
    try:
        return Store(settings.store_url, settings.artifacts, embedder=embedder)
    except Exception as exc:  # noqa: BLE001 - any driver error means the same thing to a person
        raise fail(f"cannot open the store at {settings.store_url}: {exc}", code=2) from exc


@contextmanager
def store_errors() -> Iterator[None]:
    """A name or version the store does not hold is bad input (exit 2); any other store error exits 1."""
    try:
        yield
    except NotFound as exc:
        raise fail(str(exc), code=2) from exc
    except StoreError as exc:
        raise fail(str(exc)) from exc


@app.command()
def check(
    verify: bool = typer.Option(False, "--verify", help="Also re-hash every artifact's files (reads them all)."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Find rows whose files are missing or altered, and files that no row names; close sessions
    whose process was killed as interrupted (the next `learn` of the same run carries them on).

    Exit status 1 when any row lacks its files (or, with --verify, they changed); orphaned
    files and partial writes are only reported: `store gc` removes them.
    """
    st = open_store(home, store)
    report = st.check(verify=verify)
    if as_json:
        print(json.dumps({
            "ok": report.ok, "rows": report.rows, "artifacts": report.artifacts,
            "missing": [m.__dict__ for m in report.missing], "corrupt": [m.__dict__ for m in report.corrupt],
            "orphans": report.orphans, "leftovers": [str(p) for p in report.leftovers],
            "interrupted_sessions": report.interrupted,
        }, indent=2))
    else:
        console.print(f"{report.rows} rows name artifacts; {report.artifacts} artifacts on disk")
        problems = [("missing", m) for m in report.missing] + [("altered", m) for m in report.corrupt]
        if problems:
            table = Table("problem", "table", "row", "artifact", "detail", title="rows without their files")
            for kind, m in problems:
                table.add_row(kind, m.table, str(m.row_id), m.content_hash[:16], m.detail)
            console.print(table)
        if report.orphans:
            console.print(f"[yellow]{len(report.orphans)} artifacts no row names[/] (skillgraft store gc removes them)")
        if report.leftovers:
            console.print(f"[yellow]{len(report.leftovers)} partial writes in {st.artifacts.tmp}[/]")
        if report.interrupted:
            console.print(f"[yellow]closed {len(report.interrupted)} sessions whose process is gone as interrupted[/] "
                          f"(ids {', '.join(map(str, report.interrupted))}; the next learn of the same run carries on)")
        console.print("[green]ok[/]" if report.ok else "[bold red]store has rows without their files[/]")
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def gc(
    grace: float = typer.Option(3600.0, "--grace", help="Keep unreferenced files younger than this many seconds "
                                "(a writer may be about to commit the row naming them)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be removed."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Remove artifacts that no row names, and partial writes left by interrupted runs."""
    st = open_store(home, store)
    with store_errors():
        report = st.gc(grace_s=grace, dry_run=dry_run)
    if as_json:
        print(json.dumps({"removed": report.removed, "leftovers": [str(p) for p in report.leftovers],
                          "kept_recent": report.kept_recent, "freed_bytes": report.freed_bytes, "dry_run": dry_run}, indent=2))
        return
    verb = "would remove" if dry_run else "removed"
    console.print(f"{verb} {len(report.removed)} artifacts and {len(report.leftovers)} partial writes, "
                  f"{report.freed_bytes / 1e6:.1f} MB; kept {report.kept_recent} younger than {grace:g} s")
