import numpy as np
import pytest
from scipy import stats as sps

from coplay.eval.stats import iqm, iqm_ci, summarize


def test_iqm_trims_quartiles():
    x = np.array([0.0, 1, 2, 3, 4, 5, 6, 100])
    assert iqm(x) == np.mean([2, 3, 4, 5])


@pytest.mark.parametrize("shape", [(1,), (2, 1), (3,), (7, 3), (8, 2), (64, 5)])
@pytest.mark.parametrize("axis", [0, None])
def test_iqm_equals_scipys_quarter_trimmed_mean(shape, axis):
    x = np.random.default_rng(sum(shape)).normal(size=shape).astype(np.float32)
    np.testing.assert_array_equal(iqm(x, axis=axis), sps.trim_mean(x, 0.25, axis=axis))


def test_iqm_of_nothing_is_nan_as_in_scipy():
    assert np.isnan(iqm(np.zeros(0))) and np.isnan(iqm(np.zeros(0), axis=None))
    assert iqm(np.zeros((0, 3))).shape == (3,) and np.all(np.isnan(iqm(np.zeros((0, 3)))))


def test_ci_contains_point_and_narrows_with_more_runs():
    rng = np.random.default_rng(0)
    small = summarize(rng.normal(size=5))
    large = summarize(rng.normal(size=200))
    for e in (small, large):
        assert e.low <= e.value <= e.high
    assert (large.high - large.low) < (small.high - small.low)


def test_ci_per_point_shapes_and_single_run():
    est = iqm_ci(np.random.default_rng(1).normal(size=(6, 4)))
    assert len(est) == 4
    one = iqm_ci(np.array([[3.0, 4.0]]))
    assert [(e.value, e.low, e.high) for e in one] == [(3.0, 3.0, 3.0), (4.0, 4.0, 4.0)]


def test_columns_bootstrapped_together_match_separate_calls():
    # summary.json bootstraps all its metrics in one call (runs are resampled within each
    # column): each column's interval must be the one it gets alone, up to resampling noise.
    rng = np.random.default_rng(2)
    scores = np.stack([rng.normal(size=8), rng.normal(100.0, 10.0, size=8)], axis=1)
    together = iqm_ci(scores, reps=2000)
    for i, est in enumerate(together):
        alone = iqm_ci(scores[:, [i]], reps=2000)[0]
        width = alone.high - alone.low
        assert est.value == alone.value
        assert abs(est.low - alone.low) < 0.1 * width and abs(est.high - alone.high) < 0.1 * width


def test_the_interval_is_the_same_on_every_call_and_leaves_numpys_generator_alone():
    x = np.random.default_rng(3).normal(size=(10, 1))
    np.random.seed(7)
    want_next = np.random.rand()
    np.random.seed(7)
    first, again = iqm_ci(x)[0], iqm_ci(x)[0]
    assert (first.low, first.high) == (again.low, again.high)
    assert iqm_ci(x, seed=1)[0].low != first.low          # the seed is what fixes it
    assert np.random.rand() == want_next                   # the caller's draws go on as before
