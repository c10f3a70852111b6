"""Generalised advantage estimation."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(rewards: jax.Array, values: jax.Array, dones: jax.Array, last_value: jax.Array,
        gamma: float, lam: float) -> tuple[jax.Array, jax.Array]:
    """rewards, values: [T, ...]; dones: [T, ...] broadcastable to them (the
    episode ended at step t, so V(s_{t+1}) is not bootstrapped); last_value: [...]
    the value of the state after the last step. Returns (advantages, returns) [T, ...]."""
    dones = jnp.broadcast_to(dones, rewards.shape).astype(rewards.dtype)
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    deltas = rewards + gamma * next_values * (1.0 - dones) - values

    def body(acc, x):
        delta, done = x
        acc = delta + gamma * lam * (1.0 - done) * acc
        return acc, acc

    _, adv = jax.lax.scan(body, jnp.zeros_like(last_value), (deltas, dones), reverse=True)
    return adv, adv + values
