"""The metrics of a set of vector returns (coplay.eval.multi_objective): values worked
out by hand, and the hypervolume against an independent exact computation on random
fronts."""

import itertools
from math import comb, sqrt

import numpy as np
import pytest

from coplay.core.errors import ConfigError
from coplay.eval.multi_objective import (
    cardinality,
    expected_utility,
    hypervolume,
    igd,
    maximum_utility_loss,
    pareto_front,
    simplex_weights,
    sparsity,
)


def _inclusion_exclusion(points, ref):
    """The exact hypervolume by inclusion-exclusion over every subset of the points: the
    boxes [ref, p] of a subset meet in the box [ref, min of the subset]. Exponential in
    the number of points, and independent of moocore's algorithms."""
    total = 0.0
    for size in range(1, len(points) + 1):
        for subset in itertools.combinations(points, size):
            total += (-1) ** (size + 1) * np.prod(np.min(subset, axis=0) - ref)
    return total


def test_hypervolume_of_small_fronts_worked_out_by_hand():
    staircase = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]])
    assert hypervolume(staircase, [0.0, 0.0]) == pytest.approx(3 + 2 + 1)          # columns of width 1
    assert hypervolume(np.vstack([staircase, [1.0, 1.0]]), [0.0, 0.0]) == pytest.approx(6)   # dominated: nothing
    # from (1, 1) only (2, 2) spans a box: the other two lie on the reference point's lines
    assert hypervolume(staircase, [1.0, 1.0]) == pytest.approx(1)
    assert hypervolume([[1.0, 2.0, 3.0]], [0.0, 0.0, 0.0]) == pytest.approx(6)
    # three boxes of volume 2 meeting pairwise and all together in the unit cube: 6 - 3 + 1
    corners = [[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]]
    assert hypervolume(corners, [0.0, 0.0, 0.0]) == pytest.approx(4)
    assert hypervolume([[-1.0, -1.0]], [-3.0, -2.0]) == pytest.approx(2)             # negative returns


@pytest.mark.parametrize("k", [2, 3, 4])
def test_hypervolume_equals_inclusion_exclusion_on_random_fronts(k):
    rng = np.random.default_rng(k)
    for _ in range(40):
        n = int(rng.integers(1, 9))
        if rng.random() < 0.5:   # points on a concave front: every one of them non-dominated
            d = rng.exponential(size=(n, k))
            points = 3.0 * d / np.linalg.norm(d, axis=1, keepdims=True)
        else:                    # anything, with ties and dominated points
            points = rng.integers(0, 4, size=(n, k)).astype(float)
        ref = np.min(points, axis=0) - rng.uniform(0, 1, size=k)
        np.testing.assert_allclose(hypervolume(points, ref), _inclusion_exclusion(points, ref), rtol=1e-9)


def test_a_reference_point_above_a_point_or_of_the_wrong_length_is_refused():
    with pytest.raises(ConfigError, match=r"ref \[0.0, 2.5\] is not weakly worse than every point: \[\[1.0, 2.0\]\]"):
        hypervolume([[1.0, 2.0], [0.5, 3.0]], [0.0, 2.5])
    with pytest.raises(ConfigError, match="ref must be 2 finite numbers, one per objective, got"):
        hypervolume([[1.0, 2.0]], [0.0, 0.0, 0.0])
    with pytest.raises(ConfigError, match=r"points must be a non-empty array \[P, K\].*shape \(2,\)"):
        hypervolume([1.0, 2.0], [0.0, 0.0])
    with pytest.raises(ConfigError, match="points must be finite"):
        hypervolume([[1.0, np.nan]], [0.0, 0.0])


def test_front_cardinality_and_sparsity_count_each_non_dominated_point_once():
    points = np.array([[0.0, 2.0], [1.0, 1.0], [2.0, 0.0], [1.0, 1.0], [0.5, 0.5], [0.0, 1.0]])
    np.testing.assert_array_equal(pareto_front(points), [[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]])
    assert cardinality(points) == 3
    # each objective's sorted values on the front step by 1 twice: (1 + 1) * 2 objectives / (3 - 1)
    assert sparsity(points) == pytest.approx(2.0)
    assert sparsity([[1.0, 1.0], [0.0, 0.0]]) == 0.0    # one point on the front


def test_expected_utility_and_maximum_utility_loss_worked_out_by_hand():
    weights = simplex_weights(2, 2)                    # (0, 1), (0.5, 0.5), (1, 0)
    np.testing.assert_allclose(np.sort(weights, axis=0), [[0, 0], [0.5, 0.5], [1, 1]])
    corners = [[1.0, 0.0], [0.0, 1.0]]
    assert expected_utility(corners, weights) == pytest.approx((1 + 0.5 + 1) / 3)
    assert expected_utility(corners + [[0.8, 0.8]], weights) == pytest.approx((1 + 0.8 + 1) / 3)
    assert maximum_utility_loss([[1.0, 0.0]], corners, weights) == pytest.approx(1.0)   # at w = (0, 1)
    assert maximum_utility_loss(corners, corners, weights) == 0.0
    with pytest.raises(ConfigError, match=r"weights must be \[W, 2\]"):
        expected_utility(corners, [[0.5, 0.25, 0.25]])
    with pytest.raises(ConfigError, match=r"weights must be finite and non-negative, got \[\[-0.5, 1.5\]\]"):
        expected_utility(corners, [[-0.5, 1.5]])
    with pytest.raises(ConfigError, match="true_front have 3 objectives, the points 2"):
        maximum_utility_loss(corners, [[1.0, 0.0, 0.0]], weights)


def test_igd_is_the_mean_distance_from_the_true_front_to_the_nearest_point():
    true_front = [[0.0, 1.0], [1.0, 0.0]]
    assert igd(true_front, true_front) == 0.0
    assert igd([[0.0, 1.0]], true_front) == pytest.approx((0 + sqrt(2)) / 2)


@pytest.mark.parametrize("k, divisions", [(1, 3), (2, 4), (3, 4), (4, 2)])
def test_simplex_weights_are_every_lattice_point_of_the_simplex(k, divisions):
    w = simplex_weights(k, divisions)
    assert w.shape == (comb(divisions + k - 1, k - 1), k)
    np.testing.assert_allclose(w.sum(1), 1.0)
    assert np.all(w >= 0) and np.allclose(w * divisions, np.round(w * divisions))
    assert len(np.unique(w, axis=0)) == len(w)
    with pytest.raises(ConfigError, match="divisions >= 1"):
        simplex_weights(2, 0)
