"""Preference weights over K objectives: evenly spread points of the simplex
{w : w_k >= 0, sum_k w_k = 1}, shared by the multi-objective trainers (the
weights they train side by side, or play one conditioned policy at) and by
`coplay.eval.multi_objective` (the weight distribution of the expected
utility); and the evaluation entries of a trainer's vector return per weight,
from which the experiment layer reads its front."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
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


def check_show_weight(config: Any) -> None:
    """Refuse an `algo.show_weight` that is not an index into the `algo.weights` weights."""
    if config.show_weight >= config.weights:
        raise ConfigError(f"algo.show_weight={config.show_weight} is out of range; it must be an index into "
                          f"the {config.weights} weights, 0 to {config.weights - 1}")


def front_key(weight: int, objective: str) -> str:
    """The evaluation entry of one weight's return in one objective."""
    return f"w{weight:02d}/objective/{objective}"


def linear_utility(vector_return: jax.Array, weights: jax.Array) -> jax.Array:
    """`[..., K]`, `[..., K]` -> `[...]`: w . R."""
    return jnp.sum(weights * vector_return, axis=-1)


def per_weight_results(out: dict[str, jax.Array], weights: jax.Array, names: tuple[str, ...],
                       utility: Callable[[jax.Array, jax.Array], jax.Array] = linear_utility,
                       ) -> dict[str, jax.Array]:
    """An evaluation's entries from the episodes played for each weight (`out`, each
    `[W, episodes]`): each weight's return in each objective (`front_key`), `return`
    (each episode's `utility` of its vector return under its policy's weight,
    averaged over the weights), and the other entries averaged over the weights
    (`finished`: the least)."""
    out = dict(out)
    vectors = jnp.stack([out.pop(f"objective/{n}") for n in names], -1)   # [W, episodes, K]
    results = {front_key(i, n): vectors[i, :, k] for i in range(weights.shape[0]) for k, n in enumerate(names)}
    out.pop("return")
    results["return"] = utility(vectors, weights[:, None, :]).mean(0)
    results.update({k: v.mean(0) if k != "finished" else v.min(0) for k, v in out.items()})
    return results


def read_front(results: Mapping[str, np.ndarray], weights: int, names: tuple[str, ...]) -> np.ndarray:
    """`[S, W, K]`: each seed's mean vector return for every weight, from `per_weight_results`."""
    return np.stack([np.stack([np.asarray(results[front_key(i, n)]).mean(-1) for n in names], -1)
                     for i in range(weights)], axis=1)
