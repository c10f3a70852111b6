"""Fictitious play on two-player normal-form games (Brown, 1951; Robinson, 1951).

    result = fictitious_play.run(coplay.make("matrix", game="rps"), fictitious_play.Config(iterations=2000), key)
    result.policy          # [2, A] each player's empirical mixture after the last round
    result.exploitability  # [P] NashConv of the mixtures every `eval_every` rounds

Each round, every player best-responds to the other's empirical mixture of
past actions (simultaneous updates; ties go to the lowest action). With A and
B the two players' payoff tables and e_a the one-hot of action a, after round t

    x_t = (1 / (t + 1)) sum_{s=0..t} e_{a_s},   a_{s+1} = argmax_a (A y_s)_a,
    y_t = (1 / (t + 1)) sum_{s=0..t} e_{b_s},   b_{s+1} = argmax_b (x_s^T B)_b,

from a_0 = b_0 = 0.

In two-player zero-sum games they converge to a Nash equilibrium (Robinson,
1951); in general-sum games they may cycle. NashConv, the sum over players of
what a best response to the other's mixture gains,

    NashConv(x, y) = max_a (A y)_a - x^T A y + max_b (x^T B)_b - x^T B y,

says how far the pair of mixtures is from one (0 at an equilibrium). The
rounds between measurements run compiled (`solvers.measured_loop`).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.matches import bare_env
from coplay.algos.solvers import GameSupport, Log, SolveResult, measured_loop, validate
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.envs.mixed.matrix import SCALAR_GAMES, MatrixGame

MEASURE = "NashConv of the empirical mixtures: what best responses to each other's mixture gain, summed (exact)"
MATRIX_GAMES = f"normal-form games: the matrix environment (env.game: {', '.join(SCALAR_GAMES)})"


@dataclass(frozen=True)
class Config:
    iterations: int = param(1000, "rounds of fictitious play", min=1)
    eval_every: int = param(10, "rounds between measurements of the mixtures' NashConv", min=1)


def nash_conv(payoffs: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    """How much the two players could gain by deviating from mixtures `x` `[A0]`, `y` `[A1]`.
    payoffs: `[A0, A1, 2]` (player 0's, player 1's). `[]`"""
    a, b = payoffs[..., 0], payoffs[..., 1]
    gain0 = jnp.max(a @ y) - x @ a @ y
    gain1 = jnp.max(x @ b) - x @ b @ y
    return gain0 + gain1


def matrix_problem(game: Env) -> str | None:
    """Why fictitious play cannot use `game`, None when it is a normal-form game with one
    payoff per player."""
    bare = bare_env(game)
    if not isinstance(bare, MatrixGame):
        return "it is not a normal-form game"
    if bare.spec.reward_dim > 1:
        return f"its game {bare.game!r} has {bare.spec.reward_dim} objectives and fictitious play needs one payoff"
    return None


SUPPORT = GameSupport(uses=MATRIX_GAMES, default="matrix", problem=matrix_problem, measure="NashConv")


def run(game: Env, config: Config = Config(), key: jax.Array | None = None, *, log: Log | None = None) -> SolveResult:
    """Fictitious play on the payoff table of `game`, the `matrix` environment
    (its repeated rounds play no part). Deterministic: `key` is not used. See `solve_table`."""
    validate("fictitious_play", game, config)
    bare = bare_env(game)
    if not isinstance(bare, MatrixGame):
        raise ConfigError(f"environment {game.spec.name!r} is not a normal-form game; fictitious play uses "
                          f"{MATRIX_GAMES}")
    return solve_table(np.asarray(bare.payoffs), config, log)


def solve_table(payoffs: np.ndarray, config: Config = Config(), log: Log | None = None) -> SolveResult:
    """Fictitious play for `config.iterations` rounds on `payoffs` `[A0, A1, 2]`.

    Returns the final empirical mixtures `[2, A]` (A = max(A0, A1), zero-padded) as
    `policy`, their NashConv at round 0 (both players on their first action), every
    `eval_every` rounds and at the end, and in `details`: `mixtures` `[P, 2, A]` at
    those rounds and `payoffs`."""
    table = jnp.asarray(payoffs, jnp.float32)
    if table.ndim != 3 or table.shape[-1] != 2:
        raise ConfigError(f"fictitious play needs payoffs of shape [A0, A1, 2], got {tuple(table.shape)}")
    a, b = table[..., 0], table[..., 1]
    n0, n1 = a.shape
    width = max(n0, n1)

    def mixtures(counts):
        c0, c1 = counts
        return c0 / c0.sum(), c1 / c1.sum()

    def play(counts):
        x, y = mixtures(counts)
        return (counts[0] + jax.nn.one_hot(jnp.argmax(a @ y), n0), counts[1] + jax.nn.one_hot(jnp.argmax(x @ b), n1))

    def measure(counts):
        x, y = mixtures(counts)
        pad = lambda m: jnp.pad(m, (0, width - m.shape[0]))  # noqa: E731
        return {"exploitability": nash_conv(table, x, y), "mixtures": jnp.stack([pad(x), pad(y)])}

    # Round 0: both players start from their first action.
    start = (jax.nn.one_hot(0, n0), jax.nn.one_hot(0, n1))
    _, steps, points = measured_loop(play, measure, start, config.iterations, config.eval_every, log)
    return SolveResult(
        exploitability=points["exploitability"].astype(np.float64), steps=steps, measure=MEASURE,
        policy=points["mixtures"][-1], details={"mixtures": points["mixtures"], "payoffs": np.asarray(table)},
    )
