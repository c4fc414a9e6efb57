"""The bubblewrap sandbox: what it enforces, with the real bwrap of this machine."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from skillgraft.sandbox.base import SandboxError, SandboxLimits, open_sandbox
from skillgraft.sandbox.bwrap_backend import BwrapSandbox
from skillgraft.sandbox.doctor import check_bwrap
from sandbox_support import NETWORK_PROBE, calc_repo, check_snapshot_and_rewind

usable = check_bwrap()
pytestmark = pytest.mark.skipif(not usable.ok, reason=f"bubblewrap cannot run here: {usable.detail}")

LIMITS = SandboxLimits(memory="256m", command_timeout=20, output_limit=2000)


@pytest.fixture
def repo(tmp_path):
    return calc_repo(tmp_path)


def test_runs_as_agent_in_a_copy_and_is_removed(repo):
    sandbox = open_sandbox("bwrap", repo, LIMITS)
    root = sandbox.root
    result = sandbox.execute("id -un; id -u; pwd; ls; python -m pytest -q test_calc.py | tail -1")
    lines = result.output.splitlines()
    assert lines[:5] == ["agent", "1000", "/repo", "calc.py", "test_calc.py"]
    assert "1 failed" in lines[-1]
    sandbox.execute("echo changed > calc.py")
    assert (repo / "calc.py").read_text().startswith("def add")  # the host's repository is untouched
    sandbox.close()
    assert not root.exists()
    sandbox.close()
    with pytest.raises(SandboxError):
        sandbox.execute("true")


def test_exception_inside_with_removes_the_copy(repo):
    roots = []
    with pytest.raises(RuntimeError):
        with BwrapSandbox(repo, LIMITS) as sandbox:
            roots.append(sandbox.root)
            raise RuntimeError("boom")
    assert not roots[0].exists()


def test_host_is_read_only_and_secrets_hidden(repo):
    with BwrapSandbox(repo, LIMITS) as sandbox:
        write = sandbox.execute("touch /usr/sandbox-was-here")
        in_root = sandbox.execute("ls -A /root").output.split()
        run = sandbox.execute("ls -A /run /var/run").output.split()
        scratch = sandbox.execute("echo kept > /tmp/x && cat /tmp/x")
        again = sandbox.execute("cat /tmp/x")
    assert write.returncode != 0 and "Read-only file system" in write.output
    # Only the interpreter's own folder comes back under a hidden home; the engine socket stays out.
    assert set(in_root) <= {".pyenv", ".local", ".venv"}
    assert "docker.sock" not in run
    assert scratch.output == "kept\n" and again.output == "kept\n"


def test_no_network(repo):
    with BwrapSandbox(repo, LIMITS) as sandbox:
        routes = sandbox.execute("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
        attempt = sandbox.execute(f"python3 -c '{NETWORK_PROBE}'")
    assert routes.output.split() == ["lo"]
    assert attempt.output.startswith("refused")


def test_own_pid_namespace_and_timeout_kills_the_tree(repo):
    with BwrapSandbox(repo, LIMITS) as sandbox:
        ps = sandbox.execute("ps -eo pid,args --no-headers")
        result = sandbox.execute("(setsid sleep 701 >/dev/null 2>&1 &); nohup sleep 702 >/dev/null 2>&1 & sleep 703", timeout=2)
    pids = [int(line.split()[0]) for line in ps.output.splitlines()]
    assert max(pids) < 100  # a fresh namespace, not the host's process table
    assert result.timed_out and result.returncode == 137
    # the kernel kills what is left in the namespace once its first process dies, but not in
    # the same instant: on a loaded machine a dying sleep can still be listed for a moment
    deadline = time.monotonic() + 10
    while True:
        host = subprocess.run(["ps", "-eo", "args"], check=False, capture_output=True, text=True).stdout
        left = [line for line in host.splitlines() if line.startswith("sleep 70")]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left


def test_memory_limit_per_process(repo):
    with BwrapSandbox(repo, SandboxLimits(memory="200m", command_timeout=30)) as sandbox:
        hog = sandbox.execute("python3 -c 'x = bytearray(600 * 2**20); print(\"survived\")'")
    assert hog.returncode != 0 and "MemoryError" in hog.output


def test_output_capped(repo):
    with BwrapSandbox(repo, LIMITS) as sandbox:
        result = sandbox.execute("seq 1 100000")
    total = sum(len(str(i)) + 1 for i in range(1, 100_001))
    assert result.elided == total - LIMITS.output_limit
    assert result.output.startswith("1\n2\n") and result.output.endswith("99999\n100000\n")


def test_diff_against_start(repo):
    with BwrapSandbox(repo, LIMITS) as sandbox:
        assert sandbox.diff() == ""
        sandbox.execute("sed -i 's/a - b/a + b/' calc.py && echo new > extra.txt && python -m pytest -q")
        patch = sandbox.diff()
    assert "+    return a + b" in patch and "+++ b/extra.txt" in patch
    assert "__pycache__" not in patch


def test_restore_puts_test_files_back_and_names_them(repo, tmp_path):
    secret = tmp_path / "outside.txt"
    secret.write_text("outside 51c2\n")
    (repo / "leak").symlink_to(secret)
    with BwrapSandbox(repo, LIMITS) as sandbox:
        assert sandbox.restore(["test_*.py", "conftest.py"]) == []
        sandbox.execute("echo 'def test_add(): pass' > test_calc.py && echo x > conftest.py && echo y > calc_note.txt")
        assert sorted(sandbox.restore(["test_*.py", "conftest.py"])) == ["conftest.py", "test_calc.py"]
        assert "1 failed" in sandbox.execute("python -m pytest -q").output
        assert sandbox.execute("cat calc_note.txt; test -e conftest.py || echo gone").output == "y\ngone\n"
        assert sandbox.execute("readlink leak").output.strip() == str(secret)  # a link, not a copy


def test_a_same_size_edit_right_after_an_import_takes_effect(repo):
    with BwrapSandbox(repo) as sandbox:
        first = sandbox.execute("printf 'def f():\\n    return 1 < 2\\n' > m.py && python3 -c 'import m; print(m.f())'")
        second = sandbox.execute("sed -i 's/ < / > /' m.py && python3 -c 'import m; print(m.f())' && ls -a")
    assert first.output.strip() == "True"
    assert second.output.splitlines()[0] == "False" and "__pycache__" not in second.output


def test_a_sandbox_cannot_write_past_its_disk_limit(repo):
    free_before = shutil.disk_usage("/").free
    with BwrapSandbox(repo, SandboxLimits(disk="64m", command_timeout=60)) as sandbox:
        fill = sandbox.execute("dd if=/dev/zero of=/repo/fill bs=1M count=300 2>&1; rm -f /repo/fill; "
                               "dd if=/dev/zero of=/tmp/fill bs=1M count=300 2>&1; rm -f /tmp/fill; "
                               "dd if=/dev/zero of=$HOME/fill bs=1M count=300 2>&1")
        root = sandbox.root
        assert sandbox.execute("rm $HOME/fill; echo still usable").output == "still usable\n"
        assert sandbox.execute("pwd").output == "/repo\n"
    assert fill.output.count("No space left on device") == 3
    assert shutil.disk_usage("/").free > free_before - 32 * 2**20  # nothing of it on the host's disk
    assert not root.exists()


FILL_AS_USER = """
import os, sys
from pathlib import Path
from skillgraft.sandbox.base import SandboxLimits
from skillgraft.sandbox.bwrap_backend import BwrapSandbox
with BwrapSandbox(Path(sys.argv[1]), SandboxLimits(disk="64m", command_timeout=60)) as sandbox:
    fill = sandbox.execute("dd if=/dev/zero of=/repo/fill bs=1M count=300 2>&1")
    print(os.geteuid(), fill.output.count("No space left on device"), sandbox.execute("ls").output.split())
"""


def test_the_disk_bound_holds_without_root(repo, tmp_path):
    """Run as an ordinary user: the tmpfs is bubblewrap's own, mounted in its user namespace."""
    if os.geteuid() != 0:
        argv, env, cwd = [sys.executable, "-c", FILL_AS_USER, str(repo)], None, None
    else:
        # The system interpreter, as nobody, with only the sandbox package on its path (stdlib only).
        python = shutil.which("python3", path="/usr/bin:/bin")
        if python is None:
            pytest.skip("no system python3 to run as another user")
        shared = Path(tempfile.mkdtemp(prefix="bwrap-user-"))
        (shared / "skillgraft").mkdir()
        root = Path(__file__).resolve().parents[1]
        shutil.copy(root / "skillgraft" / "__init__.py", shared / "skillgraft")
        shutil.copytree(root / "sandbox", shared / "skillgraft" / "sandbox")
        shutil.copytree(repo, shared / "repo")
        subprocess.run(["chmod", "-R", "a+rX", str(shared)], check=True)
        shared.chmod(0o755)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", FILL_AS_USER, str(shared / "repo")]
        env, cwd = {"PYTHONPATH": str(shared), "PATH": "/usr/bin:/bin"}, shared  # not the checkout's skillgraft/
    try:
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    finally:
        if cwd is not None:
            shutil.rmtree(cwd, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    uid, refused, listed = done.stdout.strip().split(" ", 2)
    assert int(uid) != 0 and refused == "1" and "calc.py" in listed


def test_the_agent_cannot_kill_the_sandbox_from_inside(repo):
    """The repository lives in the namespace; its command server is pid 1 there, out of reach."""
    with BwrapSandbox(repo, LIMITS) as sandbox:
        sandbox.execute("echo kept > note.txt")
        sandbox.execute("kill -9 -1; pkill -9 -f exec_server; kill -9 1; kill -TERM 1")
        assert sandbox.execute("cat note.txt; ls").output.split() == ["kept", "calc.py", "note.txt", "test_calc.py"]


def test_a_mount_point_under_a_link_into_the_bounded_folder_is_named_by_its_real_place():
    from skillgraft.sandbox.bwrap_backend import _behind_links

    assert _behind_links("/tmp/ci/.venv") == "/sandbox/tmp/ci/.venv"
    assert _behind_links("/home/agent/.pyenv") == "/sandbox/home/.pyenv"
    assert _behind_links("/root/.pyenv/versions/3.11") == "/root/.pyenv/versions/3.11"
    assert _behind_links("/tmpfoo/x") == "/tmpfoo/x"


def test_snapshot_names_the_files_and_rewind_puts_them_back(repo):
    with BwrapSandbox(repo, LIMITS) as sandbox:
        check_snapshot_and_rewind(sandbox)
