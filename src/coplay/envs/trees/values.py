"""Exact values on a `GameTree`, vectorised over all terminals at once.

A policy here is a behaviour policy for both players, `[I, A]` float: row i is
the distribution at information set i (rows of both players live in the same
array; `tree.infoset_player` says whose each row is). Everything is a pure JAX
function of a `TreeArrays` pytree and a policy, so it can be `jit`-ed, scanned
over CFR iterations and `vmap`-ed over many policies.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from coplay.envs.trees.tree import CHANCE, GameTree


@struct.dataclass
class TreeArrays:
    """A `GameTree`'s arrays on the device (see `GameTree` for their meaning)."""

    legal: jax.Array  # [I, A] bool
    infoset_player: jax.Array  # [I]
    infoset_depth: jax.Array  # [I]
    path_infoset: jax.Array  # [Z, D]
    path_action: jax.Array  # [Z, D]
    path_owner: jax.Array  # [Z, D]
    path_chance: jax.Array  # [Z, D]
    utility: jax.Array  # [Z]

    @classmethod
    def from_tree(cls, tree: GameTree) -> TreeArrays:
        return cls(
            legal=jnp.asarray(tree.legal),
            infoset_player=jnp.asarray(tree.infoset_player),
            infoset_depth=jnp.asarray(tree.infoset_depth),
            path_infoset=jnp.asarray(tree.path_infoset),
            path_action=jnp.asarray(tree.path_action),
            path_owner=jnp.asarray(tree.path_owner),
            path_chance=jnp.asarray(tree.path_chance, jnp.float32),
            utility=jnp.asarray(tree.utility, jnp.float32),
        )

    @property
    def num_infosets(self) -> int:
        return self.legal.shape[0]

    @property
    def num_actions(self) -> int:
        return self.legal.shape[1]


def edge_probabilities(t: TreeArrays, policy: jax.Array) -> jax.Array:
    """`[Z, D]`: the probability of each edge on each terminal's path (1 on padding)."""
    decided = t.path_owner < CHANCE
    p = policy[jnp.maximum(t.path_infoset, 0), t.path_action]
    return jnp.where(decided, p, t.path_chance)


def _exclusive_cumprod(x: jax.Array, reverse: bool) -> jax.Array:
    """Product of the entries strictly before (or, reversed, strictly after) each one along axis 1."""
    ones = jnp.ones_like(x[:, :1])
    if reverse:
        inclusive = jnp.cumprod(x[:, ::-1], axis=1)[:, ::-1]
        return jnp.concatenate([inclusive[:, 1:], ones], axis=1)
    inclusive = jnp.cumprod(x, axis=1)
    return jnp.concatenate([ones, inclusive[:, :-1]], axis=1)


def player_utility(t: TreeArrays, player: int | jax.Array) -> jax.Array:
    """`[Z]`: `player`'s payoff at every terminal (zero-sum: player 1 gets minus player 0's)."""
    return jnp.where(player == 0, t.utility, -t.utility)


def expected_value(t: TreeArrays, policy: jax.Array) -> jax.Array:
    """Player 0's expected payoff when both players follow `policy`. `[]`."""
    reach = jnp.prod(edge_probabilities(t, policy), axis=1)
    return jnp.sum(reach * t.utility)


def counterfactual_values(
    t: TreeArrays, policy: jax.Array, player: int | jax.Array
) -> tuple[jax.Array, jax.Array]:
    """`player`'s counterfactual action values and own reach probabilities.

    Returns `cfv` `[I, A]`: for each of `player`'s information sets I and legal
    action a, the sum over histories h in I of (the opponent's and chance's
    probability of reaching h) times (`player`'s expected payoff after playing
    a at h); and `reach` `[I]`: `player`'s own probability of reaching I. Rows
    of the other player's information sets are zero.
    """
    num_i, num_a = t.legal.shape
    probs = edge_probabilities(t, policy)
    own = t.path_owner == player
    own_probs = jnp.where(own, probs, 1.0)
    reach_others = jnp.prod(jnp.where(own, 1.0, probs), axis=1)  # [Z]
    below = _exclusive_cumprod(own_probs, reverse=True)  # own edges after each one
    above = _exclusive_cumprod(own_probs, reverse=False)  # own edges before each one

    value = reach_others[:, None] * below * player_utility(t, player)[:, None]
    slot = jnp.where(own, t.path_infoset * num_a + t.path_action, num_i * num_a)
    cfv = jax.ops.segment_sum(
        jnp.where(own, value, 0.0).ravel(), slot.ravel(), num_segments=num_i * num_a + 1
    )[:-1].reshape(num_i, num_a)
    # Every history of an information set has the same own reach (perfect recall).
    rows = jnp.where(own, t.path_infoset, num_i)
    reach = jax.ops.segment_max(
        jnp.where(own, above, 0.0).ravel(), rows.ravel(), num_segments=num_i + 1
    )[:-1]
    return cfv, jnp.maximum(reach, 0.0)


def best_response(
    t: TreeArrays, policy: jax.Array, player: int
) -> tuple[jax.Array, jax.Array]:
    """An exact best response of `player` to the other player's part of `policy`.

    Returns the response policy (`policy` with `player`'s rows replaced by
    deterministic best actions; ties go to the lowest action index) and its
    expected payoff for `player`. Decisions are fixed from the owner's deepest
    information sets upwards, so each choice already knows the later ones.
    """
    mine = t.infoset_player == player
    response = policy
    max_depth = t.path_owner.shape[1]
    for depth in range(max_depth - 1, -1, -1):
        cfv, _ = counterfactual_values(t, response, player)
        best = jnp.argmax(jnp.where(t.legal, cfv, -jnp.inf), axis=1)
        choice = jax.nn.one_hot(best, t.num_actions, dtype=policy.dtype)
        now = mine & (t.infoset_depth == depth)
        response = jnp.where(now[:, None], choice, response)
    value = expected_value(t, response)
    return response, jnp.where(player == 0, value, -value)


def nash_conv(t: TreeArrays, policy: jax.Array) -> jax.Array:
    """Sum over players of what a best response gains over `policy`. `[]`; 0 at a Nash equilibrium."""
    value0 = expected_value(t, policy)
    _, br0 = best_response(t, policy, 0)
    _, br1 = best_response(t, policy, 1)
    return (br0 - value0) + (br1 + value0)


def exploitability(t: TreeArrays, policy: jax.Array) -> jax.Array:
    """NashConv / 2: in a two-player zero-sum game, the mean of the two best-response values. `[]`"""
    return nash_conv(t, policy) / 2.0
