"""Every table round trips through SQLite and a real PostgreSQL server."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlmodel import select

from skillgraft.skills import NotFound, Origin, SkillFormatError, StaleVersion, Store
from skillgraft.skills.schema import Embedding, ImmutableRowError, SkillVersion
from store_fixtures import lora_folder, pg_url, postgres_server, store, store_url, write_skill  # noqa: F401


def make_adapter(folder: Path, seed: int) -> Path:
    return lora_folder(folder, seed)


def test_skill_versions_keep_text_lineage_and_origin(store: Store) -> None:
    v1 = store.add_version("fix-imports", "Use absolute imports.\n", Origin.authored, description="Fix ImportError")
    assert (v1.number, v1.parent_id, v1.origin, v1.skill_name) == (1, None, "authored", "fix-imports")
    assert store.add_version("fix-imports", "Use absolute imports.\n", "summarised").id == v1.id  # unchanged: no-op
    v2 = store.add_version("fix-imports", "Use absolute imports; run pytest.\n", "refined")
    assert (v2.number, v2.parent_id, v2.description) == (2, v1.id, "Fix ImportError")
    branch = store.add_version("fix-imports", "Try relative imports.\n", "merged", parent_id=v1.id)
    assert (branch.number, branch.parent_id) == (3, v1.id)

    again = store.version(v2.id)
    assert again.text == v2.text and again.body == "Use absolute imports; run pytest.\n"
    assert again.frontmatter == {"name": "fix-imports", "description": "Fix ImportError"}
    assert again.created_at.tzinfo is not None
    assert [v.number for v in store.versions("fix-imports")] == [1, 2, 3]
    assert store.latest_version("fix-imports").id == branch.id
    assert store.latest_version("no-such-skill") is None
    assert [s.name for s in store.skills()] == ["fix-imports"]
    with pytest.raises(NotFound):
        store.version(10_000)
    with pytest.raises(SkillFormatError, match="description: required"):
        store.add_version("brand-new", "only a body\n", "authored")


def test_skill_versions_are_immutable(store: Store) -> None:
    v = store.add_version("pin-deps", "Pin versions.\n", "authored", description="Pin dependencies")
    with pytest.raises(ImmutableRowError), store.db.write() as s:
        row = s.get(SkillVersion, v.id)
        row.body = "changed"
    assert store.version(v.id).body == "Pin versions.\n"


def test_adapters_global_versions_and_rollback(store: Store, tmp_path: Path) -> None:
    sv = store.add_version("fix-imports", "Use absolute imports.\n", "authored", description="Fix ImportError")
    compiled = store.add_adapter(make_adapter(tmp_path / "a1", 1), "skill", "fp-llama-tiny", 4, 8.0, ["q_proj", "v_proj"],
                                 {"skill_version_id": sv.id, "hypernet_ckpt": "ckpt-1"}, skill_version_id=sv.id,
                                 hypernet_ckpt="ckpt-1")
    assert (compiled.name, compiled.version, compiled.kind) == ("fix-imports", 1, "skill")
    assert store.find_compiled(sv.id, "ckpt-1").id == compiled.id
    assert store.find_compiled(sv.id, "ckpt-2") is None
    stored = store.adapter_path(compiled.id)
    assert (stored / "adapter_model.safetensors").read_bytes() == (tmp_path / "a1" / "adapter_model.safetensors").read_bytes()

    assert store.latest_global() is None
    g1 = store.commit_global(make_adapter(tmp_path / "g1", 2), None, {"method": "init"}, base_fingerprint="fp-llama-tiny")
    g2 = store.commit_global(make_adapter(tmp_path / "g2", 3), g1.id,
                             {"method": "ema", "combined": [{"adapter_id": g1.id, "weight": 0.9}, {"adapter_id": compiled.id, "weight": 0.1}]})
    assert (g2.version, g2.parent_id, g2.rank, g2.alpha, g2.target_modules) == (2, g1.id, 4, 8.0, ["q_proj", "v_proj"])
    assert g2.base_fingerprint == "fp-llama-tiny"
    with pytest.raises(StaleVersion):
        store.commit_global(make_adapter(tmp_path / "g3", 4), g1.id, {"method": "ema"})
    g3 = store.rollback_global(1)
    assert (g3.version, g3.parent_id, g3.artifact_hash, g3.provenance["to_version"]) == (3, g2.id, g1.artifact_hash, 1)
    assert [a.version for a in store.global_history()] == [1, 2, 3]
    assert store.latest_global().id == g3.id
    with pytest.raises(NotFound):
        store.rollback_global(99)


def test_trajectories_sessions_and_scores(store: Store, tmp_path: Path) -> None:
    a = store.add_version("fix-imports", "Use absolute imports.\n", "authored", description="Fix ImportError")
    b = store.add_version("pin-deps", "Pin versions.\n", "authored", description="Pin dependencies")
    session = store.start_session("learn", {"tasks": 3})
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "fix it"}]}))
    t1 = store.add_trajectory(path, "task-1", "imports", "success", 1.0, 0.02, 7, {"model_s": 1.5}, [a.id, b.id], [],
                              session_id=session.id, model="replay:x")
    t2 = store.add_trajectory(path, "task-2", "deps", "failure", 0.0, 0.01, 3, {}, [b.id], [], session_id=session.id)
    assert store.trajectory_path(t1).read_text() == path.read_text()
    assert [t.id for t in store.trajectories(skill="fix-imports")] == [t1.id]
    assert [t.id for t in store.trajectories(skill="pin-deps")] == [t2.id, t1.id]
    assert [t.id for t in store.trajectories(session_id=session.id)] == [t2.id, t1.id]
    assert store.trajectory(t1.id).timings == {"model_s": 1.5}
    child = store.add_version("fix-imports", "Use absolute imports, then rerun.\n", "summarised", trajectory_id=t1.id,
                              session_id=session.id)
    assert store.version(child.id).trajectory_id == t1.id

    store.add_score("skill_version", a.id, "imports", 0.5, 10, condition="text", session_id=session.id)
    store.add_score("skill_version", a.id, "imports", 0.8, 30, condition="text")
    assert [s.score for s in store.scores(subject_kind="skill_version", subject_id=a.id)] == [0.5, 0.8]
    assert store.version_scores([a.id])[a.id] == (pytest.approx(0.725), 40)
    ended = store.end_session(session.id, {"solved": 1})
    assert store.session(session.id).summary == {"solved": 1} and ended.ended_at is not None
    summary = {s.name: s for s in store.skill_summaries()}
    assert (summary["fix-imports"].uses, summary["pin-deps"].uses) == (1, 2)
    assert summary["fix-imports"].score == pytest.approx(0.725) and summary["pin-deps"].score is None


def test_cycleqd_runs_archive_and_score_cache(store: Store, tmp_path: Path) -> None:
    ckpt = store.add_adapter(make_adapter(tmp_path / "c", 5), "checkpoint", "fp", 8, 16, ["q_proj"], {"source": "expert"},
                             name="expert-db")
    run = store.create_qd_run({"tasks": ["mbpp", "db"], "grid": 5})
    store.put_archive_entry(run.id, "mbpp", (1, 2), ckpt.id, 0.4, {"mbpp": 0.4, "db": 0.3})
    store.put_archive_entry(run.id, "mbpp", (1, 2), ckpt.id, 0.6, {"mbpp": 0.6, "db": 0.3})
    store.put_archive_entry(run.id, "mbpp", (0, 4), ckpt.id, 0.2, {"mbpp": 0.2, "db": 0.9})
    entries = store.archive(run.id, "mbpp")
    assert sorted((tuple(e.cell), e.quality) for e in entries) == [((0, 4), 0.2), ((1, 2), 0.6)]
    assert store.archive(run.id, "db") == []
    store.update_qd_run(run.id, 3, {"rng": [1, 2, 3]})
    assert (store.qd_run(run.id).generation, store.qd_run(run.id).state) == (3, {"rng": [1, 2, 3]})
    assert store.cached_score(ckpt.artifact_hash, "mbpp") is None
    store.put_cached_score(ckpt.artifact_hash, "mbpp", 0.61, episodes=20)
    store.put_cached_score(ckpt.artifact_hash, "mbpp", 0.62, episodes=20)
    assert store.cached_score(ckpt.artifact_hash, "mbpp") == 0.62


def test_embeddings_round_trip_as_float32(store: Store) -> None:
    vector = np.random.default_rng(0).standard_normal(384).astype(np.float32)
    with store.db.write() as s:
        s.add(Embedding(content_hash="a" * 64, model="m", dim=384, vector=vector.tobytes()))
    with store.db.read() as s:
        row = s.exec(select(Embedding)).one()
    assert np.array_equal(np.frombuffer(row.vector, dtype=np.float32), vector)


def test_reopening_keeps_everything(store_url: str, tmp_path: Path) -> None:
    with Store(store_url, tmp_path / "artifacts") as first:
        v = first.import_skill(write_skill(tmp_path / "src", "fix-imports", "Fix ImportError", "Body.\n",
                                           {"scripts/check.sh": "python -c 'import pkg'\n"}))
    with Store(store_url, tmp_path / "artifacts") as second:
        again = second.latest_version("fix-imports")
        assert (again.id, again.text) == (v.id, v.text)
        assert (second.resources_path(again) / "scripts" / "check.sh").read_text() == "python -c 'import pkg'\n"
        assert second.check(verify=True).ok


def test_an_index_added_to_the_schema_reaches_a_store_made_before_it(tmp_path: Path) -> None:
    import sqlite3

    Store.at(tmp_path).close()
    with sqlite3.connect(tmp_path / "store.db") as db:  # as a store written before the index existed
        db.execute("DROP INDEX ix_skillversion_trajectory_id")
    Store.at(tmp_path).close()
    with sqlite3.connect(tmp_path / "store.db") as db:
        assert "ix_skillversion_trajectory_id" in [row[1] for row in db.execute("PRAGMA index_list(skillversion)")]
