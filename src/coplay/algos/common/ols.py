"""Optimistic linear support (Roijers et al., 2015) for the weight sweep: which
weights can still improve the front, for two objectives.

A weight w = (t, 1 - t) scores a vector return v by the linear utility w . v;
the best of a set of returns over t in [0, 1] is their upper envelope, the
convex coverage set, and a *corner weight* is where two of its lines cross. If
every trained weight's policy were optimal for its weight, no return v can beat
any of them there: w_j . v <= u_j = max_v' w_j . v' for each trained weight w_j.
So the most a corner weight c can still gain is the linear programme

    improvement(c) = max { c . x : w_j . x <= u_j for every trained w_j } - max_v c . v,

zero at a weight already trained, and largest where the front can still bend
outward the most. `reselect` moves the policies that add nothing to the front
(no weight prefers their return, or another policy's return is the same) to the
corner weights of largest improvement, each starting from
the policy that is best at its corner. The two ends of the simplex stay, so the
programme stays bounded.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from coplay.core.errors import ConfigError


def _check(points: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v, w = np.asarray(points, np.float64), np.asarray(weights, np.float64)
    if v.ndim != 2 or v.shape[1] != 2 or w.shape != v.shape:
        raise ConfigError(f"optimistic linear support takes two objectives: points and weights [W, 2], got "
                          f"{v.shape} and {w.shape}")
    return v, w


def corner_weights(points: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """`[C, 2]`: the weights (t, 1 - t), 0 < t < 1, where two returns of the upper
    envelope of `points` (`[P, 2]`) cross, in increasing t."""
    v = np.unique(np.asarray(points, np.float64), axis=0)
    slope, level = v[:, 0] - v[:, 1], v[:, 1]             # w . v = level + t * slope
    corners = []
    for i in range(len(v)):
        for j in range(i + 1, len(v)):
            if abs(slope[i] - slope[j]) <= tol:
                continue
            t = (level[j] - level[i]) / (slope[i] - slope[j])
            if not tol < t < 1 - tol:
                continue
            at = level + t * slope
            if at[i] >= at.max() - 1e-9 * max(1.0, abs(at.max())):     # both lines are on the envelope there
                corners.append(t)
    t = np.unique(np.round(corners, 12)) if corners else np.zeros(0)
    return np.stack([t, 1 - t], axis=1)


def improvement(corners: np.ndarray, points: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """`[C]`: how much more than the best of `points` a return could score at each corner
    weight, if the policy of each weight in `weights` is optimal for it (module doc)."""
    v, w = _check(points, weights)
    best = (w @ v.T).max(axis=1)                            # u_j: the best return's utility at each trained weight
    out = []
    for c in np.asarray(corners, np.float64):
        lp = linprog(-c, A_ub=w, b_ub=best, bounds=[(None, None)] * 2, method="highs")
        bound = -lp.fun if lp.status == 0 else np.inf
        out.append(bound - (v @ c).max())
    return np.asarray(out)


def reselect(points: np.ndarray, weights: np.ndarray, tol: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """Move the policies that add nothing to the front to the corner weights where it can
    still improve most. points, weights: `[W, 2]` each policy's mean return and weight.
    Returns the new weights `[W, 2]` and, for each policy, the one it starts from `[W]`
    (itself where it stays). `tol` is relative to the spread of the returns."""
    v, w = _check(points, weights)
    scale = max(float(np.ptp(v, axis=0).max()), 1e-9)
    corners = corner_weights(v)
    # a return on the upper envelope somewhere is best at a corner weight or an end of the simplex
    probes = np.concatenate([corners, np.eye(2)])
    at = probes @ v.T                                                 # [probes, W]
    on_envelope = np.any(at >= at.max(axis=1, keepdims=True) - tol * scale, axis=0)
    ends = np.any(w >= 1 - 1e-9, axis=1)
    redundant = ~on_envelope & ~ends                                  # no weight prefers its return
    for i in np.argsort(~ends, kind="stable"):      # the ends first: the same return as a policy that stays
        kept = ~redundant
        kept[i] = False
        same = np.all(np.abs(v - v[i]) <= tol * scale, axis=1) & kept
        if not ends[i] and same[: i].any() | (same & ends).any():
            redundant[i] = True
    gain = improvement(corners, v, w) if len(corners) else np.zeros(0)
    order = [c for c in np.argsort(-gain) if gain[c] > tol * scale]
    new_w, source = w.copy(), np.arange(len(v))
    for lane, c in zip(np.flatnonzero(redundant), order):
        new_w[lane] = corners[c]
        source[lane] = int(np.argmax(v @ corners[c]))
    return new_w, source
