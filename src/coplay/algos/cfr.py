"""Counterfactual regret minimisation on a game's exact tree: CFR, CFR+ and
discounted CFR, every information set updated at once.

    result = run(coplay.make("tree:leduc_holdem"), Config(variant="cfr+", iterations=1000), key)
    result.policy               # [I, A] the average policy, converges to a Nash equilibrium
    result.exploitability       # [P] its exact exploitability every `eval_every` iterations

or directly on the tree's arrays `t = TreeArrays.from_tree(tree)`:

    state = advance(t, init(t), iterations=1000, config=Config())
    policy = average_policy(t, state)

One iteration, for each player in turn (alternating updates) or both at once:
compute the counterfactual value of every (information set, action) under the
current policy (`coplay.envs.trees.values.counterfactual_values`, one pass
over all terminal paths), add the instantaneous regrets to the accumulated
ones, and fold the current policy into the average, weighted by the player's
own reach. The current policy is regret matching on the accumulated regrets,

    sigma_t(I, a) = max(R_t(I, a), 0) / sum_b max(R_t(I, b), 0)   (uniform where no regret is positive),

and the average policy, the one that converges, is
sum_t w_t pi_i^{sigma_t}(I) sigma_t(I, a), normalised at each information set.
Its exploitability, (BR_0 + BR_1) / 2 with BR_i what a best response earns
as player i against it (`values.exploitability`; 0 exactly at an
equilibrium of a two-player zero-sum game), is measured on the tree every
`eval_every` iterations, between compiled blocks of iterations
(`solvers.measured_loop`).

Variants (Zinkevich et al. 2007; Tammelin 2014; Brown & Sandholm 2019):

- `cfr`: regrets and average accumulate with equal weights.
- `cfr+`: regrets are floored at zero after every update (regret matching+),
  and iteration t enters the average with weight t.
- `dcfr`: after iteration t, positive accumulated regrets are scaled by
  t^alpha / (t^alpha + 1), negative ones by t^beta / (t^beta + 1), and the
  average by (t / (t + 1))^gamma (defaults 1.5, 0, 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.algos.solvers import (
    TREE_GAMES,
    GameSupport,
    Log,
    SolveResult,
    exact_tree,
    measured_loop,
    tree_problem,
    validate,
)
from coplay.core.config import param
from coplay.core.env import Env
from coplay.envs.trees.values import TreeArrays, counterfactual_values, expected_value, exploitability

VARIANTS = ("cfr", "cfr+", "dcfr")
MEASURE = "exact exploitability of the average policy: (BR_0 + BR_1) / 2, computed on the game tree"


@dataclass(frozen=True)
class Config:
    variant: str = param("cfr+", "cfr: regret matching, equal weights; cfr+: regrets floored at 0, "
                                 "iteration t weighted t in the average; dcfr: discounted CFR", choices=VARIANTS)
    iterations: int = param(1000, "CFR iterations", min=1)
    eval_every: int = param(20, "iterations between exact measurements of the average policy's exploitability",
                            min=1)
    alternating: bool = param(True, "update player 0, then player 1 against the new policy (else both at once)")
    alpha: float = param(1.5, "dcfr: positive regrets scaled by t^alpha / (t^alpha + 1) after iteration t")
    beta: float = param(0.0, "dcfr: negative regrets scaled by t^beta / (t^beta + 1) after iteration t")
    gamma: float = param(2.0, "dcfr: the average scaled by (t / (t + 1))^gamma after iteration t")


SUPPORT = GameSupport(uses=TREE_GAMES, default="tree:kuhn_poker", problem=tree_problem)


class CFRState(struct.PyTreeNode):
    regrets: jax.Array  # [I, A] accumulated counterfactual regrets
    average: jax.Array  # [I, A] reach-weighted sum of past policies (unnormalised)
    iteration: jax.Array  # [] int, iterations done


def init(t: TreeArrays) -> CFRState:
    zeros = jnp.zeros(t.legal.shape, jnp.float32)
    return CFRState(regrets=zeros, average=zeros, iteration=jnp.zeros((), jnp.int32))


def _normalise(weights: jax.Array, legal: jax.Array) -> jax.Array:
    """Rows of `weights` as distributions over legal actions; uniform where a row has no weight."""
    weights = jnp.where(legal, weights, 0.0)
    total = weights.sum(axis=1, keepdims=True)
    uniform = legal / legal.sum(axis=1, keepdims=True)
    return jnp.where(total > 0, weights / jnp.where(total > 0, total, 1.0), uniform)


def current_policy(t: TreeArrays, state: CFRState) -> jax.Array:
    """Regret matching: play each action in proportion to its positive regret. `[I, A]`"""
    return _normalise(jnp.maximum(state.regrets, 0.0), t.legal)


def average_policy(t: TreeArrays, state: CFRState) -> jax.Array:
    """The average policy, the one that converges to equilibrium. `[I, A]`"""
    return _normalise(state.average, t.legal)


def _update(t: TreeArrays, state: CFRState, config: Config, player: int | None) -> CFRState:
    """Accumulate regrets and average for `player`'s information sets (both players' if None)."""
    policy = current_policy(t, state)
    if player is None:
        cfv0, reach0 = counterfactual_values(t, policy, 0)
        cfv1, reach1 = counterfactual_values(t, policy, 1)
        is0 = t.infoset_player == 0
        cfv = jnp.where(is0[:, None], cfv0, cfv1)
        reach = jnp.where(is0, reach0, reach1)
        mine = jnp.ones(t.legal.shape[0], bool)
    else:
        cfv, reach = counterfactual_values(t, policy, player)
        mine = t.infoset_player == player
    value = jnp.sum(policy * cfv, axis=1, keepdims=True)
    instant = jnp.where(t.legal, cfv - value, 0.0)

    step = (state.iteration + 1).astype(jnp.float32)  # t, counted from 1
    regrets = state.regrets + instant
    weight = step if config.variant == "cfr+" else 1.0
    average = state.average + weight * reach[:, None] * policy
    if config.variant == "cfr+":
        regrets = jnp.maximum(regrets, 0.0)
    elif config.variant == "dcfr":
        pos = step**config.alpha / (step**config.alpha + 1.0)
        neg = step**config.beta / (step**config.beta + 1.0)
        regrets = regrets * jnp.where(regrets > 0, pos, neg)
        average = average * (step / (step + 1.0)) ** config.gamma
    return state.replace(
        regrets=jnp.where(mine[:, None], regrets, state.regrets),
        average=jnp.where(mine[:, None], average, state.average),
    )


def iterate(t: TreeArrays, state: CFRState, config: Config) -> CFRState:
    """One CFR iteration over every information set."""
    if config.alternating:
        for player in (0, 1):
            state = _update(t, state, config, player)
    else:
        state = _update(t, state, config, None)
    return state.replace(iteration=state.iteration + 1)


def advance(t: TreeArrays, state: CFRState, iterations: int, config: Config) -> CFRState:
    """`iterations` CFR iterations in one compiled loop (`iterations` must be static under jit)."""

    def body(s, _):
        return iterate(t, s, config), None

    state, _ = jax.lax.scan(body, state, None, length=iterations)
    return state


def run(game: Env, config: Config = Config(), key: jax.Array | None = None, *, log: Log | None = None) -> SolveResult:
    """CFR on `game`'s exact tree (`tree:kuhn_poker`, `tree:leduc_holdem`) for
    `config.iterations` iterations. Deterministic: `key` is not used.

    Returns the average policy `[I, A]` as `policy`, its exact exploitability at
    iteration 0 (uniform play), every `eval_every` iterations and at the end, and in
    `details`: `expected_value` (player 0's value of the average policy; Kuhn's game
    value is -1/18), `current_policy` `[I, A]` and `regrets` `[I, A]`."""
    validate("cfr", game, config)
    t = TreeArrays.from_tree(exact_tree(game))

    def measure(s: CFRState) -> dict[str, jax.Array]:
        return {"exploitability": exploitability(t, average_policy(t, s))}

    state, steps, points = measured_loop(lambda s: iterate(t, s, config), measure, init(t), config.iterations,
                                         config.eval_every, log)
    policy = average_policy(t, state)
    return SolveResult(
        exploitability=points["exploitability"].astype(np.float64), steps=steps, measure=MEASURE,
        policy=np.asarray(policy),
        details={"expected_value": float(expected_value(t, policy)),
                 "current_policy": np.asarray(current_policy(t, state)), "regrets": np.asarray(state.regrets)},
    )
