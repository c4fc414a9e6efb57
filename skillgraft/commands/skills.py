"""`skillgraft skills …`: list, read, trace, compare, find, import and export skills."""
from __future__ import annotations

import difflib
import json
import threading
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table
from rich.tree import Tree

from skillgraft.commands.common import HomeOption, JsonOption, StoreOption, console, fail, settings_from
from skillgraft.commands.store import open_store, store_errors
from skillgraft.skills import skillmd
from skillgraft.skills.errors import SkillFormatError, StoreError

if TYPE_CHECKING:
    from skillgraft.skills.schema import SkillVersion

app = typer.Typer(help="Inspect and manage text skills (SKILL.md folders) and their versions.", no_args_is_help=True)


class SortKey(str, Enum):
    name = "name"
    score = "score"
    uses = "uses"
    recency = "recency"


def _version_json(v: SkillVersion, with_text: bool = False) -> dict:
    return v.model_dump(mode="json", exclude=set() if with_text else {"text", "body"})


def _when(dt) -> str:  # noqa: ANN001
    return dt.strftime("%Y-%m-%d %H:%M") if dt else "-"


@app.command("ls")
def ls(
    sort: SortKey = typer.Option(SortKey.name, "--sort", "-s", help="Order by name, score (best first), uses (most first) or recency (newest change first)."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", help="Show at most this many skills."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """List skills with their latest version, uses, score and last change."""
    rows = open_store(home, store).skill_summaries()
    keys = {
        SortKey.name: lambda r: r.name,
        SortKey.score: lambda r: (r.score is None, -(r.score or 0.0), r.name),
        SortKey.uses: lambda r: (-r.uses, r.name),
        SortKey.recency: lambda r: (-r.updated_at.timestamp(), r.name),
    }
    rows = sorted(rows, key=keys[sort])[:limit]
    if as_json:
        print(json.dumps([{**r.__dict__, "updated_at": r.updated_at.isoformat(),
                           "last_used": r.last_used.isoformat() if r.last_used else None} for r in rows], indent=2))
        return
    if not rows:
        console.print("no skills yet: add some with `skillgraft skills import PATH`")
        return
    table = Table("skill", "ver", "origin", "uses", "score", "changed", "description")
    for r in rows:
        score = f"{r.score:.2f}" if r.score is not None else "-"
        table.add_row(r.name, f"v{r.version}/{r.versions}", r.origin, str(r.uses), score, _when(r.updated_at),
                      escape(r.description[:70] + ("…" if len(r.description) > 70 else "")))
    console.print(table)


@app.command()
def show(
    name: str = typer.Argument(..., help="Skill name."),
    version: Optional[int] = typer.Option(None, "--version", "-v", help="Version number (default: latest)."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Print one version of a skill: where it came from, its scores, its SKILL.md and its files."""
    st = open_store(home, store)
    with store_errors():
        v = st.skill_version(name, version)
    resources = st.resources_path(v)
    files = sorted(p.relative_to(resources).as_posix() for p in resources.rglob("*") if p.is_file()) if resources else []
    score = st.version_scores([v.id]).get(v.id)
    if as_json:
        print(json.dumps({**_version_json(v, with_text=True), "files": files,
                          "score": score[0] if score else None, "episodes": score[1] if score else 0}, indent=2))
        return
    parent = st.version(v.parent_id) if v.parent_id else None
    console.print(f"[bold]{v.skill_name}[/] v{v.number}  [dim]id {v.id} · {v.origin} · {_when(v.created_at)} · {v.content_hash[:12]}[/]")
    if parent:
        console.print(f"parent: v{parent.number}" + (f" · from trajectory {v.trajectory_id}" if v.trajectory_id else ""))
    if score:
        console.print(f"score: {score[0]:.3f} over {score[1]} episodes")
    console.print(Syntax(v.text, "markdown", word_wrap=True))
    if files:
        console.print("files: " + ", ".join(files))


@app.command()
def history(
    name: str = typer.Argument(..., help="Skill name."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Show the lineage tree of a skill: each version under its parent, with origin and score."""
    st = open_store(home, store)
    versions = st.versions(name)
    if not versions:
        raise fail(f"no skill {name!r}", code=2)
    scores = st.version_scores([v.id for v in versions])
    if as_json:
        by_id = {v.id: v for v in versions}
        print(json.dumps([{
            "number": v.number, "id": v.id, "origin": v.origin, "created_at": v.created_at.isoformat(),
            "parent": by_id[v.parent_id].number if v.parent_id in by_id else None,
            "trajectory_id": v.trajectory_id, "run_id": v.run_id,
            "score": scores[v.id][0] if v.id in scores else None, "episodes": scores[v.id][1] if v.id in scores else 0,
        } for v in versions], indent=2))
        return
    children: dict[Optional[int], list[SkillVersion]] = {}
    ids = {v.id for v in versions}
    for v in versions:
        children.setdefault(v.parent_id if v.parent_id in ids else None, []).append(v)
    latest = versions[-1].id

    def label(v: SkillVersion) -> str:
        parts = [f"[bold]v{v.number}[/]", f"[cyan]{v.origin}[/]", _when(v.created_at)]
        if v.id in scores:
            parts.append(f"score {scores[v.id][0]:.2f} ({scores[v.id][1]} ep)")
        if v.trajectory_id:
            parts.append(f"from trajectory {v.trajectory_id}")
        if v.run_id:
            parts.append(f"from run {v.run_id}")
        if v.id == latest:
            parts.append("[green]← latest[/]")
        return "  ".join(parts)

    tree = Tree(f"[bold]{name}[/]")

    def grow(node: Tree, parent: Optional[int]) -> None:
        for child in children.get(parent, []):
            grow(node.add(label(child)), child.id)

    grow(tree, None)
    console.print(tree)


@app.command()
def diff(
    name: str = typer.Argument(..., help="Skill name."),
    v1: int = typer.Argument(..., help="Older version number."),
    v2: int = typer.Argument(..., help="Newer version number."),
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Unified diff of two versions' SKILL.md text."""
    st = open_store(home, store)
    with store_errors():
        a, b = st.skill_version(name, v1), st.skill_version(name, v2)
    lines = list(difflib.unified_diff(a.text.splitlines(keepends=True), b.text.splitlines(keepends=True),
                                      fromfile=f"{name} v{v1}", tofile=f"{name} v{v2}"))
    if not lines:
        console.print("no differences in SKILL.md" + (" (files differ)" if a.resources_hash != b.resources_hash else ""))
        return
    console.print(Syntax("".join(lines), "diff", word_wrap=True))


@app.command()
def search(
    query: str = typer.Argument(..., help="What the task is about; exact identifiers help."),
    k: int = typer.Option(5, "-k", help="How many skills to return."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Find the skills most relevant to a task (embeddings plus lexical match)."""
    from skillgraft.skills.embedder import store_embedder

    # The text encoder loads in a thread while this one loads the database layer: a search in a
    # fresh process waits for the slower of the two, not for both.
    embedder = store_embedder(settings_from(home, store).artifacts)
    threading.Thread(target=embedder.warm, name="encoder", daemon=True).start()
    st = open_store(home, store, embedder=embedder)
    try:
        # Skills added since the last search are embedded first, which can take a while: show it.
        with Progress(TextColumn("embedding new skills"), BarColumn(), MofNCompleteColumn(), console=console,
                      transient=True, disable=as_json) as bar:
            task = bar.add_task("embed", total=None)
            st.embed_pending(progress=lambda n: bar.advance(task, n))
        hits = st.search(query, k=k)
    except (RuntimeError, OSError) as exc:
        raise fail(f"search failed: {exc}") from exc
    if as_json:
        print(json.dumps([{"skill": h.skill_name, "version": h.version.number, "version_id": h.version.id,
                           "score": h.score, "semantic": h.semantic, "lexical": h.lexical,
                           "description": h.version.description} for h in hits], indent=2))
        return
    table = Table("#", "skill", "ver", "score", "semantic", "lexical", "description")
    for i, h in enumerate(hits, 1):
        table.add_row(str(i), h.skill_name, f"v{h.version.number}", f"{h.score:.3f}", f"{h.semantic:.3f}",
                      f"{h.lexical:.2f}", escape(h.version.description[:70]))
    console.print(table if hits else "no skills in the store")


@app.command("import")
def import_(
    path: Path = typer.Argument(..., help="A skill folder (holding SKILL.md) or a tree of them."),
    batch: int = typer.Option(1, "--batch", min=1, help="Skills per transaction (larger is faster for big trees; a skill is never split)."),
    as_json: bool = JsonOption,
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Import skills; each is reported as created, updated (new version), unchanged or error.

    Exit status 2 when any skill was refused (bad format, a symbolic link, a SKILL.md over 64 KiB);
    the others are imported regardless. A single refused folder is one error line.
    """
    if not path.exists():
        raise fail(f"{path} does not exist", code=2)
    if path.is_file() and path.name == skillmd.SKILL_FILE:
        path = path.parent
    st = open_store(home, store)
    folders = skillmd.find_skill_folders(path) if path.is_dir() else []
    if not folders:
        raise fail(f"no SKILL.md found in {path}", code=2)
    with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=True, disable=as_json) as bar:
        task = bar.add_task("import", total=len(folders))
        try:
            reports = st.import_tree(path, batch=batch, on_result=lambda _r: bar.advance(task))
        except (StoreError, OSError) as exc:
            raise fail(str(exc)) from exc
    errors = [r for r in reports if r.status == "error"]
    if len(reports) == 1 and errors and not as_json:
        raise fail(escape(errors[0].error or "refused"), code=2)
    if as_json:
        print(json.dumps([{"path": r.path, "name": r.name, "status": r.status,
                           "version": r.version.number if r.version else None, "error": r.error} for r in reports], indent=2))
    else:
        table = Table("skill", "result", "version", "detail")
        style = {"created": "green", "updated": "cyan", "unchanged": "dim", "error": "bold red"}
        for r in reports:
            table.add_row(r.name or r.path, f"[{style[r.status]}]{r.status}[/]", f"v{r.version.number}" if r.version else "-",
                          escape(r.error or ""))
        console.print(table)
        counts = {s: sum(r.status == s for r in reports) for s in style}
        console.print(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if errors:
        raise typer.Exit(2)


@app.command()
def export(
    name: str = typer.Argument(..., help="Skill name."),
    dest: Path = typer.Argument(..., help="Folder to write NAME/ into."),
    version: Optional[int] = typer.Option(None, "--version", "-v", help="Version number (default: latest)."),
    force: bool = typer.Option(False, "--force", help="Replace DEST/NAME if it exists."),
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
) -> None:
    """Write a skill version as an Agent Skills folder: DEST/NAME/SKILL.md plus its files."""
    st = open_store(home, store)
    try:
        with store_errors():
            out = st.export_skill(name, dest, version=version, overwrite=force)
    except (SkillFormatError, OSError) as exc:
        raise fail(str(exc)) from exc
    console.print(f"wrote {out}")

