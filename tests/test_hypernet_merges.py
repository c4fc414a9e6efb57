"""Named merges of LoRA adapters against dense ground truth, and the registry that names them."""
from __future__ import annotations

import pytest
import torch

from skillgraft.hypernet import lora, merges
from skillgraft.hypernet.merges import merge, merge_names, register_merge
from lora_support import best_rank, close, rand_lowrank, random_delta


def test_the_merges_are_named():
    assert merge_names() == ["cat", "svd", "factors"]
    with pytest.raises(ValueError, match="unknown merge 'ties'"):
        merge("ties", [random_delta(1)])


def test_cat_is_the_exact_weighted_sum_and_svd_its_best_rank_r():
    a, b, c = random_delta(1), random_delta(2, r=3), random_delta(3, r=2)
    weights = [0.5, -1.5, 2.0]
    exact = merge("cat", [a, b, c], weights)
    bounded = merge("svd", [a, b, c], weights, rank=3)
    for name in a:
        want = 0.5 * a[name].dense() - 1.5 * b[name].dense() + 2.0 * c[name].dense()
        assert exact[name].rank == 9 and close(exact[name].dense(), want)
        assert bounded[name].rank == 3 and close(bounded[name].dense(), best_rank(want, 3), 1e-4)
    assert all(torch.equal(merge("cat", [a, b])[n].dense(), lora.add(a, b)[n].dense()) for n in a)


def test_the_ranks_a_merge_needs_are_checked():
    a, b = random_delta(1), random_delta(2)
    with pytest.raises(ValueError, match="give no rank"):
        merge("cat", [a, b], rank=4)
    for method in ("svd", "factors"):
        with pytest.raises(ValueError, match="give one"):
            merge(method, [a, b])
    with pytest.raises(ValueError, match="2 adapters but 1 weights"):
        merge("svd", [a, b], [1.0], rank=4)


def test_factors_averages_the_factors_apart():
    a, b = random_delta(1), random_delta(2, r=2)
    b["l1.k_proj"] = rand_lowrank(8, 16, 2, 7)
    out = merge("factors", [a, b], [0.25, 0.75], rank=4)
    for name in a:
        g, n = lora.truncate({name: a[name]}, 4)[name], b[name]
        B = 0.25 * g.B + 0.75 * torch.cat([n.B, n.B.new_zeros(n.B.shape[0], 2)], dim=1)
        A = 0.25 * g.A + 0.75 * torch.cat([n.A, n.A.new_zeros(2, n.A.shape[1])], dim=0)
        assert close(out[name].dense(), B @ A)
    assert close(out["l1.k_proj"].dense(), 0.75 * b["l1.k_proj"].dense())
    assert list(out) == ["l0.q_proj", "l0.v_proj", "l1.k_proj"]


def test_a_registered_merge_is_used_by_name(monkeypatch):
    monkeypatch.setattr(merges, "MERGES", dict(merges.MERGES))

    @register_merge("first")
    def first(deltas, weights, rank):
        return lora.scale(deltas[0], weights[0])

    a, b = random_delta(1), random_delta(2)
    assert merge_names()[-1] == "first"
    out = merge("first", [a, b], [2.0, 1.0])
    assert all(torch.equal(out[n].dense(), (a[n].B * 2.0) @ a[n].A) for n in a)
    with pytest.raises(ValueError, match="registered twice"):
        register_merge("svd")(first)
