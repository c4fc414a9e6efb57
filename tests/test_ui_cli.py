"""`skillgraft ui` refuses what it cannot serve safely, at start and in one line."""
from __future__ import annotations

from typer.testing import CliRunner

from skillgraft.cli import app


def test_listening_beyond_loopback_needs_a_token(tmp_path):
    result = CliRunner().invoke(app, ["ui", "--host", "0.0.0.0", "--home", str(tmp_path)], env={"SKILLGRAFT_UI_TOKEN": ""})
    assert result.exit_code == 2
    assert "needs a token" in " ".join(result.output.split())


def test_a_store_that_cannot_be_opened_is_one_error_at_start(tmp_path):
    (tmp_path / "not-a-db").write_bytes(b"this is not a database" * 100)
    result = CliRunner().invoke(app, ["ui", "--home", str(tmp_path), "--store", f"sqlite:///{tmp_path / 'not-a-db'}"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert said.startswith("error: cannot") and "not-a-db" in "".join(said.split()) and "Traceback" not in result.output
    assert "file is not a database" in said
