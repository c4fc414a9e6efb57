"""The `skillgraft` program ends without the interpreter's teardown; nothing an exit owes is skipped."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SKILLS = Path(__file__).resolve().parents[1] / "skillworld" / "skills"


def skillgraft(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "skillgraft", *args, "--home", str(home)], capture_output=True,
                          text=True, timeout=300)


def test_exit_codes_output_and_atexit_work_are_kept(tmp_path):
    home = tmp_path / "home"
    imported = skillgraft("skills", "import", str(SKILLS), home=home)
    assert imported.returncode == 0, imported.stderr
    listed = skillgraft("skills", "ls", "--json", home=home)
    assert listed.returncode == 0
    assert len(json.loads(listed.stdout)) == len(list(SKILLS.iterdir()))  # all of it flushed before the end
    missing = skillgraft("skills", "show", "no-such-skill", home=home)
    assert missing.returncode == 2 and "no skill 'no-such-skill'" in missing.stderr
    # atexit handlers still run: a handler registered by the command's code writes its file
    marker = tmp_path / "atexit-ran"
    code = ("import atexit, sys; from skillgraft import cli; "
            f"atexit.register(lambda: open({str(marker)!r}, 'w').write('yes')); "
            "sys.argv = ['skillgraft', '--help']; cli.main()")
    ended = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert ended.returncode == 0 and "Usage" in ended.stdout
    assert marker.read_text() == "yes"


def test_the_command_line_starts_without_the_heavy_libraries():
    """Showing help or parsing a command loads no database layer, tensor library or engine SDK;
    each command loads what it uses when it runs."""
    code = ("import sys; import skillgraft.cli; "
            "print(sorted(m for m in ('sqlalchemy', 'sqlmodel', 'torch', 'docker', 'onnxruntime', 'transformers') "
            "if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"
