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
import numpy as np
from flax import struct

from coplay.envs.trees.tree import CHANCE, PAD, GameTree


@struct.dataclass
class TreeArrays:
    """A `GameTree`'s decision paths on the device, transposed to `[D, Z]` so that
    products along a path are elementwise over columns of terminals.

    Chance edges are folded out of the paths. Policies never act on them, so
    every value here is a sum over terminals of (the product of the decision
    edges' probabilities) times (chance's probability times player 0's payoff).
    Terminals whose decision edges are the same (in Leduc, deals that differ
    only in suits) are one column whose `utility` is the sum of those terms:
    Leduc's 5520 terminal paths of 11 edges become 1116 of at most 8 decisions,
    and every pass over them is that much shorter.
    """

    legal: jax.Array  # [I, A] bool
    infoset_player: jax.Array  # [I]
    infoset_depth: jax.Array  # [I]
    edge_index: jax.Array  # [D, Z] flat index infoset * A + action of a decision edge (0 on padding)
    path_owner: jax.Array  # [D, Z]: 0, 1, or PAD after a path's last decision
    utility: jax.Array  # [Z] sum over the merged terminals of chance probability times player 0's payoff
    first_visit: jax.Array  # [I] flat index d * Z + z of one place where each information set is met
    # Per player: the flat positions of that player's edges and their (infoset, action) slots,
    # so counterfactual values sum only the player's own edges.
    own_edges: tuple[jax.Array, jax.Array]
    own_slots: tuple[jax.Array, jax.Array]
    max_infoset_depth: int = struct.field(pytree_node=False, default=0)

    @classmethod
    def from_tree(cls, tree: GameTree) -> TreeArrays:
        columns: dict[tuple[tuple[int, int], ...], int] = {}
        weighted: list[float] = []
        for z in range(tree.num_terminals):
            decided = tree.path_owner[z] < CHANCE
            key = tuple(zip(tree.path_infoset[z, decided].tolist(), tree.path_action[z, decided].tolist()))
            # float64 on the host, so merging adds no float32 rounding of its own.
            term = float(np.prod(tree.path_chance[z])) * float(tree.utility[z])
            if key in columns:
                weighted[columns[key]] += term
            else:
                columns[key] = len(weighted)
                weighted.append(term)
        depth = max(len(key) for key in columns)
        infoset = np.full((depth, len(columns)), -1, np.int64)
        action = np.zeros((depth, len(columns)), np.int64)
        for key, z in columns.items():
            for d, (i, a) in enumerate(key):
                infoset[d, z], action[d, z] = i, a
        owner = np.where(infoset >= 0, tree.infoset_player[np.maximum(infoset, 0)], PAD)
        edge = np.where(infoset >= 0, infoset * tree.num_actions + action, 0)
        flat_owner, flat_edge = owner.ravel(), edge.ravel()
        edges_0, edges_1 = (np.flatnonzero(flat_owner == p).astype(np.int32) for p in (0, 1))
        infoset_flat = infoset.ravel()
        decided_flat = np.flatnonzero(infoset_flat >= 0)
        infosets, first = np.unique(infoset_flat[decided_flat], return_index=True)
        assert np.array_equal(infosets, np.arange(tree.num_infosets))
        return cls(
            legal=jnp.asarray(tree.legal),
            infoset_player=jnp.asarray(tree.infoset_player),
            infoset_depth=jnp.asarray(tree.infoset_depth),
            edge_index=jnp.asarray(edge, jnp.int32),
            path_owner=jnp.asarray(owner, jnp.int32),
            utility=jnp.asarray(np.asarray(weighted), jnp.float32),
            first_visit=jnp.asarray(decided_flat[first], jnp.int32),
            own_edges=(jnp.asarray(edges_0), jnp.asarray(edges_1)),
            own_slots=(jnp.asarray(flat_edge[edges_0], jnp.int32), jnp.asarray(flat_edge[edges_1], jnp.int32)),
            max_infoset_depth=int(tree.infoset_depth.max()),
        )

    @property
    def num_infosets(self) -> int:
        return self.legal.shape[0]

    @property
    def num_actions(self) -> int:
        return self.legal.shape[1]


def edge_probabilities(t: TreeArrays, policy: jax.Array) -> jax.Array:
    """`[D, Z]`: the probability of each decision on each terminal's path (1 on padding)."""
    p = policy.ravel()[t.edge_index]
    return jnp.where(t.path_owner < CHANCE, p, 1.0)


def _exclusive_cumprod(x: jax.Array, reverse: bool) -> jax.Array:
    """Product of the rows strictly before (or, reversed, strictly after) each one.

    Paths are short, so an unrolled product over the rows (which XLA fuses
    into one pass) beats `jnp.cumprod` on the CPU by several times.
    """
    depth = x.shape[0]
    order = range(depth - 1, -1, -1) if reverse else range(depth)
    running = jnp.ones_like(x[0])
    rows = [running] * depth
    for d in order:
        rows[d] = running
        running = running * x[d]
    return jnp.stack(rows)


def player_utility(t: TreeArrays, player: int) -> jax.Array:
    """`[Z]`: `player`'s chance-weighted payoff at every terminal column (zero-sum: player 1
    gets minus player 0's)."""
    return t.utility if player == 0 else -t.utility


def expected_value(t: TreeArrays, policy: jax.Array) -> jax.Array:
    """Player 0's expected payoff when both players follow `policy`. `[]`."""
    reach = jnp.prod(edge_probabilities(t, policy), axis=0)
    return jnp.sum(reach * t.utility)


def counterfactual_values(t: TreeArrays, policy: jax.Array, player: int) -> tuple[jax.Array, jax.Array]:
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
    reach_others = jnp.prod(jnp.where(own, 1.0, probs), axis=0)  # [Z], chance's part is in the utility
    below = _exclusive_cumprod(own_probs, reverse=True)  # own edges after each one
    above = _exclusive_cumprod(own_probs, reverse=False)  # own edges before each one

    value = (below * (reach_others * player_utility(t, player))[None, :]).ravel()
    cfv = jax.ops.segment_sum(
        value[t.own_edges[player]], t.own_slots[player], num_segments=num_i * num_a
    ).reshape(num_i, num_a)
    # Every history of an information set has the same own reach (perfect
    # recall), so one place where the set is met gives it.
    reach = above.ravel()[t.first_visit]
    return cfv, jnp.where(t.infoset_player == player, reach, 0.0)


def best_response(t: TreeArrays, policy: jax.Array, player: int) -> tuple[jax.Array, jax.Array]:
    """An exact best response of `player` to the other player's part of `policy`.

    Returns the response policy (`policy` with `player`'s rows replaced by
    deterministic best actions; ties go to the lowest action index) and its
    expected payoff for `player`. Decisions are fixed from the owner's deepest
    information sets upwards, so each choice already knows the later ones.
    """
    mine = t.infoset_player == player
    response = policy
    for depth in range(t.max_infoset_depth, -1, -1):
        cfv, _ = counterfactual_values(t, response, player)
        best = jnp.argmax(jnp.where(t.legal, cfv, -jnp.inf), axis=1)
        choice = jax.nn.one_hot(best, t.num_actions, dtype=policy.dtype)
        now = mine & (t.infoset_depth == depth)
        response = jnp.where(now[:, None], choice, response)
    value = expected_value(t, response)
    return response, value if player == 0 else -value


def nash_conv(t: TreeArrays, policy: jax.Array) -> jax.Array:
    """Sum over players of what a best response gains over `policy`. `[]`; 0 at a Nash equilibrium."""
    value0 = expected_value(t, policy)
    _, br0 = best_response(t, policy, 0)
    _, br1 = best_response(t, policy, 1)
    return (br0 - value0) + (br1 + value0)


def exploitability(t: TreeArrays, policy: jax.Array) -> jax.Array:
    """NashConv / 2: in a two-player zero-sum game, the mean of the two best-response values. `[]`"""
    return nash_conv(t, policy) / 2.0
