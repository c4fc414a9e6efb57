"""`skillgraft adapters …`: compiled skills, the global adapter's history, checkpoints; rollback."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Optional

import typer
from rich.table import Table

from skillgraft.commands.common import HomeOption, JsonOption, StoreOption, console
from skillgraft.commands.store import open_store, store_errors
from skillgraft.skills.errors import NotFound
from skillgraft.skills.kinds import AdapterKind

if TYPE_CHECKING:
    from skillgraft.skills.schema import Adapter

app = typer.Typer(help="Inspect LoRA adapters (compiled skills, global versions, checkpoints) and roll the global one back.",
                  no_args_is_help=True)


def _describe(a: Adapter) -> str:
    p = a.provenance or {}
    if a.skill_version_id is not None:
        return f"skill version {a.skill_version_id} via {a.hypernet_ckpt or 'hypernet'}"
    if p.get("method") == "rollback":
        return f"rollback to v{p.get('to_version')}"
    if "combined" in p:
        parts = ", ".join(f"#{c.get('adapter_id')}×{c.get('weight', 1):g}" for c in p["combined"] if isinstance(c, dict))
        return f"{p.get('method', 'merge')} of {parts}"
    return ", ".join(f"{k}={v}" for k, v in list(p.items())[:3])


@app.command("ls")
def ls(
    kind: Optional[AdapterKind] = typer.Option(None, "--kind", help="Only skill, global or checkpoint adapters."),
    name: Optional[str] = typer.Option(None, "--name", help="Only adapters with this name (e.g. global)."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """List adapters: name and version, kind, rank/alpha, base model and what made them."""
    rows = open_store(home, store).adapters(kind=kind.value if kind else None, name=name)
    if as_json:
        print(json.dumps([a.model_dump(mode="json") for a in rows], indent=2))
        return
    if not rows:
        console.print("no adapters yet")
        return
    table = Table("id", "name", "ver", "kind", "rank", "alpha", "base", "made from", "created")
    for a in rows:
        table.add_row(str(a.id), a.name, f"v{a.version}", a.kind, str(a.rank), f"{a.alpha:g}", a.base_fingerprint[:12],
                      _describe(a), a.created_at.strftime("%Y-%m-%d %H:%M"))
    console.print(table)


@app.command()
def show(
    adapter: str = typer.Argument(..., help="Adapter id, or NAME[:VERSION] (e.g. global, global:3)."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Show one adapter: its record, provenance and the files of its PEFT folder."""
    st = open_store(home, store)
    with store_errors():
        a = _resolve(st, adapter)
    folder = st.artifacts.path(a.artifact_hash)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    if as_json:
        print(json.dumps({**a.model_dump(mode="json"), "path": str(folder), "files": files}, indent=2))
        return
    console.print(f"[bold]{a.name}[/] v{a.version}  [dim]id {a.id} · {a.kind} · {a.created_at:%Y-%m-%d %H:%M}[/]")
    console.print(f"rank {a.rank}, alpha {a.alpha:g}, targets {', '.join(a.target_modules) or '-'}")
    console.print(f"base model fingerprint {a.base_fingerprint}")
    if a.parent_id:
        console.print(f"parent adapter id {a.parent_id}")
    console.print("provenance: " + json.dumps(a.provenance, indent=2))
    console.print(f"files ({folder}): " + (", ".join(files) if files else "[bold red]missing[/]"))


def _resolve(st, ref: str) -> Adapter:  # noqa: ANN001
    if ref.isdigit():
        return st.adapter(int(ref))
    name, _, version = ref.partition(":")
    rows = st.adapters(name=name)
    if version:
        rows = [a for a in rows if str(a.version) == version]
    if not rows:
        raise NotFound(f"no adapter {ref!r}")
    return rows[-1]


@app.command()
def rollback(
    name: str = typer.Argument("global", help="Which global adapter (normally 'global')."),
    to: int = typer.Option(..., "--to", help="Version whose weights become current again."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Make an earlier global version current again, as a new version (history is kept)."""
    st = open_store(home, store)
    with store_errors():
        row = st.rollback_global(to, name=name)
    if as_json:
        print(json.dumps(row.model_dump(mode="json"), indent=2))
        return
    console.print(f"{name} is now v{row.version} (the weights of v{to})")
