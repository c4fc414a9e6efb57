"""Parent selection: the paper's elite-sampling formula, two distinct parents, uniform, fallbacks."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from skillgraft.evolve.cycleqd.archive import Archive, Binning, Elite
from skillgraft.evolve.cycleqd.config import CycleQDConfig
from skillgraft.evolve.cycleqd.sampling import SAMPLERS, EliteSampler, UniformSampler, make_sampler

TASKS = ["q", "x", "y"]


def _archive(elites: list[Elite]) -> Archive:
    archive = Archive.for_task("q", TASKS, Binning(ranges={t: (0.0, 1.0) for t in TASKS}, bins=15))
    for e in elites:
        archive.offer(e)
    return archive


ELITES = [
    Elite(10, {"q": 0.2, "x": 0.10, "y": 0.90}),
    Elite(11, {"q": 0.8, "x": 0.50, "y": 0.30}),
    Elite(12, {"q": 0.5, "x": 0.70, "y": 0.10}),
    Elite(13, {"q": 0.6, "x": 0.30, "y": 0.60}),
]


def _by_hand(elites: list[Elite]) -> dict[int, float]:
    """prod over (quality, coordinates) of 0.5 + 0.3 * (v - min) / (max - min), normalised."""
    weights = {}
    for e in elites:
        w = 1.0
        for t in ("q", "x", "y"):
            column = [o.scores[t] for o in elites]
            w *= 0.5 + 0.3 * (e.scores[t] - min(column)) / (max(column) - min(column))
        weights[e.adapter_id] = w
    total = sum(weights.values())
    return {k: v / total for k, v in weights.items()}


def test_elite_sampling_probabilities_follow_the_formula():
    archive = _archive(ELITES)
    elites, p = EliteSampler().probabilities(archive)
    want = _by_hand(ELITES)
    assert {e.adapter_id: pytest.approx(float(pi)) for e, pi in zip(elites, p)} == want
    # the best on every dimension gets weight 0.8^3 and the worst 0.5^3: the ratio the paper's bounds allow
    assert max(want.values()) / min(want.values()) <= (0.8 / 0.5) ** 3


def _draws(archive, seed: int, n: int) -> Counter:
    """How often each (first, second) pair of parents is drawn in n draws."""
    rng = np.random.default_rng(seed)
    return Counter((a.adapter_id, b.adapter_id) for a, b in (EliteSampler().sample(archive, rng, []) for _ in range(n)))


def test_first_parent_frequencies_match_the_probabilities_and_parents_differ():
    archive = _archive(ELITES)
    elites, p = EliteSampler().probabilities(archive)
    n = 6000
    pairs = _draws(archive, 0, n)
    assert all(a != b for a, b in pairs)
    firsts = Counter()
    for (a, _), count in pairs.items():
        firsts[a] += count
    for e, pi in zip(elites, p):
        # 4.5 standard errors: a loose bound that a wrong formula (e.g. the 0.5..1.3 scaling) still fails
        assert abs(firsts[e.adapter_id] / n - pi) < 4.5 * (pi * (1 - pi) / n) ** 0.5


def test_second_parent_is_drawn_without_replacement():
    archive = _archive(ELITES)
    elites, p = EliteSampler().probabilities(archive)
    n = 6000
    pairs = _draws(archive, 1, n)
    ids = [e.adapter_id for e in elites]
    i, j = ids.index(11), ids.index(13)
    want = p[i] * p[j] / (1 - p[i])
    assert abs(pairs[(11, 13)] / n - want) < 4.5 * (want * (1 - want) / n) ** 0.5


def test_uniform_sampling_weights_every_elite_the_same():
    _, p = UniformSampler().probabilities(_archive(ELITES))
    assert np.allclose(p, 0.25)
    assert isinstance(make_sampler("uniform"), UniformSampler)
    with pytest.raises(ValueError):
        make_sampler("roulette")


def test_constant_columns_do_not_break_the_formula():
    same = [Elite(1, {"q": 0.5, "x": 0.2, "y": 0.2}), Elite(2, {"q": 0.5, "x": 0.8, "y": 0.2})]
    _, p = EliteSampler().probabilities(_archive(same))
    assert p == pytest.approx([0.5 / 1.3, 0.8 / 1.3])


def test_fallback_borrows_the_strongest_on_the_quality_task_from_other_archives():
    lonely = _archive([Elite(1, {"q": 0.5, "x": 0.2, "y": 0.2})])
    pool = [Elite(1, {"q": 0.5, "x": 0.2, "y": 0.2}), Elite(2, {"q": 0.1, "x": 0.9, "y": 0.9}),
            Elite(3, {"q": 0.4, "x": 0.1, "y": 0.1})]
    a, b = EliteSampler().sample(lonely, np.random.default_rng(0), pool)
    assert {a.adapter_id, b.adapter_id} == {1, 3}
    empty = _archive([])
    a, b = EliteSampler().sample(empty, np.random.default_rng(0), pool)
    assert {a.adapter_id, b.adapter_id} == {1, 3}
    # a single checkpoint in the whole run: both parents are it
    a, b = EliteSampler().sample(lonely, np.random.default_rng(0), pool[:1])
    assert a.adapter_id == b.adapter_id == 1
    with pytest.raises(ValueError):
        EliteSampler().sample(empty, np.random.default_rng(0), [])


def test_a_sampler_added_to_the_table_is_accepted_by_the_config_and_made_by_name(monkeypatch):
    class Another(UniformSampler):
        pass

    with pytest.raises(ValueError, match="unknown sampling 'first': use 'elite' or 'uniform'"):
        CycleQDConfig(sampling="first")
    monkeypatch.setitem(SAMPLERS, "first", Another)
    assert CycleQDConfig(sampling="first").sampling == "first"
    assert isinstance(make_sampler("first"), Another)

