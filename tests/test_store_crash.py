"""Killed processes and racing writers: the store keeps whole skills, whole files and every version."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from skillgraft.skills import Store
from store_fixtures import lora_folder, pg_url, postgres_server, store_url, write_skill  # noqa: F401

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
TREE = 80


def spawn(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc: subprocess.Popen, marker: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if marker in line:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"child ended before {marker!r}: {proc.stderr.read()}")
    raise AssertionError(f"child never printed {marker!r}")


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


def make_tree(root: Path, n: int) -> Path:
    for i in range(n):
        write_skill(root, f"skill-{i:04d}", f"Generated skill {i}", f"Step {i}: do the thing.\n" * 20,
                    {"scripts/run.sh": f"echo {i}\n" * 200, "references/notes.md": f"notes {i}\n"})
    return root


IMPORT_TREE = """
    import sys
    from pathlib import Path
    from skillgraft.skills import Store
    store = Store(sys.argv[1], Path(sys.argv[2]))
    store.import_tree(Path(sys.argv[3]), batch=int(sys.argv[4]), on_result=lambda r: print("imported", r.name, flush=True))
    print("done", flush=True)
"""


@pytest.mark.parametrize("batch", [1, 10])
def test_killed_tree_import_leaves_only_whole_skills(batch: int, tmp_path: Path) -> None:
    url, artifacts = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "artifacts"
    tree = make_tree(tmp_path / "tree", TREE)
    Store(url, artifacts).close()  # schema exists before the child races to write
    child = spawn(IMPORT_TREE, url, str(artifacts), str(tree), str(batch))
    for _ in range(batch * 2):  # two whole batches in, then the process dies
        wait_for_line(child, "imported")
    kill(child)

    store = Store(url, artifacts)
    skills = store.skills()
    assert 0 < len(skills) < TREE, "the import should have been killed part way"
    assert len(skills) % batch == 0, "a batch commits all its skills or none"
    for skill in skills:
        versions = store.versions(skill.name)
        assert len(versions) == 1
        files = store.resources_path(versions[0])
        assert (files / "scripts" / "run.sh").read_text().count("echo") == 200
    report = store.check(verify=True)
    assert report.ok and not report.missing and not report.corrupt

    done = {r.name: r.status for r in store.import_tree(tree, batch=batch)}
    assert sum(s == "unchanged" for s in done.values()) == len(skills)
    assert sum(s == "created" for s in done.values()) == TREE - len(skills)
    store.gc(grace_s=0)
    assert store.check(verify=True).orphans == [] and store.check().leftovers == []
    store.close()


def big_adapter(tmp_path: Path) -> Path:
    """An adapter folder large enough that a write of it can be caught half done."""
    return lora_folder(tmp_path / "adapter", int.from_bytes(os.urandom(4), "little"), width=3 << 17, modules=("q_proj",))


SLOW_ADAPTER_WRITE = """
    import sys, time
    from pathlib import Path
    import skillgraft.skills.artifacts as artifacts
    from skillgraft.skills import Store

    def copy_half_then_hang(src, dst, digest):
        dst.write(src.read(1 << 20))  # part of the file reaches the disk...
        dst.flush()
        print("half-written", flush=True)
        time.sleep(600)               # ...and the process dies here
    artifacts._copy_file = copy_half_then_hang
    store = Store(sys.argv[1], Path(sys.argv[2]))
    store.add_adapter(Path(sys.argv[3]), "checkpoint", "fp", 4, 8, ["q_proj"], {}, name="big")
"""

SLOW_ROW_COMMIT = """
    import sys, time
    from pathlib import Path
    from skillgraft.skills import Store
    import skillgraft.skills.adapters as adapters

    store = Store(sys.argv[1], Path(sys.argv[2]))
    def hang_before_commit(fn):
        print("files-placed", flush=True)  # artifact is in place, the row is not yet written
        time.sleep(600)
    adapters.retrying = hang_before_commit
    store.add_adapter(Path(sys.argv[3]), "checkpoint", "fp", 4, 8, ["q_proj"], {}, name="big")
"""


@pytest.mark.parametrize(("script", "marker"), [(SLOW_ADAPTER_WRITE, "half-written"), (SLOW_ROW_COMMIT, "files-placed")],
                         ids=["killed-mid-file", "killed-before-row"])
def test_killed_artifact_write_leaves_no_row_pointing_at_a_partial_file(script: str, marker: str, store_url: str,
                                                                        tmp_path: Path) -> None:
    artifacts, adapter = tmp_path / "artifacts", big_adapter(tmp_path)
    Store(store_url, artifacts).close()
    child = spawn(script, store_url, str(artifacts), str(adapter))
    wait_for_line(child, marker)
    kill(child)

    store = Store(store_url, artifacts)
    assert store.adapters() == []
    report = store.check(verify=True)
    assert report.ok
    if marker == "half-written":
        assert len(report.leftovers) == 1 and report.orphans == []
    else:
        assert report.leftovers == [] and len(report.orphans) == 1
    for h in store.artifacts.hashes():
        assert store.artifacts.verify(h), "nothing partial is ever under objects/"
    gone = store.gc(grace_s=0)
    assert len(gone.removed) + len(gone.leftovers) == 1
    row = store.add_adapter(adapter, "checkpoint", "fp", 4, 8, ["q_proj"], {}, name="big")
    assert (store.adapter_path(row.id) / "adapter_model.safetensors").read_bytes() == (adapter / "adapter_model.safetensors").read_bytes()
    assert store.check(verify=True).ok and store.check().orphans == []
    store.close()


def test_the_next_writer_removes_a_dead_writers_partial_files_at_once(store_url: str, tmp_path: Path) -> None:
    artifacts, adapter = tmp_path / "artifacts", big_adapter(tmp_path)
    Store(store_url, artifacts).close()
    child = spawn(SLOW_ADAPTER_WRITE, store_url, str(artifacts), str(adapter))
    wait_for_line(child, "half-written")
    kill(child)
    store = Store(store_url, artifacts)
    assert [p.name.endswith(".partial") for p in store.check().leftovers] == [True]
    live = store.artifacts.tmp / f"{os.uname().nodename.replace('.', '_')}.{os.getpid()}.0.partial"
    live.mkdir()  # a write of a process still running stays
    store.add_version("after-the-crash", "Body.\n", "imported", description="Written next", files={"a.txt": "x\n"})
    assert [p.name for p in store.check().leftovers] == [live.name]
    store.close()


ADD_VERSIONS = """
    import sys, time
    from pathlib import Path
    from skillgraft.skills import Store
    url, artifacts, who, n, go = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), Path(sys.argv[5])
    store = Store(url, artifacts)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
    for i in range(n):
        store.add_version("shared-skill", f"Step {i} from {who}.\\n", "refined", description="Shared by two writers")
    print("done", flush=True)
"""


def test_two_processes_adding_versions_lose_nothing(store_url: str, tmp_path: Path) -> None:
    artifacts, go, n = tmp_path / "artifacts", tmp_path / "go", 12
    Store(store_url, artifacts).close()
    writers = [spawn(ADD_VERSIONS, store_url, str(artifacts), who, str(n), str(go)) for who in ("alpha", "beta")]
    for w in writers:
        wait_for_line(w, "ready")
    go.touch()
    for w in writers:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err

    store = Store(store_url, artifacts)
    versions = store.versions("shared-skill")
    assert [v.number for v in versions] == list(range(1, 2 * n + 1))
    assert {v.body for v in versions} == {f"Step {i} from {who}.\n" for i in range(n) for who in ("alpha", "beta")}
    assert versions[0].parent_id is None
    assert all(v.parent_id == prev.id for prev, v in zip(versions, versions[1:])), "lineage is one unbroken chain"
    store.close()


COMMIT_GLOBAL = """
    import sys, time
    from pathlib import Path
    from skillgraft.skills import Store, StaleVersion
    url, artifacts, folder, go, n = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5])
    store = Store(url, artifacts)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
    wins = stale = 0
    while wins < n:
        head = store.latest_global()
        try:
            store.commit_global(folder, head.id, {"writer": folder.name})
            wins += 1
        except StaleVersion:
            stale += 1
    print("stale", stale, flush=True)
"""


def test_racing_global_commits_form_one_chain(store_url: str, tmp_path: Path) -> None:
    artifacts, go, n = tmp_path / "artifacts", tmp_path / "go", 8
    folders = []
    for who in ("alpha", "beta"):
        folders.append(lora_folder(tmp_path / who, len(folders), modules=("q_proj",), who=who))
    with Store(store_url, artifacts) as store:
        store.commit_global(folders[0], None, {"method": "init"}, base_fingerprint="fp")
    writers = [spawn(COMMIT_GLOBAL, store_url, str(artifacts), str(f), str(go), str(n)) for f in folders]
    for w in writers:
        wait_for_line(w, "ready")
    go.touch()
    for w in writers:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
    with Store(store_url, artifacts) as store:
        history = store.global_history()
        assert [a.version for a in history] == list(range(1, 2 * n + 2))
        assert all(a.parent_id == prev.id for prev, a in zip(history, history[1:]))
        assert sum(a.provenance.get("writer") == "beta" for a in history) == n
