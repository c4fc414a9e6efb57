"""The `skillgraft` command: one sub-command module per area, wired here."""
from __future__ import annotations

import atexit
import os
import sys
import threading

import typer

from skillgraft.commands import adapters, evolve, hypernet, learn, run, sandbox, skills, store, trajectories, ui, world

app = typer.Typer(
    name="skillgraft",
    help="A coding agent whose skills evolve while it works: run it on repo tasks, let it learn, inspect its skills.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

run.register(app)
learn.register(app)
hypernet.register_compile(app)
ui.register(app)
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(trajectories.app, name="trajectories")
app.add_typer(skills.app, name="skills")
app.add_typer(adapters.app, name="adapters")
app.add_typer(store.app, name="store")
app.add_typer(hypernet.app, name="hypernet")
app.add_typer(world.app, name="world")
app.add_typer(evolve.app, name="evolve")


def main() -> None:
    """The `skillgraft` program: the command, then an exit that skips the interpreter's teardown.

    Unloading SQLAlchemy and pydantic module by module takes about 0.3 s on every exit, a fifth
    of a quick command's time. Everything an exit owes is still done first, in the order the
    interpreter does it: other threads are waited for, atexit handlers run (sandboxes are removed,
    logs flushed), the output is flushed; then the process ends.
    """
    try:
        app()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # what the interpreter does with a message passed to exit()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that closed the pipe early, or a closed stream
            pass
    os._exit(code or 0)
