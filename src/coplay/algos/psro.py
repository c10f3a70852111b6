"""Policy-space response oracles (PSRO; Lanctot et al., 2017) on a game's exact tree.

    result = psro.run(game_tree("kuhn_poker"), psro.Config(meta_solver="nash", iterations=20))
    result.exploitability          # [iterations + 1] of the meta-strategy mixture

Each player keeps a population of policies, starting from the uniform one.
Every iteration:

1. score every pair of population members against each other (the meta-game,
   `[K0, K1]`, player 0's expected payoff),
2. a meta-solver (`nash`, `replicator`, `uniform`; `coplay.algos.common.meta_solvers`)
   picks a mixture over each population,
3. each player adds an exact best response to the other player's mixture.

A mixture of policies is played as one behaviour policy: at each information
set, each member's action distribution is weighted by the mixture weight
times that member's own probability of reaching the set (Kuhn's theorem), so
exploitability and best responses are computed on the tree exactly.
With the `uniform` meta-solver this is fictitious play in policy space; with
`nash` it is the double oracle algorithm.

Populations are preallocated to `iterations + 1` members so the compiled
pieces are traced once; unused members have zero weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.meta_solvers import META_SOLVERS, solve_meta_game
from coplay.core.errors import ConfigError
from coplay.envs.trees.tree import GameTree
from coplay.envs.trees.values import (
    TreeArrays,
    best_response,
    counterfactual_values,
    expected_value,
    exploitability,
)


@dataclass(frozen=True)
class Config:
    meta_solver: str = "nash"
    iterations: int = 20

    def __post_init__(self) -> None:
        if self.meta_solver not in META_SOLVERS:
            raise ConfigError(f"psro meta_solver {self.meta_solver!r} is not one of {', '.join(META_SOLVERS)}")
        if self.iterations < 1:
            raise ConfigError(f"psro iterations must be >= 1, got {self.iterations}")


@dataclass(frozen=True)
class PSROResult:
    populations: tuple[np.ndarray, np.ndarray]  # each [K, I, A]; only the owner's rows matter
    meta_strategies: list[tuple[np.ndarray, np.ndarray]]  # per iteration, mixtures over the populations
    exploitability: np.ndarray  # [iterations + 1]: the mixture's, before each iteration and at the end
    payoffs: np.ndarray  # [K0, K1] the final meta-game, player 0's payoff
    policy: np.ndarray  # [I, A] the final mixture as one behaviour policy


def joint(t: TreeArrays, policy0: jax.Array, policy1: jax.Array) -> jax.Array:
    """One `[I, A]` policy: player 0's rows from `policy0`, player 1's from `policy1`."""
    return jnp.where((t.infoset_player == 0)[:, None], policy0, policy1)


def mixture_policy(t: TreeArrays, population: jax.Array, weights: jax.Array, player: int) -> jax.Array:
    """The behaviour policy of playing population member k with probability `weights[k]`.

    population: [K, I, A]; weights: [K] -> [I, A] (`player`'s rows; others are uniform).
    """
    reach = jax.vmap(lambda p: counterfactual_values(t, p, player)[1])(population)  # [K, I]
    w = weights[:, None] * reach  # [K, I]
    mixed = jnp.einsum("ki,kia->ia", w, population)
    total = w.sum(axis=0)[:, None]
    uniform = t.legal / t.legal.sum(axis=1, keepdims=True)
    return jnp.where(total > 0, mixed / jnp.where(total > 0, total, 1.0), uniform)


def meta_game(t: TreeArrays, pop0: jax.Array, pop1: jax.Array) -> jax.Array:
    """`[K0, K1]`: player 0's expected payoff for every pair of members."""
    pair = lambda a, b: expected_value(t, joint(t, a, b))  # noqa: E731
    return jax.vmap(lambda a: jax.vmap(lambda b: pair(a, b))(pop1))(pop0)


def _respond(t: TreeArrays, pop0, pop1, w0, w1):
    mix = joint(t, mixture_policy(t, pop0, w0, 0), mixture_policy(t, pop1, w1, 1))
    br0, _ = best_response(t, mix, 0)
    br1, _ = best_response(t, mix, 1)
    return mix, exploitability(t, mix), br0, br1


def run(tree: GameTree, config: Config = Config()) -> PSROResult:
    t = TreeArrays.from_tree(tree)
    size = config.iterations + 1
    uniform = tree.uniform_policy()
    pop0 = jnp.broadcast_to(uniform, (size, *uniform.shape))
    pop1 = pop0
    respond = jax.jit(_respond)
    score = jax.jit(meta_game)

    curve, metas = [], []
    count = 1
    for _ in range(config.iterations):
        payoffs = np.asarray(score(t, pop0, pop1))[:count, :count]
        x, y = solve_meta_game(payoffs, config.meta_solver)
        metas.append((x, y))
        w0 = jnp.zeros(size).at[:count].set(x)
        w1 = jnp.zeros(size).at[:count].set(y)
        _, expl, br0, br1 = respond(t, pop0, pop1, w0, w1)
        curve.append(float(expl))
        pop0, pop1 = pop0.at[count].set(br0), pop1.at[count].set(br1)
        count += 1

    payoffs = np.asarray(score(t, pop0, pop1))
    x, y = solve_meta_game(payoffs, config.meta_solver)
    mix, expl, _, _ = respond(t, pop0, pop1, jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32))
    curve.append(float(expl))
    return PSROResult(
        populations=(np.asarray(pop0), np.asarray(pop1)),
        meta_strategies=metas + [(x, y)],
        exploitability=np.asarray(curve),
        payoffs=payoffs,
        policy=np.asarray(mix),
    )
