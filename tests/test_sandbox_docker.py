"""The Docker sandbox against the real engine: lifecycle, isolation, limits, output, diff, reaping."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import docker
import pytest

from skillgraft.sandbox.base import LABEL, SandboxError, SandboxLimits, SandboxUnavailable, open_sandbox
from skillgraft.sandbox.docker_backend import DockerSandbox
from skillgraft.sandbox.lifecycle import OWNER_HOST, OWNER_PID
from skillgraft.sandbox.image_names import IMAGE_TAG
from skillgraft.sandbox.reap import reap
from sandbox_support import NETWORK_PROBE, calc_repo, check_snapshot_and_rewind

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]
FAST = SandboxLimits(memory="256m", cpus=1.0, pids=64, command_timeout=20, output_limit=2000)


@pytest.fixture(scope="module")
def client():
    return docker.from_env()


@pytest.fixture
def repo(tmp_path):
    return calc_repo(tmp_path)


def exists(client, container_id: str) -> bool:
    try:
        client.containers.get(container_id)
        return True
    except docker.errors.NotFound:
        return False


def mine(client) -> list:
    return client.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"{OWNER_PID}={os.getpid()}"]})


def test_lifecycle_limits_user_and_removal(client, repo):
    limits = SandboxLimits(memory="300m", cpus=0.5, pids=50, command_timeout=20)
    sandbox = open_sandbox("docker", repo, limits)
    container_id = sandbox.container.id
    host = client.api.inspect_container(container_id)["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["Memory"] == 300 * 2**20
    assert host["NanoCpus"] == 500_000_000
    assert host["PidsLimit"] == 50
    assert client.containers.get(container_id).labels[LABEL] == "1"
    result = sandbox.execute("id -un; pwd; stat -c %U calc.py; ls")
    assert result.returncode == 0
    assert result.output.split() == ["agent", "/repo", "agent", "calc.py", "test_calc.py"]
    failing = sandbox.execute("python3 -m pytest -q test_calc.py")
    assert failing.returncode == 1 and "assert -1 == 5" in failing.output
    sandbox.close()
    assert not exists(client, container_id)
    sandbox.close()  # a second close is harmless
    with pytest.raises(SandboxError):
        sandbox.execute("true")


def test_exception_inside_with_removes_container(client, repo):
    seen = []
    with pytest.raises(RuntimeError, match="boom"):
        with DockerSandbox(repo, FAST) as sandbox:
            seen.append(sandbox.container.id)
            raise RuntimeError("boom")
    assert seen and not exists(client, seen[0])


def test_failure_to_record_the_start_removes_container(client, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / ".git").mkdir()  # a .git folder that is no repository: recording the start state fails
    (broken / "a.txt").write_text("a\n")
    before = {c.id for c in mine(client)}
    with pytest.raises(SandboxError, match="start state"):
        with DockerSandbox(broken, FAST) as sandbox:
            sandbox.wait_ready()
    assert {c.id for c in mine(client)} == before


def test_no_network_inside(repo):
    with DockerSandbox(repo, FAST) as sandbox:
        interfaces = sandbox.execute("ls /sys/class/net").output.split()
        attempt = sandbox.execute(f"python3 -c '{NETWORK_PROBE}'")
    assert interfaces == ["lo"]
    assert attempt.output.startswith("refused")


def test_timeout_kills_the_whole_tree_even_escaped_children(repo):
    with DockerSandbox(repo, FAST) as sandbox:
        # A naive kill of the command's process group leaves a setsid child running ...
        naive = sandbox.execute("(setsid sleep 601 >/dev/null 2>&1 &); sleep 0.2; kill -KILL -- -$$")
        assert naive.returncode == 137 and not naive.timed_out
        assert "sleep 601" in sandbox.execute("ps -eo args").output
        sandbox.execute("pkill -f 'sleep 601'")
        # ... while a timeout kills the command, its background children and the escaped ones.
        result = sandbox.execute(
            "(setsid sleep 602 >/dev/null 2>&1 &); nohup sleep 603 >/dev/null 2>&1 & sh -c 'sleep 604' & sleep 605",
            timeout=2,
        )
        assert result.timed_out and result.returncode == 137
        left = sandbox.execute("ps -eo user,stat,args").output
        assert not [line for line in left.splitlines() if "sleep 60" in line], left
        assert sandbox.execute("echo still usable").output == "still usable\n"


def test_background_process_outlives_a_finished_command(repo):
    with DockerSandbox(repo, FAST) as sandbox:
        started = sandbox.execute("nohup sleep 300 >/dev/null 2>&1 & echo started")
        assert started.output == "started\n" and not started.timed_out
        assert "sleep 300" in sandbox.execute("ps -eo args").output


def test_memory_hog_is_stopped_by_the_limit(client, repo):
    limits = SandboxLimits(memory="128m", cpus=1.0, pids=64, command_timeout=60)
    with DockerSandbox(repo, limits) as sandbox:
        hog = sandbox.execute("python3 -c 'blocks = [bytearray(16 * 2**20) for _ in range(64)]; print(\"survived\")'")
        assert hog.returncode == 137  # the kernel's OOM killer, inside the container's cgroup
        assert "survived" not in hog.output
        stats = sandbox.container.stats(stream=False)["memory_stats"]
        assert stats["limit"] == 128 * 2**20
        assert stats.get("max_usage", 0) <= 128 * 2**20
        assert sandbox.execute("echo alive").output == "alive\n"
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).returncode == 0


def test_fork_bomb_is_contained_by_the_pids_limit(repo):
    limits = SandboxLimits(memory="256m", cpus=1.0, pids=48, command_timeout=20)
    with DockerSandbox(repo, limits) as sandbox:
        outcome = {}
        bomb = threading.Thread(target=lambda: outcome.update(result=sandbox.execute("b(){ b|b& }; b; sleep 60", timeout=5)))
        bomb.start()
        peak = 0
        while bomb.is_alive():
            pids = sandbox.container.stats(stream=False)["pids_stats"]
            peak = max(peak, pids.get("current", 0))
        bomb.join()
        assert 0 < peak <= 48
        assert outcome["result"].timed_out
        assert sandbox.execute("echo alive").output == "alive\n"
        assert sandbox.container.stats(stream=False)["pids_stats"]["current"] < 10


def test_huge_output_is_capped_with_head_tail_and_count(repo):
    count = 300_000
    total = sum(len(str(i)) + 1 for i in range(1, count + 1))
    with DockerSandbox(repo, FAST) as sandbox:
        result = sandbox.execute(f"seq 1 {count}")
    assert result.returncode == 0
    assert result.elided == total - FAST.output_limit
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith(f"{count - 1}\n{count}\n")
    assert f"[... {result.elided} characters elided ...]" in result.output
    assert len(result.output) < FAST.output_limit + 100


def test_diff_shows_edits_and_new_files_against_the_start(repo):
    with DockerSandbox(repo, FAST) as sandbox:
        assert sandbox.diff() == ""
        sandbox.execute("sed -i 's/a - b/a + b/' calc.py && echo 'notes' > NOTES.md && python3 -m pytest -q")
        patch = sandbox.diff()
        assert sandbox.execute("python3 -m pytest -q").returncode == 0
        sandbox.execute("git add -A && git commit -qm fix")  # history the agent makes does not hide the change
        after_commit = sandbox.diff()
    assert "-    return a - b\n+    return a + b" in patch
    assert "+++ b/NOTES.md" in patch
    assert "__pycache__" not in patch and ".pytest_cache" not in patch
    assert after_commit == patch


def test_existing_repository_keeps_its_history(tmp_path):
    repo = tmp_path / "git-repo"
    repo.mkdir()
    (repo / "f.txt").write_text("one\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (repo / "f.txt").write_text("one\nuncommitted\n")  # the start state includes it
    with DockerSandbox(repo, FAST) as sandbox:
        log = sandbox.execute("git log --format=%s").output
        assert sandbox.diff() == ""
        sandbox.execute("echo two >> f.txt")
        patch = sandbox.diff()
    assert log == "first\n"
    assert "+two" in patch and "+uncommitted" not in patch


def test_sigterm_removes_the_container(client, repo):
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from skillgraft.sandbox.docker_backend import DockerSandbox
        from skillgraft.sandbox.base import SandboxLimits
        sandbox = DockerSandbox({str(repo)!r}, SandboxLimits(memory="128m"))
        print(sandbox.container.id, flush=True)
        time.sleep(120)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    container_id = child.stdout.readline().strip()
    assert exists(client, container_id)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=60) == 128 + signal.SIGTERM
    assert not exists(client, container_id)


def test_reap_removes_leftover_of_a_killed_run_and_keeps_live_ones(client, repo):
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from skillgraft.sandbox.docker_backend import DockerSandbox
        sandbox = DockerSandbox({str(repo)!r})
        print(sandbox.container.id, flush=True)
        time.sleep(120)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    leftover = child.stdout.readline().strip()
    child.kill()  # SIGKILL: no cleanup runs, the container stays behind
    child.wait()
    assert exists(client, leftover)
    with DockerSandbox(repo, FAST) as live:
        preview = reap(client, dry_run=True)
        assert exists(client, leftover)
        report = {item.container_id: item for item in reap(client)}
        assert report[leftover].removed
        assert not report[live.container.id].removed
        assert exists(client, live.container.id)
    assert not exists(client, leftover)
    assert any(item.container_id == leftover and not item.removed for item in preview)


def test_reapers_at_once_each_finish_and_leave_no_leftover(client):
    """Each worker of a cluster reaps its host as it starts, so reapers meet on the same leftovers."""
    dead_owner = {LABEL: "1", OWNER_PID: "0", OWNER_HOST: socket.gethostname()}  # pid 0 is never a process
    for _ in range(3):
        leftovers = [client.containers.run(IMAGE_TAG, ["sleep", "300"], detach=True, labels=dead_owner,
                                           network_mode="none").id for _ in range(3)]
        start, reports, errors = threading.Barrier(4), [], []

        def reaper():
            start.wait()
            try:
                reports.append(reap(client))
            except Exception as exc:  # noqa: BLE001 - the test reports what any reaper raised
                errors.append(exc)

        threads = [threading.Thread(target=reaper) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert not any(exists(client, c) for c in leftovers)
        removed = {item.container_id for report in reports for item in report if item.removed}
        assert set(leftovers) <= removed


def test_missing_image_says_how_to_build_it(repo):
    with pytest.raises(SandboxUnavailable, match="skillgraft sandbox build"):
        DockerSandbox(repo, FAST, image="skillgraft-sandbox:does-not-exist")


def test_agent_cannot_kill_or_alter_the_command_server(repo):
    with DockerSandbox(repo, FAST) as sandbox:
        kill = sandbox.execute("pkill -KILL python3")
        alter = sandbox.execute("echo tampered >> /opt/skillgraft/exec_server.py")
        assert "Operation not permitted" in kill.output and kill.returncode != 0
        assert "Permission denied" in alter.output
        assert sandbox.execute("echo alive").output == "alive\n"
        assert sandbox.execute("ps -o user= -C python3").output.split() == ["root"]


def test_a_stuck_command_server_is_replaced(repo):
    with DockerSandbox(repo, FAST) as sandbox:
        sandbox.wait_ready()
        sandbox.backstop = 1.0
        server = sandbox.container.exec_run(["pgrep", "-f", "exec_server"], user="root").output.split()  # freeze it
        sandbox.container.exec_run(["kill", "-STOP", *[pid.decode() for pid in server]], user="root")
        stuck = sandbox.execute("echo never", timeout=1)
        assert stuck.timed_out and "did not answer" in stuck.output
        assert sandbox.execute("echo back").output == "back\n"


def test_a_same_size_edit_right_after_an_import_takes_effect(repo):
    # Python trusts a .pyc whose recorded source mtime (whole seconds) and size still match; the
    # sandbox writes none, so an edit within the same second as the first import is seen.
    with DockerSandbox(repo, FAST) as sandbox:
        first = sandbox.execute("printf 'def f():\\n    return 1 < 2\\n' > m.py && python3 -c 'import m; print(m.f())'")
        second = sandbox.execute("sed -i 's/ < / > /' m.py && python3 -c 'import m; print(m.f())' && ls -a")
    assert first.output.strip() == "True"
    assert second.output.splitlines()[0] == "False" and "__pycache__" not in second.output


def test_a_sandbox_cannot_write_past_its_disk_limit(repo):
    """A write past the limit fails inside (no space, or the quota exceeded); the host's disk moves
    by no more than the limit (the engine's data root is a file on it)."""
    free_before = shutil.disk_usage("/").free
    with DockerSandbox(repo, SandboxLimits(disk="64m", command_timeout=60)) as sandbox:
        in_tmp = sandbox.execute("dd if=/dev/zero of=/tmp/fill bs=1M count=300 2>&1")
        sandbox.execute("rm -f /tmp/fill")
        in_repo = sandbox.execute("dd if=/dev/zero of=/repo/fill bs=1M count=300 2>&1")
        free_during = shutil.disk_usage("/").free
        assert sandbox.execute("echo still usable").output == "still usable\n"
    full = ("No space left on device", "Disk quota exceeded")  # what the engine's file system says
    assert any(said in in_tmp.output for said in full) and in_tmp.returncode != 0
    assert any(said in in_repo.output for said in full)
    assert free_before - free_during < (64 + 32) * 2**20  # the limit, and room for the test's own noise


def test_snapshot_names_the_files_and_rewind_puts_them_back(repo):
    with open_sandbox("docker", repo, FAST) as sandbox:
        check_snapshot_and_rewind(sandbox)
