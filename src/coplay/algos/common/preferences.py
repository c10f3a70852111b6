"""Preference weights over K objectives: evenly spread points of the simplex
{w : w_k >= 0, sum_k w_k = 1}, shared by the multi-objective trainers (the
weights they train side by side) and by `coplay.eval.multi_objective` (the
weight distribution of the expected utility)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from coplay.core.errors import ConfigError


def simplex_weights(k: int, divisions: int) -> np.ndarray:
    """Every weight vector of `k` non-negative entries summing to 1 whose entries are
    multiples of 1/`divisions` (Das and Dennis, 1998): `[C(divisions + k - 1, k - 1), k]`."""
    if k < 1 or divisions < 1:
        raise ConfigError(f"simplex_weights needs k >= 1 objectives and divisions >= 1, got k={k}, "
                          f"divisions={divisions}")
    rows = [np.diff((-1, *bars, divisions + k - 1)) - 1
            for bars in itertools.combinations(range(divisions + k - 1), k - 1)]
    return np.asarray(rows, np.float64) / divisions


def grid_sizes(k: int, most: int) -> list[int]:
    """The numbers of weights, up to `most`, that an even grid over the simplex of `k`
    objectives has: C(d + k - 1, k - 1) for d = 1, 2, ..."""
    sizes, d = [], 1
    while (size := math.comb(d + k - 1, k - 1)) <= most:
        sizes.append(size)
        d += 1
    return sizes


def spread_weights(k: int, count: int) -> np.ndarray:
    """`[count, k]`: `count` weights spread evenly over the simplex (`simplex_weights`
    with as many divisions as give `count` of them). Two objectives take any count
    from 2; more objectives take a grid size (3 objectives: 3, 6, 10, 15, 21, ...)."""
    sizes = grid_sizes(k, max(count, 2))
    if count not in sizes:
        near = grid_sizes(k, max(4 * count, 64))
        raise ConfigError(f"{count} weights do not make an even grid over {k} objectives; grids of {k} objectives "
                          f"have {', '.join(map(str, near[:8]))}, ... weights")
    return simplex_weights(k, sizes.index(count) + 1)
