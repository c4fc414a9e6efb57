"""The inspection commands: skills, adapters, store."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillgraft.cli import app
from skillgraft.skills import Store
from store_fixtures import write_skill
from test_store_schema import make_adapter


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "home"
    monkeypatch.setenv("SKILLGRAFT_HOME", str(root))
    monkeypatch.delenv("SKILLGRAFT_STORE", raising=False)
    return root


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.stdout


def seeded(home: Path, tmp_path: Path) -> Store:
    tree = tmp_path / "tree"
    write_skill(tree, "fix-imports", "Fix ImportError", "Use absolute imports.\n", {"scripts/check.sh": "echo ok\n"})
    write_skill(tree, "pin-deps", "Pin dependencies", "Pin every version.\n")
    write_skill(tree, "bad--name", "x", "y\n")
    out = json.loads(run("skills", "import", str(tree), "--json", code=2))
    assert {r["name"]: r["status"] for r in out} == {"fix-imports": "created", "pin-deps": "created", "bad--name": "error"}
    assert "consecutive hyphens" in next(r["error"] for r in out if r["name"] == "bad--name")
    return Store(f"sqlite:///{home / 'store.db'}", home / "artifacts")


def test_skills_ls_show_history_diff(home: Path, tmp_path: Path) -> None:
    store = seeded(home, tmp_path)
    v1 = store.latest_version("fix-imports")
    traj = tmp_path / "t.json"
    traj.write_text("{}")
    t = store.add_trajectory(traj, "task-1", "imports", "success", 1.0, 0.0, 4, {}, [v1.id], [])
    v2 = store.add_version("fix-imports", "Use absolute imports.\nThen run pytest.\n", "summarised", trajectory_id=t.id)
    store.add_score("skill_version", v2.id, "imports", 0.75, 8)
    store.add_score("skill_version", store.latest_version("pin-deps").id, "deps", 0.25, 8)

    by_uses = json.loads(run("skills", "ls", "--sort", "uses", "--json"))
    assert [r["name"] for r in by_uses] == ["fix-imports", "pin-deps"] and by_uses[0]["uses"] == 1
    by_score = json.loads(run("skills", "ls", "--sort", "score", "--json"))
    assert [(r["name"], r["score"]) for r in by_score] == [("fix-imports", 0.75), ("pin-deps", 0.25)]
    by_recency = json.loads(run("skills", "ls", "--sort", "recency", "--json"))
    assert by_recency[0]["name"] == "fix-imports" and by_recency[0]["version"] == 2
    assert "fix-imports" in run("skills", "ls")

    shown = json.loads(run("skills", "show", "fix-imports", "--version", "1", "--json"))
    assert (shown["number"], shown["origin"], shown["files"]) == (1, "imported", ["scripts/check.sh"])
    assert "Then run pytest." in run("skills", "show", "fix-imports")
    run("skills", "show", "no-such-skill", code=2)

    lineage = json.loads(run("skills", "history", "fix-imports", "--json"))
    assert [(v["number"], v["parent"], v["origin"], v["score"]) for v in lineage] == [
        (1, None, "imported", None), (2, 1, "summarised", 0.75)]
    assert lineage[1]["trajectory_id"] == t.id
    tree = run("skills", "history", "fix-imports")
    assert "summarised" in tree and f"from trajectory {t.id}" in tree

    diff = run("skills", "diff", "fix-imports", "1", "2")
    assert "+Then run pytest." in diff
    store.close()


def test_skills_export_and_search(home: Path, tmp_path: Path) -> None:
    seeded(home, tmp_path).close()
    run("skills", "export", "fix-imports", str(tmp_path / "out"))
    assert (tmp_path / "out" / "fix-imports" / "SKILL.md").read_bytes() == (tmp_path / "tree" / "fix-imports" / "SKILL.md").read_bytes()
    assert (tmp_path / "out" / "fix-imports" / "scripts" / "check.sh").read_text() == "echo ok\n"
    run("skills", "export", "fix-imports", str(tmp_path / "out"), code=1)
    run("skills", "export", "fix-imports", str(tmp_path / "out"), "--force")
    hits = json.loads(run("skills", "search", "ModuleNotFoundError when importing my package", "-k", "2", "--json"))
    assert [h["skill"] for h in hits] == ["fix-imports", "pin-deps"]


def test_adapters_ls_show_rollback(home: Path, tmp_path: Path) -> None:
    store = Store(f"sqlite:///{home / 'store.db'}", home / "artifacts")
    g1 = store.commit_global(make_adapter(tmp_path / "g1", 1), None, {"method": "init"}, base_fingerprint="fp-tiny")
    g2 = store.commit_global(make_adapter(tmp_path / "g2", 2), g1.id, {"method": "ema", "combined": [{"adapter_id": g1.id, "weight": 0.9}]})
    listed = json.loads(run("adapters", "ls", "--kind", "global", "--json"))
    assert [a["version"] for a in listed] == [1, 2]
    assert "#1×0.9" in run("adapters", "ls")  # provenance shown as the weighted parents
    shown = json.loads(run("adapters", "show", "global:2", "--json"))
    assert shown["id"] == g2.id and "adapter_model.safetensors" in shown["files"]
    rolled = json.loads(run("adapters", "rollback", "global", "--to", "1", "--json"))
    assert (rolled["version"], rolled["artifact_hash"]) == (3, g1.artifact_hash)
    assert store.latest_global().version == 3
    run("adapters", "rollback", "global", "--to", "9", code=2)
    store.close()


def test_store_check_and_gc(home: Path, tmp_path: Path) -> None:
    store = seeded(home, tmp_path)
    assert json.loads(run("store", "check", "--verify", "--json"))["ok"] is True
    orphan = store.artifacts.put_files({"stray.bin": b"nobody names me"})
    (store.artifacts.tmp / "dead.partial").mkdir()
    report = json.loads(run("store", "check", "--json"))
    assert report["orphans"] == [orphan] and len(report["leftovers"]) == 1
    kept = json.loads(run("store", "gc", "--json"))  # default grace keeps fresh files
    assert kept["removed"] == [] and kept["kept_recent"] == 2
    gone = json.loads(run("store", "gc", "--grace", "0", "--json"))
    assert gone["removed"] == [orphan] and len(gone["leftovers"]) == 1

    shutil.rmtree(store.resources_path(store.latest_version("fix-imports")))
    broken = json.loads(run("store", "check", "--json", code=1))
    assert [(m["table"], m["detail"]) for m in broken["missing"]] == [("skillversion", "artifact folder missing")]
    assert "rows without their files" in run("store", "check", code=1)
    store.close()
