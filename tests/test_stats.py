import numpy as np

from coplay.eval.stats import iqm, iqm_ci, summarize


def test_iqm_trims_quartiles():
    x = np.array([0.0, 1, 2, 3, 4, 5, 6, 100])
    assert iqm(x) == np.mean([2, 3, 4, 5])


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
