"""Value-learning machinery shared by the Q family (IQL, VDN, QMIX): acting
epsilon-greedily over legal actions, bootstrapped values (double Q), n-step
targets, target-network updates and the exploration schedule."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from coplay.nets import distributions


def epsilon_schedule(start: float, finish: float, decay_steps: int) -> optax.Schedule:
    """Linear decay from `start` to `finish` over `decay_steps` environment steps, then constant."""
    return optax.linear_schedule(start, finish, max(int(decay_steps), 1))


def greedy(q: jax.Array, mask: jax.Array) -> jax.Array:
    """q, mask: [..., A] -> the best legal action [...]."""
    return jnp.argmax(distributions.masked_logits(q, mask), axis=-1).astype(jnp.int32)


def epsilon_greedy(key: jax.Array, q: jax.Array, mask: jax.Array, epsilon: jax.Array) -> jax.Array:
    """With probability `epsilon` a uniformly random legal action, else the greedy one."""
    k_explore, k_random = jax.random.split(key)
    uniform = distributions.masked_logits(jnp.zeros_like(q), mask)
    random_action = distributions.sample(k_random, uniform)
    explore = jax.random.uniform(k_explore, q.shape[:-1]) < epsilon
    return jnp.where(explore, random_action, greedy(q, mask))


def chosen(q: jax.Array, action: jax.Array) -> jax.Array:
    """q: [..., A], action: [...] -> Q of the action taken [...]."""
    return jnp.take_along_axis(q, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def bootstrap_value(q_online: jax.Array, q_target: jax.Array, mask: jax.Array, double: bool) -> jax.Array:
    """The value of a next state [...] from Q-values [..., A] over its legal actions:
    the target network's value of the online network's best action (double Q,
    van Hasselt et al. 2016), or the target network's own best value."""
    best = greedy(q_online if double else q_target, mask)
    return chosen(q_target, best)


def n_step_targets(reward: jax.Array, done: jax.Array, next_value: jax.Array, gamma: float,
                   n: int, start: int = 0) -> jax.Array:
    """n-step TD targets for positions start .. start+T-1 of a window.

    reward: [L, B, ...] received after each step; done: [L, B] the episode ended
    with that step; next_value: [T, B, ...] the bootstrap value of the state at
    position t + n, for each target position t. L >= start + T + n - 1.

        G_t = sum_{k<n} gamma^k r_{t+k} (no episode end before t+k)
              + gamma^n V(s_{t+n}) (no episode end in t..t+n-1)
    """
    length = next_value.shape[0]
    extra = reward.ndim - done.ndim
    done = done.reshape(done.shape + (1,) * extra).astype(reward.dtype)
    total = jnp.zeros_like(next_value)
    alive = jnp.ones_like(next_value)
    for k in range(n):
        total = total + (gamma ** k) * alive * reward[start + k: start + k + length]
        alive = alive * (1.0 - done[start + k: start + k + length])
    return total + (gamma ** n) * alive * next_value


def update_target(online: Any, target: Any, step: jax.Array, interval: int, tau: float) -> Any:
    """Every `interval` gradient steps move the target network towards the
    online one by `tau` (tau = 1: a hard copy; tau < 1: Polyak averaging)."""
    due = (step % interval) == 0
    moved = optax.incremental_update(online, target, tau)
    return jax.tree.map(lambda new, old: jnp.where(due, new, old), moved, target)


def td_loss(prediction: jax.Array, target: jax.Array, weight: jax.Array, kind: str) -> jax.Array:
    """Mean squared (or Huber) TD error over the entries with weight > 0."""
    error = prediction - jax.lax.stop_gradient(target)
    per = 0.5 * jnp.square(error) if kind == "mse" else optax.huber_loss(error)
    weight = weight.astype(per.dtype)
    return jnp.sum(per * weight) / jnp.maximum(jnp.sum(weight), 1.0)
