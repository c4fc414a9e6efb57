"""LoRA algebra against dense ground truth."""
from __future__ import annotations

import pytest
import torch

from skillgraft.hypernet import lora
from skillgraft.hypernet.lora import LowRank
from lora_support import close, rand_lowrank, random_delta


def test_concat_with_weights_is_exact_weighted_sum():
    a, b, c = random_delta(1), random_delta(2, r=3), random_delta(3, r=2)
    out = lora.concat([a, b, c], [0.5, -1.5, 2.0])
    assert out["l0.q_proj"].rank == 4 + 3 + 2
    for name in a:
        want = 0.5 * a[name].dense() - 1.5 * b[name].dense() + 2.0 * c[name].dense()
        assert close(out[name].dense(), want)


def test_module_missing_on_one_side_counts_as_zero():
    a = random_delta(1)
    b = {"l0.q_proj": rand_lowrank(24, 16, 2, 9), "l1.k_proj": rand_lowrank(8, 16, 2, 10)}
    out = lora.add(a, b)
    assert set(out) == {"l0.q_proj", "l0.v_proj", "l1.k_proj"}
    assert close(out["l0.v_proj"].dense(), a["l0.v_proj"].dense())
    assert close(out["l1.k_proj"].dense(), b["l1.k_proj"].dense())
    assert close(out["l0.q_proj"].dense(), a["l0.q_proj"].dense() + b["l0.q_proj"].dense())
    assert close(lora.subtract(out, b)["l0.q_proj"].dense(), a["l0.q_proj"].dense())


def test_shape_conflict_is_refused():
    with pytest.raises(ValueError, match="shapes differ"):
        lora.add({"m": rand_lowrank(4, 4, 1, 0)}, {"m": rand_lowrank(5, 4, 1, 1)})


def test_scale():
    a = random_delta(4)
    out = lora.scale(a, -0.25)
    for name in a:
        assert close(out[name].dense(), -0.25 * a[name].dense())


def test_truncate_matches_dense_truncated_svd():
    big = lora.concat([random_delta(i) for i in range(5)], [1.0] * 5)  # rank 20 on a 24x16 / 8x16 module
    small = lora.truncate(big, 5)
    for name, lr in small.items():
        assert lr.rank == 5
        u, s, vh = torch.linalg.svd(big[name].dense(), full_matrices=False)
        want = (u[:, :5] * s[:5]) @ vh[:5]
        assert close(lr.dense(), want, 1e-4)


def test_truncate_keeps_low_rank_modules_exact():
    a = random_delta(5, r=3)
    out = lora.truncate(a, 8)
    for name in a:
        assert torch.equal(out[name].dense(), a[name].dense())


def test_svd_reconstructs_and_matches_singular_values():
    a = lora.concat([random_delta(6), random_delta(7)], [1.0, 0.3])
    for name, (u, s, vh) in lora.svd(a).items():
        dense = a[name].dense()
        assert close((u * s) @ vh, dense, 1e-5)
        ref = torch.linalg.svdvals(dense)[: s.shape[0]]
        assert torch.allclose(s, ref, rtol=1e-4, atol=1e-4)
        assert torch.allclose(u.T @ u, torch.eye(u.shape[1]), atol=1e-4)


def test_low_rank_ema_equals_dense_ema_then_truncated_svd():
    torch.manual_seed(0)
    g = {"m": LowRank(B=torch.randn(64, 16), A=torch.randn(16, 48))}
    n = {"m": LowRank(B=torch.randn(64, 8), A=torch.randn(8, 48))}
    alpha, rank = 0.3, 16
    out = lora.ema(g, n, alpha, rank)
    dense = (1 - alpha) * g["m"].dense() + alpha * n["m"].dense()
    u, s, vh = torch.linalg.svd(dense, full_matrices=False)
    want = (u[:, :rank] * s[:rank]) @ vh[:rank]
    assert out["m"].rank == rank
    assert close(out["m"].dense(), want, 1e-4)


def test_ema_with_empty_global_is_alpha_times_new():
    n = random_delta(8)
    out = lora.ema({}, n, 0.25, 8)
    for name in n:
        assert close(out[name].dense(), 0.25 * n[name].dense())


def test_frobenius_norm_matches_dense():
    a = lora.concat([random_delta(9), random_delta(10)], [1.0, -2.0])
    want = sum(float(m.norm() ** 2) for m in lora.to_dense(a).values()) ** 0.5
    assert abs(lora.frobenius_norm(a) - want) / want < 1e-6


def test_bad_factors_are_refused():
    with pytest.raises(ValueError, match="rank mismatch"):
        LowRank(B=torch.zeros(4, 2), A=torch.zeros(3, 4))
    with pytest.raises(ValueError):
        lora.ema(random_delta(1), random_delta(2), 1.5, 4)
