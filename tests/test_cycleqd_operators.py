"""Crossover and mutation in low rank, checked against dense references."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from skillgraft.evolve.cycleqd import mutations
from skillgraft.evolve.cycleqd.config import CycleQDConfig
from skillgraft.evolve.cycleqd.mutations import make_mutator, mutation_names, register_mutation
from skillgraft.evolve.cycleqd.operators import (
    crossover,
    crossover_weights,
    gaussian_mutation,
    svd_expert_mutation,
    svd_rescale_mutation,
)
from skillgraft.hypernet.lora import LowRank, svd
from lora_support import best_rank, close


def _delta(seed: int, r: int = 3) -> dict[str, LowRank]:
    g = torch.Generator().manual_seed(seed)
    return {
        "layers.0.q_proj": LowRank(B=torch.randn(24, r, generator=g), A=torch.randn(r, 16, generator=g)),
        "layers.0.v_proj": LowRank(B=torch.randn(8, r, generator=g), A=torch.randn(r, 16, generator=g)),
    }


def test_crossover_of_a_task_vector_with_itself_is_itself():
    tau = _delta(1)
    for granularity in ("model", "module"):
        child = crossover([tau, tau], np.random.default_rng(5), rank=3, granularity=granularity)
        for name in tau:
            assert child[name].rank <= 3
            assert close(child[name].dense(), tau[name].dense())


def test_crossover_weights_are_normal_around_mu_and_sum_to_one():
    w = crossover_weights(2, np.random.default_rng(0), mu=1.0, sigma=0.01)
    raw = np.random.default_rng(0).normal(1.0, 0.01, size=2)
    assert w.sum() == pytest.approx(1.0)
    assert np.allclose(w, raw / raw.sum())


@pytest.mark.parametrize("granularity", ["model", "module"])
def test_crossover_equals_dense_weighted_sum_then_best_rank_r(granularity):
    a, b = _delta(1), _delta(2)
    child = crossover([a, b], np.random.default_rng(7), rank=6, granularity=granularity, sigma=0.3)
    rng = np.random.default_rng(7)
    if granularity == "model":
        w = crossover_weights(2, rng, 1.0, 0.3)
        weights = {name: w for name in a}
    else:
        weights = {name: crossover_weights(2, rng, 1.0, 0.3) for name in a}
    for name in a:
        dense = weights[name][0] * a[name].dense() + weights[name][1] * b[name].dense()
        # rank 6 holds the whole sum exactly
        assert close(child[name].dense(), dense)
    recompressed = crossover([a, b], np.random.default_rng(7), rank=2, granularity=granularity, sigma=0.3)
    for name in a:
        dense = weights[name][0] * a[name].dense() + weights[name][1] * b[name].dense()
        assert recompressed[name].rank == 2
        assert close(recompressed[name].dense(), best_rank(dense, 2))


def test_crossover_with_a_module_missing_from_one_parent_counts_it_as_zero():
    a, b = _delta(1), _delta(2)
    del b["layers.0.v_proj"]
    child = crossover([a, b], np.random.default_rng(3), rank=6)
    w = crossover_weights(2, np.random.default_rng(3))
    assert close(child["layers.0.v_proj"].dense(), w[0] * a["layers.0.v_proj"].dense())


def test_svd_expert_mutation_equals_dense_reference():
    child, expert = _delta(1), _delta(2, r=4)
    expert_svd = svd(expert)
    mutated = svd_expert_mutation(child, expert_svd, np.random.default_rng(11), rank=3, w_max=0.1)
    rng = np.random.default_rng(11)
    for name in child:
        dense_expert = expert[name].dense().double()
        u, s, vh = torch.linalg.svd(dense_expert, full_matrices=False)
        k = expert[name].rank
        scales = torch.from_numpy(rng.uniform(0.0, 0.1, size=k))
        assert float(scales.max()) <= 0.1
        want = child[name].dense().double() + (u[:, :k] * (scales * s[:k])) @ vh[:k]
        assert mutated[name].rank <= 3
        assert close(mutated[name].dense(), best_rank(want, 3))


def test_svd_rescale_mutation_equals_dense_reference():
    child = _delta(4)
    mutated = svd_rescale_mutation(child, np.random.default_rng(2), rank=3, w_max=0.1)
    rng = np.random.default_rng(2)
    for name in child:
        u, s, vh = torch.linalg.svd(child[name].dense().double(), full_matrices=False)
        factor = 1 + torch.from_numpy(rng.uniform(-0.1, 0.1, size=3))
        want = (u[:, :3] * (s[:3] * factor)) @ vh[:3]
        assert mutated[name].rank <= 3
        assert close(mutated[name].dense(), want)


@pytest.mark.parametrize("name", mutation_names())
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_every_mutation_keeps_rank_at_most_r(name, rank):
    child = crossover([_delta(1), _delta(2)], np.random.default_rng(0), rank=rank)
    mutator = make_mutator(name, rank=rank, w_max=0.1, noise_std=0.05)
    out = mutator(child, np.random.default_rng(1), svd(_delta(3, r=5)))
    assert all(lr.rank <= rank for lr in out.values())


def test_gaussian_mutation_is_small_relative_noise():
    child = _delta(5)
    out = gaussian_mutation(child, np.random.default_rng(0), rank=6, std=0.05)
    for name in child:
        diff = out[name].dense() - child[name].dense()
        # entries of the noise have std 0.05 * RMS(ΔW): the relative Frobenius change is about 0.05
        assert 0.01 < float(diff.norm() / child[name].dense().norm()) < 0.15


def test_mutation_is_reproducible_from_the_generator_seed():
    child = _delta(6)
    a = svd_rescale_mutation(child, np.random.default_rng(9), rank=3)
    b = svd_rescale_mutation(child, np.random.default_rng(9), rank=3)
    assert all(torch.equal(a[n].B, b[n].B) and torch.equal(a[n].A, b[n].A) for n in child)


def test_unknown_mutation_is_refused():
    with pytest.raises(ValueError):
        make_mutator("cauchy", rank=2)


def test_the_shipped_mutations_are_listed_in_their_order():
    assert mutation_names() == ["svd", "svd_rescale", "gaussian", "none"]
    assert mutations.mutation_choices() == "svd, svd_rescale, gaussian or none"
    assert all(m.summary for m in mutations.MUTATIONS.values())  # `skillgraft evolve mutations` says what each does


def test_a_registered_mutation_is_accepted_by_the_config_and_made_by_name(monkeypatch):
    monkeypatch.setattr(mutations, "MUTATIONS", dict(mutations.MUTATIONS))
    with pytest.raises(ValueError, match="unknown mutation 'flip': use svd, svd_rescale, gaussian or none"):
        CycleQDConfig(mutation="flip")

    @register_mutation("flip", summary="negates the child")
    def flip(child, rng, expert_svd, params):
        return {name: LowRank(B=-lr.B * params.w_max, A=lr.A) for name, lr in child.items()}

    assert CycleQDConfig(mutation="flip").mutation == "flip"
    assert mutation_names()[-1] == "flip" and mutations.mutation_choices().endswith("none or flip")
    assert not mutations.uses_expert("flip") and mutations.uses_expert("svd")
    child = _delta(4)
    out = make_mutator("flip", rank=3, w_max=0.5)(child, np.random.default_rng(0), None)
    assert all(torch.equal(out[n].dense(), -0.5 * child[n].dense()) for n in child)
    with pytest.raises(ValueError, match="registered twice"):
        register_mutation("flip")(flip)

