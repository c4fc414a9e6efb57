from intervals import merge


def test_disjoint_stay_apart():
    assert merge([(5, 6), (1, 2)]) == [(1, 2), (5, 6)]


def test_overlapping_merge():
    assert merge([(1, 4), (2, 6)]) == [(1, 6)]


def test_touching_merge():
    assert merge([(1, 3), (3, 5)]) == [(1, 5)]


def test_contained():
    assert merge([(1, 10), (2, 3), (3, 4)]) == [(1, 10)]
