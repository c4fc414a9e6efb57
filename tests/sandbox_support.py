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


def check_snapshot_and_rewind(sandbox) -> None:
    """snapshot() names the files as they are; rewind() puts them back, added files removed,
    deleted ones restored; ignored files stay; a name that is no tree is refused."""
    import pytest

    from skillgraft.sandbox.base import SandboxError

    start = sandbox.snapshot()
    sandbox.execute("mkdir -p __pycache__ && echo cached > __pycache__/calc.pyc")
    assert sandbox.snapshot() == start  # ignored files are not part of the state
    sandbox.execute("sed -i 's/a - b/a + b/' calc.py && rm test_calc.py && mkdir -p notes/deep && echo x > notes/deep/n.txt")
    edited = sandbox.snapshot()
    assert edited != start and sandbox.snapshot() == edited
    sandbox.rewind(start)
    assert sandbox.snapshot() == start
    listing = sandbox.execute("cat calc.py; ls; ls notes 2>/dev/null || echo no-notes").output
    assert "return a - b" in listing and "test_calc.py" in listing and "no-notes" in listing
    assert sandbox.execute("cat __pycache__/calc.pyc").output == "cached\n"
    sandbox.rewind(edited)
    assert "return a + b" in sandbox.execute("cat calc.py").output and sandbox.execute("cat notes/deep/n.txt").output == "x\n"
    with pytest.raises(SandboxError):
        sandbox.rewind("not-a-tree; rm -rf /")
    with pytest.raises(SandboxError):
        sandbox.rewind("0" * 40)
