"""`skillgraft sandbox build|reap|doctor`: the sandbox image, leftover containers, and what is missing."""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Optional

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from skillgraft.commands.common import HomeOption, JsonOption, console, fail, settings_from
from skillgraft.sandbox.base import SandboxError, SandboxUnavailable
from skillgraft.sandbox.image_names import IMAGE_TAG, METHODS

app = typer.Typer(
    help="The Docker sandbox: build its image, remove leftover containers, check what is missing.",
    no_args_is_help=True,
)


@app.command()
def build(
    if_missing: bool = typer.Option(False, "--if-missing", help="Do nothing when the image already exists (for setup scripts)."),
    force: bool = typer.Option(False, "--force", help="Also bootstrap a fresh rootfs instead of reusing the cached one."),
    method: str = typer.Option("auto", "--method", help=f"How to build: {', '.join(METHODS)}. auto builds the Dockerfile when a registry is reachable, else bootstraps Debian with debootstrap."),
    tag: str = typer.Option(IMAGE_TAG, "--tag", help="Image tag to build."),
    home: Optional[str] = HomeOption,
    as_json: bool = JsonOption,
) -> None:
    """Build the sandbox image (python3, pytest, git, patch and a non-root user `agent`).

    Without flags the image is rebuilt even if it exists (a cached debootstrap rootfs is reused;
    --force throws it away). The build log goes to HOME/cache/sandbox-build.log.
    """
    if method not in METHODS:
        raise fail(f"unknown --method {method!r}: choose one of {', '.join(METHODS)}", 2)
    settings = settings_from(home, None)
    live = console.is_terminal and not as_json
    stages: list[str] = []

    def report(message: str) -> None:
        if live:
            progress.update(task, description=message[:110])
            return
        # In a log (CI, setup script) a spinner shows nothing: print each new stage once instead.
        stage = message.split(": ", 1)[0]
        if not as_json and (not stages or stages[-1] != stage):
            stages.append(stage)
            console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {stage}")

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True,
                  disable=not live) as progress:
        task = progress.add_task(f"sandbox image {tag}", total=None)
        try:
            from skillgraft.sandbox.image import ensure_image

            outcome = ensure_image(
                tag=tag,
                rebuild=not if_missing,
                fresh_rootfs=force,
                method=method,
                cache_dir=settings.cache,
                report=report,
            )
        except SandboxUnavailable as exc:
            raise fail(str(exc), 3)
        except SandboxError as exc:
            raise fail(str(exc), 1)
    if as_json:
        console.print_json(json.dumps({**asdict(outcome), "log": str(outcome.log) if outcome.log else None}))
    elif outcome.method == "existing":
        console.print(f"[green]✓[/] {outcome.tag} already exists ({outcome.image_id[7:19]})")
    else:
        console.print(f"[green]✓[/] built {outcome.tag} by {outcome.method} in {outcome.seconds:.0f}s ({outcome.image_id[7:19]}); log: {outcome.log}")


@app.command()
def reap(
    everything: bool = typer.Option(False, "--all", help="Remove every sandbox container, also those of running processes and other hosts."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list what would be removed."),
    as_json: bool = JsonOption,
) -> None:
    """Remove sandbox containers left behind by runs that crashed (their owning process is gone)."""
    try:
        from skillgraft.sandbox.reap import reap as reap_containers

        found = reap_containers(everything=everything, dry_run=dry_run)
    except SandboxUnavailable as exc:
        raise fail(str(exc), 3)
    if as_json:
        console.print_json(json.dumps([asdict(item) for item in found]))
        return
    if not found:
        console.print("no sandbox containers")
        return
    table = Table("container", "name", "status", "owner", "", title="sandbox containers")
    for item in found:
        verdict = "[green]removed[/]" if item.removed else ("[yellow]would remove[/]" if dry_run and "kept" not in item.reason else item.reason)
        table.add_row(item.container_id[:12], item.name, item.status, item.owner, verdict)
    console.print(table)
    removed = sum(item.removed for item in found)
    console.print(f"{removed} removed, {len(found) - removed} left")


@app.command()
def doctor(home: Optional[str] = HomeOption, as_json: bool = JsonOption) -> None:
    """Check the Docker engine, the sandbox image, bubblewrap and debootstrap; say how to fix what is missing.

    Exits 0 when some sandbox can run (engine and image, or bubblewrap), else 1.
    """
    settings = settings_from(home, None)
    started = time.monotonic()
    from skillgraft.sandbox.doctor import diagnose

    checks = diagnose(settings.cache)
    by_name = {check.name: check for check in checks}
    docker_ready = by_name["docker engine"].ok and by_name["sandbox image"].ok and by_name["sandbox disk limit"].ok
    usable = docker_ready or by_name["bubblewrap"].ok
    if as_json:
        console.print_json(json.dumps({"checks": [asdict(check) for check in checks], "docker_ready": docker_ready, "usable": usable}))
    else:
        table = Table("", "check", "detail", "fix", title=f"sandbox doctor ({time.monotonic() - started:.1f}s)")
        for check in checks:
            mark = "[green]✓[/]" if check.ok else ("[red]✗[/]" if check.needed else "[yellow]-[/]")
            table.add_row(mark, check.name, check.detail, "" if check.ok else check.fix)
        console.print(table)
        if docker_ready:
            console.print("[green]ready:[/] --sandbox docker works")
        elif usable:
            console.print("[yellow]docker sandbox not ready;[/] --sandbox bwrap works meanwhile")
        else:
            console.print("[red]no sandbox can run here;[/] apply the fixes above")
    raise typer.Exit(0 if usable else 1)
