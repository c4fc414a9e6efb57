"""`skillgraft trajectories ls|show`: the runs on record, from trajectory files and the store."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from skillgraft.commands.common import HomeOption, JsonOption, StoreOption, console, fail, settings_from
from skillgraft.jobs.recording import existing_store
from skillgraft.settings import Settings

app = typer.Typer(
    help="List and read agent trajectories: every message the model saw, and how each run ended.",
    no_args_is_help=True,
)

_ROLE_STYLE = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "blue"}


@dataclass
class Entry:
    """One run, whether found as a file in the home folder or as a row in the store."""

    ref: str  # what `show` accepts for it
    path: Path
    task_id: str
    model: str | None
    exit_status: str | None
    reward: float | None
    steps: int | None
    cost: float | None
    started: str | None

    def as_dict(self) -> dict:
        return {**self.__dict__, "path": str(self.path)}


def _file_entry(path: Path) -> Entry | None:
    try:
        data = json.loads(path.read_text())
        info = data["info"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a trajectory (or half-copied by hand): skipped, not fatal
    task = info.get("task") or {}
    return Entry(
        ref=path.stem, path=path, task_id=task.get("id", "?"), model=info.get("model"),
        exit_status=info.get("exit_status"), reward=info.get("reward"), steps=info.get("steps"),
        cost=info.get("cost"), started=info.get("started_at"),
    )


def _store_entry(store, row) -> Entry:
    return Entry(
        ref=f"store:{row.id}", path=store.trajectory_path(row), task_id=row.task_id, model=row.model,
        exit_status=row.outcome, reward=row.reward, steps=row.steps, cost=row.cost,
        started=row.created_at.isoformat(timespec="seconds") if row.created_at else None,
    )


def collect(settings: Settings, skill: str | None = None) -> list[Entry]:
    """Runs newest first. With `skill`, only store runs that had a version of that skill."""
    store = existing_store(settings)
    entries: list[Entry] = []
    if store is not None:
        entries = [_store_entry(store, row) for row in store.trajectories(skill=skill)]
    if skill is None:
        # A run recorded in the store is listed once, by its store ref, not again as its source file.
        recorded = {e.path.name for e in entries}
        files = sorted(settings.trajectories.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        entries += [e for e in map(_file_entry, files) if e is not None and e.path.name not in recorded]
    return entries


@app.command("ls")
def ls(
    skill: Optional[str] = typer.Option(None, "--skill", help="Only runs that had a version of this skill (needs the store)."),
    limit: int = typer.Option(50, "--limit", "-n", help="Show at most this many runs."),
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
    json_out: bool = JsonOption,
) -> None:
    """List recorded runs, newest first: files under HOME/trajectories and runs in the store."""
    settings = settings_from(home, store)
    if skill is not None and existing_store(settings) is None:
        raise fail("--skill needs the store, and there is none yet in this home folder", 2)
    entries = collect(settings, skill)[:limit]
    if json_out:
        console.print_json(json.dumps([e.as_dict() for e in entries]))
        return
    if not entries:
        console.print(f"no trajectories under {settings.trajectories}" + (f" for skill {skill}" if skill else ""))
        return
    console.print(runs_table(entries, console.width))


def runs_table(entries: list[Entry], width: int) -> Table:
    """The runs as a table that stays readable at `width` columns: below NARROW the reward shows
    as the exit status's colour, the cost and start time are left out and a model path is
    shortened to its last folder; long refs and task ids wrap instead of being cut."""
    narrow = width < NARROW
    models = [_short_model(e.model or "-") if narrow else e.model or "-" for e in entries]
    table = Table(title=f"{len(entries)} runs", show_edge=False)
    table.add_column("ref", overflow="fold")
    table.add_column("task", overflow="fold")
    table.add_column("model", overflow="fold", min_width=min(15, max(map(len, models), default=5)))
    table.add_column("exit", no_wrap=True)
    if not narrow:
        table.add_column("reward", justify="right", no_wrap=True)
    table.add_column("steps", justify="right", no_wrap=True)
    if not narrow:
        table.add_column("cost", justify="right", no_wrap=True)
        table.add_column("started", no_wrap=True)
    for e, model in zip(entries, models):
        style = None if e.reward is None else "green" if e.reward else "red"
        reward = Text(f"{e.reward:.1f}", style) if e.reward is not None else Text("-")
        row = [e.ref, e.task_id, model, Text(e.exit_status or "running?", style if narrow else "")]
        row += [] if narrow else [reward]
        row += [str(e.steps if e.steps is not None else "-")]
        if not narrow:
            row += [f"${e.cost:.4f}" if e.cost is not None else "-", e.started or "-"]
        table.add_row(*row)
    return table


NARROW = 110


def _short_model(model: str) -> str:
    """hf:/a/long/path/name -> hf:…/name; a litellm model string stays as it is."""
    scheme, _, path = model.partition(":")
    if scheme in ("hf", "replay") and "/" in path:
        return f"{scheme}:…/{Path(path).name}"
    return model


@app.command("show")
def show(
    ref: str = typer.Argument(..., help="A trajectory file, a name from `ls` (file stem), or store:<id>."),
    full: bool = typer.Option(False, "--full", help="Print long messages whole instead of their head and tail."),
    home: Optional[str] = HomeOption,
    store: Optional[str] = StoreOption,
    json_out: bool = JsonOption,
) -> None:
    """Show one run: its info block, then every message as the model saw it."""
    settings = settings_from(home, store)
    path = _resolve(settings, ref)
    try:
        data = json.loads(path.read_text())
        info, messages = data["info"], data["messages"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise fail(f"{path}: not a readable trajectory ({exc})", 2)
    if json_out:
        console.print_json(json.dumps(data))
        return
    console.print(_info_table(info, path))
    for i, m in enumerate(messages):
        console.print(_message_panel(i, m, full))
    test = info.get("test") or {}
    if test.get("output"):
        console.print(Panel(_clip(test["output"], full), title=f"test: {test.get('command')} → {test.get('returncode')}", border_style="dim"))
    if info.get("patch"):
        console.print(Panel(_clip(info["patch"], full), title="patch", border_style="dim"))


def _resolve(settings: Settings, ref: str) -> Path:
    if ref.startswith("store:"):
        store = existing_store(settings)
        if store is None:
            raise fail("no store in this home folder", 2)
        try:
            return store.trajectory_path(int(ref[len("store:"):]))
        except Exception as exc:  # bad id or missing row: the store says which
            raise fail(f"{ref}: {exc}", 2)
    for candidate in (Path(ref), settings.trajectories / ref, settings.trajectories / f"{ref}.json"):
        if candidate.is_file():
            return candidate
    raise fail(f"no trajectory {ref!r} (give a file, a name from `skillgraft trajectories ls`, or store:<id>)", 2)


def _info_table(info: dict[str, Any], path: Path) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim")
    table.add_column()
    task = info.get("task") or {}
    rows = [
        ("file", str(path)),
        ("task", f"{task.get('id')} ({task.get('family') or 'no family'})"),
        ("model", str(info.get("model"))),
        ("skills", ", ".join(info.get("skills") or []) or "-"),
        ("adapters", ", ".join(info.get("adapters") or []) or "-"),
        ("exit", f"{info.get('exit_status', 'running?')} {info.get('exit_detail') or ''}".strip()),
        ("reward", str(info.get("reward", "-"))),
        ("steps / cost", f"{info.get('steps', '-')} / ${info.get('cost', 0) or 0:.4f}"),
        ("timings", ", ".join(f"{k} {v}s" for k, v in (info.get("timings") or {}).items()) or "-"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table


def _message_panel(i: int, m: dict, full: bool) -> Panel:
    role = m.get("role", "?")
    body = _clip(m.get("content") or "", full)
    for call in m.get("tool_calls") or []:
        fn = call.get("function", {})
        body += f"\n[tool call {fn.get('name')}] {fn.get('arguments')}"
    return Panel(Text(body), title=f"{i} {role}", title_align="left", border_style=_ROLE_STYLE.get(role, "white"))


def _clip(text: str, full: bool, keep: int = 1500) -> str:
    if full or len(text) <= 2 * keep:
        return text
    return f"{text[:keep]}\n… {len(text) - 2 * keep} characters …\n{text[-keep:]}"
