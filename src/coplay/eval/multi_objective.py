"""The quality of a set of vector returns, for tasks with several objectives.

Every function takes returns to be maximised, `points: [P, K]` (P policies or
seeds, K objectives), and works on the host (a front is small, and its size
changes from one evaluation to the next):

    front = pareto_front(points)                        # the non-dominated points
    hypervolume(points, ref)                            # the volume they dominate above `ref`
    expected_utility(points, simplex_weights(2, 100))   # mean best linear utility over weights
    maximum_utility_loss(points, true_front, weights)   # worst utility shortfall against a known front
    cardinality(points), sparsity(points), igd(points, true_front)

The hypervolume, the dominance filter and IGD are moocore's (López-Ibáñez et al.:
the exact algorithms of Fonseca, Paquete and López-Ibáñez, 2006, for 2 and 3
objectives and Beume et al.'s for more), a maintained C implementation; the other
metrics are a line or two of numpy each. `ref` must be weakly worse than every
point in every objective: a point that is not contributes nothing to the volume,
and a curve of hypervolumes would silently drop it, so it is refused. Every
multi-objective environment names its reference point in code."""

from __future__ import annotations

import moocore
import numpy as np

from coplay.algos.common.preferences import simplex_weights  # the evaluation's weights, re-exported
from coplay.core.errors import ConfigError


def _points(points: np.ndarray, what: str = "points", k: int | None = None) -> np.ndarray:
    x = np.asarray(points, np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ConfigError(f"{what} must be a non-empty array [P, K] of returns, one row per point, got shape "
                          f"{x.shape}")
    if k is not None and x.shape[1] != k:
        raise ConfigError(f"{what} have {x.shape[1]} objectives, the points {k}")
    if not np.all(np.isfinite(x)):
        raise ConfigError(f"{what} must be finite, got {x[~np.all(np.isfinite(x), axis=1)][:3].tolist()}")
    return x


def _weights(weights: np.ndarray, k: int) -> np.ndarray:
    w = np.asarray(weights, np.float64)
    w = w[None] if w.ndim == 1 else w
    if w.ndim != 2 or w.shape[1] != k or w.shape[0] == 0:
        raise ConfigError(f"weights must be [W, {k}] (one weight vector per row, one entry per objective), "
                          f"got shape {np.asarray(weights).shape}")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        bad = w[np.any((w < 0) | ~np.isfinite(w), axis=1)]
        raise ConfigError(f"weights must be finite and non-negative, got {bad[:3].tolist()}")
    return w


def pareto_front(points: np.ndarray) -> np.ndarray:
    """The points no other point dominates (at least as good in every objective,
    better in one), each once, in lexicographic order. `[F, K]`."""
    x = _points(points)
    return np.unique(x[moocore.is_nondominated(x, maximise=True)], axis=0)


def hypervolume(points: np.ndarray, ref: np.ndarray) -> float:
    """The volume of the region that the points dominate and that dominates `ref`
    (`[K]`, weakly worse than every point in every objective). Exact."""
    x = _points(points)
    r = np.asarray(ref, np.float64)
    if r.shape != (x.shape[1],) or not np.all(np.isfinite(r)):
        raise ConfigError(f"ref must be {x.shape[1]} finite numbers, one per objective, got {np.asarray(ref).tolist()}")
    below = np.any(x < r, axis=1)
    if below.any():
        raise ConfigError(f"ref {r.tolist()} is not weakly worse than every point: {x[below][:3].tolist()} "
                          f"{'is' if below.sum() == 1 else 'are'} below it in some objective; take a ref at or "
                          "below the worst return of each objective (the environment's reference point)")
    return float(moocore.hypervolume(x, ref=r, maximise=True))


def expected_utility(points: np.ndarray, weights: np.ndarray) -> float:
    """The mean over weight vectors w (`[W, K]`) of the best linear utility w . v
    among the points (Zintgraf et al., 2015)."""
    x = _points(points)
    return float(np.mean(np.max(_weights(weights, x.shape[1]) @ x.T, axis=1)))


def maximum_utility_loss(points: np.ndarray, true_front: np.ndarray, weights: np.ndarray) -> float:
    """The largest shortfall, over weight vectors w (`[W, K]`), of the points' best
    utility w . v against the best utility on `true_front` (`[T, K]`): 0 when the
    points are as good as the front for every weight."""
    x = _points(points)
    t = _points(true_front, "true_front", x.shape[1])
    w = _weights(weights, x.shape[1])
    return float(np.max(np.max(w @ t.T, axis=1) - np.max(w @ x.T, axis=1)))


def cardinality(points: np.ndarray) -> int:
    """The number of distinct non-dominated points."""
    return int(pareto_front(points).shape[0])


def sparsity(points: np.ndarray) -> float:
    """The mean squared gap between neighbouring values of each objective on the
    front (Xu et al., 2020, PGMORL): sum over objectives of the squared gaps of its
    sorted values, divided by F - 1 for F front points; 0 for a front of one point.
    Lower is denser."""
    front = pareto_front(points)
    if front.shape[0] < 2:
        return 0.0
    gaps = np.diff(np.sort(front, axis=0), axis=0)
    return float(np.sum(gaps ** 2) / (front.shape[0] - 1))


def igd(points: np.ndarray, true_front: np.ndarray) -> float:
    """Inverted generational distance: the mean, over the points of `true_front`, of
    the Euclidean distance to the nearest of `points` (Coello and Reyes Sierra, 2004).
    0 when every point of the true front is reached."""
    x = _points(points)
    t = _points(true_front, "true_front", x.shape[1])
    return float(moocore.igd(x, ref=t, maximise=True))


__all__ = ["cardinality", "expected_utility", "hypervolume", "igd", "maximum_utility_loss", "pareto_front",
           "simplex_weights", "sparsity"]
