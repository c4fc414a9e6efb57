"""The `skillgraft` command: one sub-command module per area, wired here."""
from __future__ import annotations

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
