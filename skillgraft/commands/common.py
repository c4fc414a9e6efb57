"""Options and helpers shared by the sub-commands."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console

from skillgraft.jobs.errors import JobError
from skillgraft.sandbox.base import SandboxKind
from skillgraft.settings import Settings, load_settings

if TYPE_CHECKING:
    from skillgraft.hypernet.tune import Tuning

console = Console()
err_console = Console(stderr=True)

# Only named here: skillgraft.settings.load_settings alone turns flags, environment and defaults into folders.
HomeOption = typer.Option(None, "--home", help="Folder holding all state (default $SKILLGRAFT_HOME, else ~/.skillgraft).")
StoreOption = typer.Option(None, "--store", help="SQLAlchemy URL of the store (default $SKILLGRAFT_STORE, else a SQLite file in the home folder).")
JsonOption = typer.Option(False, "--json", help="Print JSON for scripts instead of tables.")
RayOption = typer.Option(None, "--ray", metavar="auto|local|ADDRESS", help="Run the episodes on a Ray cluster: auto (the one this machine joined with `ray start`, or $RAY_ADDRESS), local (one started for this command), or the head's host:port. Each worker loads the model once; a cluster of several nodes needs a PostgreSQL --store.")
RetriesOption = typer.Option(2, "--retries", min=0, help="With --ray: how many more times an episode runs when its worker dies mid-episode.")
UnstickOption = typer.Option(True, "--unstick/--no-unstick", help="When the model proposes a command it already ran on the very same files (the edit it has just made, the tests after it), go back to before the last command that changed the files, put them back as they were, and draw the reply there anew, sampled, up to 3 times; the first draw proposing something not yet tried there is taken. A reply that holds no command (one that runs on repeating itself until its token limit) is drawn again in its place, sampled, up to 3 times. The redraws are extra model calls, not extra steps. On by default; --no-unstick takes every reply as it comes.")


class TuneStart(str, Enum):
    compiled = "compiled"
    fresh = "fresh"


TuneFromOption = typer.Option(TuneStart.fresh, "--tune-from", help="With --tune-steps: train a fresh LoRA on the hypernetwork's modules (fresh, at learning rate 5e-3: the skill's text then goes into no weight, only into which tasks retrieve the adapter), or tune the hypernetwork's adapter of the skill (compiled, at 5e-4). On the learned recipes of SkillWorld's learning families, fresh solved 17/20 held-out tasks and compiled 11/20 (the hypernetwork alone 2/20).")
SandboxOption = typer.Option(SandboxKind.docker, "--sandbox", help="Where the agent's commands run: a Docker container or a bubblewrap jail.")


def settings_from(home: Optional[str], store: Optional[str]) -> Settings:
    return load_settings(home, store)


def tuning_of(steps: int, start: TuneStart, anchor_weight: float = 0.0) -> "Tuning | None":
    """The tuning --tune-steps, --tune-from and --tune-anchor-weight ask for; None for none."""
    if not steps:
        if anchor_weight:
            raise fail("--tune-anchor-weight weighs a part of the tuning: give --tune-steps too", 2)
        return None
    from skillgraft.hypernet.tune import Tuning

    return Tuning(steps, start=start.value, anchor_weight=anchor_weight)


def fail(message: str, code: int = 1) -> "typer.Exit":
    """Prints a one-line error and returns the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)


@contextmanager
def job_exits() -> Iterator[None]:
    """Turns a job's JobError into the one-line error and exit code of the command."""
    try:
        yield
    except JobError as exc:
        raise fail(str(exc), exc.exit_code) from None
