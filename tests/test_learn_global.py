"""The EMA step into the global adapter: exactness, crash safety, concurrency, rollback.

Processes here are real: a learner is killed with SIGKILL in the middle of its work, and two
learners run at once on one SQLite store.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from skillgraft.evolve.learn.global_adapter import EmaConfig, factor_ema, fold_into_global
from skillgraft.hypernet.lora import LowRank, to_dense
from skillgraft.hypernet.peft_io import load_adapter, save_adapter
from skillgraft.skills.store import Store

MODULES = ("model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.q_proj")
DIM, RANK = 24, 4


def random_delta(seed: int, rank: int = RANK) -> dict[str, LowRank]:
    g = torch.Generator().manual_seed(seed)
    return {m: LowRank(B=torch.randn(DIM, rank, generator=g), A=torch.randn(rank, DIM, generator=g) / DIM) for m in MODULES}


def open_store(root: Path) -> Store:
    return Store(f"sqlite:///{root / 'store.db'}", root / "artifacts")


def add_skill_adapter(store: Store, root: Path, seed: int) -> int:
    folder = save_adapter(random_delta(seed), root / f"src-{seed}", base_model_name="tiny", fingerprint="fp-tiny",
                          target_modules=["q_proj", "v_proj"])
    rec = store.add_adapter(folder, kind="skill", base_fingerprint="fp-tiny", rank=RANK, alpha=RANK,
                            target_modules=["q_proj", "v_proj"], provenance={"seed": seed}, name=f"skill-{seed}")
    return rec.id


def dense_of(store: Store, adapter_id: int) -> dict[str, torch.Tensor]:
    return to_dense(load_adapter(store.adapter_path(adapter_id))[0])


def replay_chain(store: Store, history) -> dict[str, torch.Tensor]:
    """The dense EMA recomputed from each version's provenance, in commit order."""
    g = None
    for rec in history:
        parts = rec.provenance["combined"]
        new = dense_of(store, parts[-1]["adapter_id"])
        alpha = rec.provenance["alpha"]
        g = {m: alpha * new[m] + ((1 - alpha) * g[m] if g is not None else 0) for m in new}
    return g


def test_ema_step_matches_dense_ema(tmp_path):
    store = open_store(tmp_path)
    config = EmaConfig(alpha=0.25, rank=3 * RANK)  # rank 3r holds the exact sum of three rank-r parts
    ids = [add_skill_adapter(store, tmp_path, s) for s in (1, 2, 3)]
    for i in ids:
        result = fold_into_global(store, i, config, provenance={"session_id": None})
        assert result.committed
    history = store.global_history()
    assert [h.version for h in history] == [1, 2, 3]
    # first version copies the first skill; then (1-α)G + αN twice
    a, b, c = (dense_of(store, i) for i in ids)
    expected = {m: 0.75 * (0.75 * a[m] + 0.25 * b[m]) + 0.25 * c[m] for m in MODULES}
    got = dense_of(store, history[-1].id)
    for m in MODULES:
        torch.testing.assert_close(got[m], expected[m], rtol=1e-4, atol=1e-5)
    assert history[-1].provenance["combined"][0]["adapter_id"] == history[-2].id
    assert history[-1].provenance["combined"][1] == {"adapter_id": ids[2], "weight": 0.25}


def test_ema_step_at_bounded_rank_is_best_low_rank_approximation(tmp_path):
    store = open_store(tmp_path)
    config = EmaConfig(alpha=0.3, rank=RANK)
    ids = [add_skill_adapter(store, tmp_path, s) for s in (4, 5)]
    for i in ids:
        fold_into_global(store, i, config)
    a, b = (dense_of(store, i) for i in ids)
    got = dense_of(store, store.latest_global().id)
    for m in MODULES:
        u, s, vh = torch.linalg.svd(0.7 * a[m] + 0.3 * b[m])
        best = u[:, :RANK] @ torch.diag(s[:RANK]) @ vh[:RANK]
        torch.testing.assert_close(got[m], best, rtol=1e-4, atol=1e-5)
        assert load_adapter(store.adapter_path(store.latest_global().id))[0][m].rank == RANK


def test_factor_ema_is_not_the_ema_of_delta_w():
    g, n = random_delta(7), random_delta(8)
    wrong = to_dense(factor_ema(g, n, 0.5, RANK))
    right = {m: 0.5 * g[m].dense() + 0.5 * n[m].dense() for m in MODULES}
    gap = max(float((wrong[m] - right[m]).norm() / right[m].norm()) for m in MODULES)
    assert gap > 0.1


def test_factor_ema_departs_from_the_exact_ema_only_over_distinct_updates():
    """Why the ablation's drift is printed with the number of distinct adapters folded: folding one
    adapter again and again, averaging factors gives the exact EMA (every update shares its A)."""
    from skillgraft.evolve.learn.global_adapter import combine

    def gap(updates) -> float:
        exact = factors = None
        for new in updates:
            exact, _ = combine(exact, new, EmaConfig(alpha=0.5, rank=RANK, mode="exact"))
            factors, _ = combine(factors, new, EmaConfig(alpha=0.5, rank=RANK, mode="factors"))
        e, f = to_dense(exact), to_dense(factors)
        return max(float((f[m] - e[m]).norm() / e[m].norm()) for m in MODULES)

    same, other = random_delta(9), random_delta(10)
    assert gap([same] * 4) < 1e-5
    assert gap([same, same, other, other]) > 0.1


def test_rollback_restores_an_earlier_global_exactly(tmp_path):
    store = open_store(tmp_path)
    config = EmaConfig(alpha=0.5, rank=RANK)
    for s in (10, 11, 12):
        fold_into_global(store, add_skill_adapter(store, tmp_path, s), config)
    v1 = store.global_history()[0]
    before = load_adapter(store.adapter_path(v1.id))[0]
    head = store.rollback_global(1)
    assert head.version == 4 and store.latest_global().id == head.id
    after = load_adapter(store.adapter_path(head.id))[0]
    for m in MODULES:
        assert torch.equal(after[m].A, before[m].A) and torch.equal(after[m].B, before[m].B)
    # learning continues from the restored version
    nxt = fold_into_global(store, add_skill_adapter(store, tmp_path, 13), config).record
    assert nxt.provenance["combined"][0]["adapter_id"] == head.id


def _worker(root: Path, seeds: list[int], alpha: float) -> None:
    """A learner process: folds one new skill adapter per seed, printing after each commit."""
    store = open_store(root)
    config = EmaConfig(alpha=alpha, rank=2 * RANK)
    for s in seeds:
        aid = add_skill_adapter(store, root, s)
        fold_into_global(store, aid, config, provenance={"seed": s})
        print(f"committed {s}", flush=True)


def _spawn(root: Path, seeds: list[int], alpha: float = 0.2) -> subprocess.Popen:
    code = (
        "import sys, json; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "import test_learn_global as t; t._worker(Path(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent), str(root), json.dumps(seeds), str(alpha)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_concurrent_learners_lose_no_update(tmp_path):
    open_store(tmp_path).close()  # create the schema once, before the race
    a = _spawn(tmp_path, list(range(100, 105)))
    b = _spawn(tmp_path, list(range(200, 205)))
    for p in (a, b):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    store = open_store(tmp_path)
    history = store.global_history()
    assert len(history) == 10
    seeds = sorted(h.provenance["seed"] for h in history)
    assert seeds == list(range(100, 105)) + list(range(200, 205))
    # a chain: every version's parent is the one before it, as the EMA used it
    for prev, cur in zip(history, history[1:]):
        assert cur.parent_id == prev.id
        assert cur.provenance["combined"][0]["adapter_id"] == prev.id
    # and each version's weights are the rank-R EMA of its parent and its own update
    for prev, cur in zip(history, history[1:]):
        new = dense_of(store, cur.provenance["combined"][1]["adapter_id"])
        g = dense_of(store, prev.id)
        got = dense_of(store, cur.id)
        for m in MODULES:
            full = 0.8 * g[m] + 0.2 * new[m]
            u, s, vh = torch.linalg.svd(full)
            best = u[:, : 2 * RANK] @ torch.diag(s[: 2 * RANK]) @ vh[: 2 * RANK]
            torch.testing.assert_close(got[m], best, rtol=1e-3, atol=1e-5)


def test_learner_killed_mid_step_leaves_store_consistent_and_next_resumes(tmp_path):
    open_store(tmp_path).close()
    proc = _spawn(tmp_path, list(range(300, 400)))
    committed = 0
    for line in proc.stdout:
        committed += line.startswith("committed")
        if committed >= 3:
            break
    proc.send_signal(signal.SIGKILL)  # while it is already computing the next step
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    store = open_store(tmp_path)
    report = store.check(verify=True)
    assert not report.missing and not report.corrupt, report  # no row names absent or partial files
    history = store.global_history()
    assert len(history) >= 3
    for rec in history:  # every committed version loads in full
        delta, info = load_adapter(store.adapter_path(rec.id))
        assert set(delta) == set(MODULES) and info.fingerprint == "fp-tiny"
    head = history[-1]
    result = fold_into_global(store, add_skill_adapter(store, tmp_path, 999), EmaConfig(alpha=0.2, rank=2 * RANK))
    assert result.record.parent_id == head.id
    assert result.record.provenance["combined"][0]["adapter_id"] == head.id


def test_a_refused_candidate_leaves_the_global_as_it_was(tmp_path):
    store = open_store(tmp_path)
    cfg = EmaConfig(alpha=0.5, rank=2 * RANK)
    seen = []
    first = fold_into_global(store, add_skill_adapter(store, tmp_path, 1), cfg,
                             gate=lambda candidate, current: seen.append(current) is None).record
    assert seen == [None] and first.version == 1  # the first version is weighed against no adapter
    seen.clear()
    second = add_skill_adapter(store, tmp_path, 2)

    def refuse(candidate: Path, current: Path) -> bool:
        seen.append((to_dense(load_adapter(candidate)[0]), current))
        return False

    result = fold_into_global(store, second, cfg, gate=refuse)
    assert not result.committed and result.record.id == first.id
    assert [r.id for r in store.global_history()] == [first.id]
    # the gate was shown the real candidate (the EMA of head and new) against the head's own folder
    candidate, current = seen[0]
    d1, d2 = dense_of(store, first.id), dense_of(store, second)
    for m in MODULES:
        torch.testing.assert_close(candidate[m], 0.5 * d1[m] + 0.5 * d2[m], rtol=1e-4, atol=1e-5)
    assert current == store.adapter_path(first.id)
    accepted = fold_into_global(store, second, cfg, gate=lambda candidate, current: True)
    assert accepted.committed and accepted.record.version == 2 and accepted.record.parent_id == first.id


def test_a_step_that_leaves_the_global_as_it_is_commits_nothing_and_asks_no_gate(tmp_path):
    store = open_store(tmp_path)
    cfg = EmaConfig(alpha=0.5, rank=2 * RANK)
    skill = add_skill_adapter(store, tmp_path, 1)
    first = fold_into_global(store, skill, cfg).record  # the first version copies the skill
    asked = []
    again = fold_into_global(store, skill, cfg, gate=lambda candidate, current: asked.append(current) is None)
    # the EMA of an adapter with itself is that adapter: no second version, no validation asked for
    assert again.unchanged and not again.committed and again.record.id == first.id and asked == []
    assert [r.id for r in store.global_history()] == [first.id]
    other = fold_into_global(store, add_skill_adapter(store, tmp_path, 2), cfg,
                             gate=lambda candidate, current: asked.append(current) is None)
    assert other.committed and not other.unchanged and asked == [store.adapter_path(first.id)]
    assert [r.version for r in store.global_history()] == [1, 2]
