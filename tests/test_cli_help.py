"""Every command's --help: it explains, and a flag does not pose as taking a value."""
from __future__ import annotations

import typer
from typer.testing import CliRunner

from skillgraft.cli import app


def command_paths(group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = []
    for name, cmd in group.commands.items():
        paths.append(prefix + (name,))
        if hasattr(cmd, "commands"):  # a group of sub-commands
            paths += command_paths(cmd, prefix + (name,))
    return paths


def test_every_help_page_explains_and_flags_show_no_type():
    root = typer.main.get_command(app)
    paths = command_paths(root)
    assert ("trajectories", "ls") in paths and ("run",) in paths and len(paths) > 30
    for path in paths:
        res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert res.exit_code == 0, (path, res.output)
        assert "<bool>" not in res.output, path
        assert "Usage:" in res.output and "--help" in res.output, path
