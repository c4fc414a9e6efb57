"""What the sandbox tests of both backends run inside a sandbox."""
from __future__ import annotations

import textwrap
from pathlib import Path

# Tries to reach a public address; prints "connected", or "refused" and the error number.
NETWORK_PROBE = textwrap.dedent(
    """
    import socket
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=3)
        print("connected")
    except OSError as exc:
        print("refused", exc.errno)
    """
)


def calc_repo(tmp_path: Path) -> Path:
    """A repository whose one test fails: add() subtracts."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (folder / "test_calc.py").write_text("from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return folder
