"""A pool of frozen policy snapshots for a learner to play against: self-play
with past selves, prioritised fictitious self-play, and best responses to a
fixed population (PSRO).

The pool is a pytree inside the TrainState, so it is checkpointed, resumed and
vmapped over seeds like the rest of the run. Snapshots are stored stacked
(every parameter leaf gets a leading slot axis [P, ...]) in a ring buffer; the
oldest snapshot makes way for the newest once the pool is full.

For each slot the pool keeps the learner's recent results against it
(exponentially decayed points and games: a win is 1, a draw 1/2), which is what
prioritised fictitious self-play (Vinyals et al., 2019) samples by:
opponents the learner does not yet beat are drawn more often.

Ways to draw an opponent (`SAMPLING`):

    latest    the most recent snapshot
    uniform   any snapshot, equally likely (fictitious self-play)
    pfsp      snapshot i with weight (1 - p_i) ** power, p_i the learner's
              score rate against it (a Beta(1, 1) prior: 1/2 before any game)
    fixed     the pool's own `weights` (a population's meta-strategy in PSRO)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from coplay.core.errors import unknown_name

SAMPLING = ("latest", "uniform", "pfsp", "fixed")


class Pool(struct.PyTreeNode):
    params: Any           # [P, ...] per leaf: the snapshots
    filled: jax.Array     # [P] bool: the slot holds a snapshot
    added_at: jax.Array   # [P] int32: the learner update the snapshot was taken at (-1: empty)
    points: jax.Array     # [P] float32: the learner's decayed points against the snapshot
    games: jax.Array      # [P] float32: decayed number of games against it
    newest: jax.Array     # [] int32: the slot written last
    weights: jax.Array    # [P] float32: sampling weights for `fixed`

    @property
    def capacity(self) -> int:
        return int(self.filled.shape[0])


def create(params: Any, capacity: int, step: int | jax.Array = 0) -> Pool:
    """A pool of `capacity` slots holding one snapshot, `params`, in slot 0."""
    stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (capacity, *jnp.shape(x))).astype(jnp.asarray(x).dtype),
                           params)
    slot0 = jnp.arange(capacity) == 0
    return Pool(
        params=stacked, filled=slot0, added_at=jnp.where(slot0, jnp.int32(step), -1),
        points=jnp.zeros(capacity, jnp.float32), games=jnp.zeros(capacity, jnp.float32),
        newest=jnp.zeros((), jnp.int32), weights=slot0.astype(jnp.float32),
    )


def from_population(stacked_params: Any, weights: jax.Array) -> Pool:
    """A full, fixed pool: `stacked_params` [P, ...] per leaf, drawn with `weights` [P]
    (normalised here) under the `fixed` sampling."""
    weights = jnp.asarray(weights, jnp.float32)
    size = weights.shape[0]
    return Pool(
        params=stacked_params, filled=jnp.ones(size, bool), added_at=jnp.arange(size, dtype=jnp.int32),
        points=jnp.zeros(size, jnp.float32), games=jnp.zeros(size, jnp.float32),
        newest=jnp.int32(size - 1), weights=weights / jnp.sum(weights),
    )


def add(pool: Pool, params: Any, step: jax.Array, when: jax.Array | bool = True) -> Pool:
    """Store `params` in the next slot (overwriting the oldest once full), if `when`."""
    slot = (pool.newest + 1) % pool.capacity
    when = jnp.asarray(when)

    def put(stack, leaf):
        return stack.at[slot].set(jnp.where(when, leaf, stack[slot]))

    fresh = (jnp.arange(pool.capacity) == slot) & when
    return pool.replace(
        params=jax.tree.map(put, pool.params, params),
        filled=pool.filled | fresh,
        added_at=jnp.where(fresh, jnp.asarray(step, jnp.int32), pool.added_at),
        points=jnp.where(fresh, 0.0, pool.points),
        games=jnp.where(fresh, 0.0, pool.games),
        newest=jnp.where(when, slot, pool.newest),
    )


def score_rate(pool: Pool) -> jax.Array:
    """[P] the learner's score rate against each snapshot, with one prior win and one prior loss."""
    return (pool.points + 1.0) / (pool.games + 2.0)


def probabilities(pool: Pool, how: str, power: float = 2.0) -> jax.Array:
    """[P] the chance of drawing each slot."""
    if how == "latest":
        return (jnp.arange(pool.capacity) == pool.newest).astype(jnp.float32)
    if how == "uniform":
        w = pool.filled.astype(jnp.float32)
    elif how == "pfsp":
        w = jnp.where(pool.filled, (1.0 - score_rate(pool)) ** power, 0.0)
        w = jnp.where(jnp.sum(w) > 0, w, pool.filled.astype(jnp.float32))
    elif how == "fixed":
        w = jnp.where(pool.filled, pool.weights, 0.0)
    else:
        raise unknown_name("opponent sampling", how, SAMPLING)
    return w / jnp.sum(w)


def sample(pool: Pool, key: jax.Array, n: int, how: str, power: float = 2.0) -> jax.Array:
    """[n] int32 slots, drawn independently."""
    logits = jnp.log(probabilities(pool, how, power))
    return jax.random.categorical(key, logits, shape=(n,)).astype(jnp.int32)


def gather(pool: Pool, slots: jax.Array) -> Any:
    """The snapshots at `slots` [n]: every leaf [n, ...]."""
    return jax.tree.map(lambda x: x[slots], pool.params)


def record(pool: Pool, slots: jax.Array, points: jax.Array, valid: jax.Array, decay: float) -> Pool:
    """Decay the old results, then add games: `slots`, `points` (learner's 1 / 0.5 / 0)
    and `valid` (a game ended there) of any shape."""
    valid = valid.reshape(-1).astype(jnp.float32)
    slots = slots.reshape(-1)
    p = jax.ops.segment_sum(points.reshape(-1) * valid, slots, pool.capacity)
    g = jax.ops.segment_sum(valid, slots, pool.capacity)
    return pool.replace(points=decay * pool.points + p, games=decay * pool.games + g)
