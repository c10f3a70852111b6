"""Fictitious play on two-player normal-form games (Brown, 1951; Robinson, 1951).

    result = fictitious_play.run(payoff_table("rps"), iterations=2000)
    result.average[-1]     # each player's empirical mixture after the last round

Each round, every player best-responds to the other's empirical mixture of
past actions (simultaneous updates; ties go to the lowest action), and the
empirical mixtures are updated. In two-player zero-sum games they converge to
a Nash equilibrium (Robinson, 1951); in general-sum games they may cycle.
`nash_conv` at each round says how far the pair of mixtures is from one.
The whole run is one compiled `lax.scan`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.errors import ConfigError


@dataclass(frozen=True)
class FPResult:
    average: np.ndarray  # [T, 2, A] each player's empirical mixture after each round (A = max actions)
    nash_conv: np.ndarray  # [T] sum over players of the gain of a best response to the other's mixture


def nash_conv(payoffs: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    """How much the two players could gain by deviating from mixtures `x`, `y`. payoffs: `[A0, A1, 2]`."""
    a, b = payoffs[..., 0], payoffs[..., 1]
    gain0 = jnp.max(a @ y) - x @ a @ y
    gain1 = jnp.max(x @ b) - x @ b @ y
    return gain0 + gain1


def run(payoffs: np.ndarray, iterations: int = 1000) -> FPResult:
    """Fictitious play for `iterations` rounds. payoffs: `[A0, A1, 2]` (player 0's, player 1's)."""
    payoffs = jnp.asarray(payoffs, jnp.float32)
    if payoffs.ndim != 3 or payoffs.shape[-1] != 2:
        raise ConfigError(f"fictitious play needs payoffs of shape [A0, A1, 2], got {tuple(payoffs.shape)}")
    if iterations < 1:
        raise ConfigError(f"fictitious play iterations must be >= 1, got {iterations}")
    a, b = payoffs[..., 0], payoffs[..., 1]
    n0, n1 = a.shape

    def body(counts, _):
        c0, c1 = counts
        x, y = c0 / c0.sum(), c1 / c1.sum()
        c0 = c0 + jax.nn.one_hot(jnp.argmax(a @ y), n0)
        c1 = c1 + jax.nn.one_hot(jnp.argmax(x @ b), n1)
        x, y = c0 / c0.sum(), c1 / c1.sum()
        return (c0, c1), (x, y, nash_conv(payoffs, x, y))

    # Round 0: both players start from their first action.
    start = (jax.nn.one_hot(0, n0), jax.nn.one_hot(0, n1))
    _, (xs, ys, gaps) = jax.jit(lambda s: jax.lax.scan(body, s, None, length=iterations))(start)
    width = max(n0, n1)
    pad = lambda m: jnp.pad(m, ((0, 0), (0, width - m.shape[1])))  # noqa: E731
    return FPResult(average=np.asarray(jnp.stack([pad(xs), pad(ys)], axis=1)), nash_conv=np.asarray(gaps))
