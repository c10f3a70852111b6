"""Replay of experience streams, for the off-policy learners.

Each parallel environment writes its own time-ordered stream into a flashbax
trajectory buffer (rows = environments, columns = time), and learners sample
windows of consecutive steps from it. One window holds everything an update
needs: the steps it learns from, the steps its n-step targets look ahead to,
and, for recurrent agents, a burn-in and the hidden state stored when the first
step was acted. Windows never straddle the buffer's write position, and episode
boundaries inside a window are marked in the data (`done`, `reset`).

The buffer's state is an ordinary pytree inside the TrainState, so checkpoints
and exact resume cover it."""

from __future__ import annotations

from typing import Any

import flashbax as fbx
import jax
import jax.numpy as jnp

from coplay.core.errors import ConfigError


def make_window_buffer(num_envs: int, capacity: int, window: int, batch_size: int, min_steps: int):
    """A buffer of `capacity` environment steps in all (split evenly over the
    `num_envs` streams) that samples `batch_size` windows of `window` steps, once
    `min_steps` steps per stream were written."""
    per_stream = capacity // num_envs
    if per_stream < window:
        raise ConfigError(f"algo.buffer_size={capacity} leaves {per_stream} steps per environment, fewer than "
                          f"one sampled window of {window} steps; raise buffer_size or lower num_envs")
    return fbx.make_trajectory_buffer(
        add_batch_size=num_envs, sample_batch_size=batch_size, sample_sequence_length=window, period=1,
        min_length_time_axis=max(min_steps, window), max_length_time_axis=per_stream,
    )


def add_rollout(buffer, state: Any, items: dict[str, jax.Array]) -> Any:
    """items: [T, E, ...] as a rollout produces them; the buffer stores [E, T, ...]."""
    return buffer.add(state, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), items))


def sample_windows(buffer, state: Any, key: jax.Array) -> dict[str, jax.Array]:
    """Windows time-major: [window, batch, ...]."""
    batch = buffer.sample(state, key).experience
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch)
