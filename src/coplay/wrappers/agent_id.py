"""Agent-id features: append a one-hot of the agent's index to its observation,
so one shared network can still tell agents apart."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from coplay.core.env import State, TimeStepWrapper
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box
from coplay.core.types import TimeStep


class AgentID(TimeStepWrapper):
    """Each agent's observation with its one-hot index appended on the last axis:

        flat observations   [N, O]        -> [N, O + N]
        images or grids     [N, H, W, C]  -> [N, H, W, C + N]   (N constant channels: agent i's
                                                                  channel C + i is all ones)

    so a convolutional torso sees the id at every cell. Observations of other shapes (a
    2-D grid [H, W], say) are flattened first: [N, H * W + N]."""

    def __init__(self, env):
        super().__init__(env)
        space = env.spec.obs_space
        if not isinstance(space, Box) or not space.shape:
            raise ConfigError(f"AgentID needs Box observations of at least one axis, {env.spec.name!r} has {space}")
        n = env.spec.num_agents
        self.in_ndim = len(space.shape)
        self.flatten = self.in_ndim not in (1, 3)
        shape = (int(np.prod(space.shape)),) if self.flatten else tuple(space.shape)
        self.obs_ndim = len(shape)
        self.spec = dataclasses.replace(
            env.spec, obs_space=Box(min(space.low, 0.0), max(space.high, 1.0), agent_id_shape(shape, n))
        )

    def _view(self, state: State, ts: TimeStep) -> TimeStep:
        obs = ts.obs.reshape(*ts.obs.shape[:ts.obs.ndim - self.in_ndim], -1) if self.flatten else ts.obs
        return ts.replace(obs=with_agent_id(obs, self.obs_ndim))  # type: ignore[attr-defined]  # flax struct.dataclass adds replace


def agent_id_shape(shape: tuple[int, ...], num_agents: int) -> tuple[int, ...]:
    """One agent's observation shape once `with_agent_id` has appended its id: the last axis grows by N."""
    return (*shape[:-1], shape[-1] + num_agents)


def with_agent_id(obs: Any, obs_ndim: int = 1) -> Any:
    """Observations `[..., N, *shape]` (`obs_ndim = len(shape)` axes per agent) with each
    agent's one-hot index appended on the last axis: flat `[..., N, O]` -> `[..., N, O + N]`,
    images `[..., N, H, W, C]` -> `[..., N, H, W, C + N]` (the one-hot repeated at every
    cell, N constant channels). What `AgentID` shows; numpy in, numpy out."""
    xp = np if isinstance(obs, np.ndarray) else jnp
    n = obs.shape[-1 - obs_ndim]
    eye = xp.eye(n, dtype=obs.dtype).reshape(n, *([1] * (obs_ndim - 1)), n)
    eye = xp.broadcast_to(eye, (*obs.shape[:-1], n))
    return xp.concatenate([obs, eye], axis=-1)
