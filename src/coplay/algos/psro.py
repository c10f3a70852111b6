"""Policy-space response oracles (PSRO; Lanctot et al., 2017) on a game's exact tree.

    result = psro.run(coplay.make("tree:kuhn_poker"), psro.Config(meta_solver="nash", iterations=20), key)
    result.exploitability          # [iterations + 1] of the meta-strategy mixture
    result.policy                  # [I, A] the final mixture as one behaviour policy

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
pieces are traced once; unused members have zero weight. The curve is the
exact exploitability of the mixture, (BR_0 + BR_1) / 2 against it, before
each iteration and at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.meta_solvers import META_SOLVERS, solve_meta_game
from coplay.algos.solvers import TREE_GAMES, GameSupport, Log, SolveResult, exact_tree, tree_problem, validate
from coplay.core.compile import jit
from coplay.core.config import param
from coplay.core.env import Env
from coplay.envs.trees.tree import GameTree
from coplay.envs.trees.values import (
    TreeArrays,
    best_response,
    counterfactual_values,
    expected_value,
    exploitability,
)

MEASURE = "exact exploitability of the meta-strategy mixture: (BR_0 + BR_1) / 2, computed on the game tree"


@dataclass(frozen=True)
class Config:
    meta_solver: str = param("nash", "how the mixture over each population is chosen: nash (linear "
                                     "programming; the double oracle), replicator dynamics, or uniform "
                                     "(fictitious play over the population)", choices=META_SOLVERS)
    iterations: int = param(20, "PSRO iterations: each adds an exact best response to each population", min=1)


SUPPORT = GameSupport(uses=TREE_GAMES, default="tree:kuhn_poker", problem=tree_problem)


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


def run(game: Env, config: Config = Config(), key: jax.Array | None = None, *, log: Log | None = None) -> SolveResult:
    """PSRO on `game`'s exact tree (`tree:kuhn_poker`, `tree:leduc_holdem`).
    Deterministic: `key` is not used. See `solve_tree`."""
    validate("psro", game, config)
    return solve_tree(exact_tree(game), config, log)


def solve_tree(tree: GameTree, config: Config = Config(), log: Log | None = None) -> SolveResult:
    """PSRO on `tree` for `config.iterations` iterations.

    Returns the final mixture as one behaviour policy `[I, A]` (`policy`), the
    mixture's exact exploitability before each iteration and at the end
    (`[iterations + 1]`), and in `details`: `populations` `[2, K, I, A]` (each
    player's members; only the owner's rows matter), `meta_strategies` `[K, 2, K]`
    (iteration k's mixtures over the k + 1 members then, zero-padded; the last
    row is the final one), `payoffs` `[K, K]` (the final meta-game, player 0's
    payoff) and `expected_value` (player 0's value of the final mixture);
    K = iterations + 1."""
    t = TreeArrays.from_tree(tree)
    size = config.iterations + 1
    uniform = tree.uniform_policy()
    pop0 = jnp.broadcast_to(uniform, (size, *uniform.shape))
    pop1 = pop0
    respond = jit(_respond)
    score = jit(meta_game)

    curve = []
    metas = np.zeros((size, 2, size))
    count = 1
    for it in range(config.iterations):
        payoffs = np.asarray(score(t, pop0, pop1))[:count, :count]
        x, y = solve_meta_game(payoffs, config.meta_solver)
        metas[it, 0, :count], metas[it, 1, :count] = x, y
        w0 = jnp.zeros(size).at[:count].set(x)
        w1 = jnp.zeros(size).at[:count].set(y)
        _, expl, br0, br1 = respond(t, pop0, pop1, w0, w1)
        curve.append(float(expl))
        if log is not None:
            log({"step": it, "exploitability": curve[-1], "population": count})
        pop0, pop1 = pop0.at[count].set(br0), pop1.at[count].set(br1)
        count += 1

    payoffs = np.asarray(score(t, pop0, pop1))
    x, y = solve_meta_game(payoffs, config.meta_solver)
    metas[-1, 0], metas[-1, 1] = x, y
    mix, expl, _, _ = respond(t, pop0, pop1, jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32))
    curve.append(float(expl))
    if log is not None:
        log({"step": config.iterations, "exploitability": curve[-1], "population": count})
    return SolveResult(
        exploitability=np.asarray(curve), steps=np.arange(config.iterations + 1), measure=MEASURE,
        policy=np.asarray(mix),
        details={"populations": np.stack([np.asarray(pop0), np.asarray(pop1)]), "meta_strategies": metas,
                 "payoffs": payoffs, "expected_value": float(expected_value(t, mix))},
    )
