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
        self.obs_shape = tuple(space.shape)
        self.spec = dataclasses.replace(
            env.spec, obs_space=Box(min(space.low, 0.0), max(space.high, 1.0),
                                    agent_id_shape(self.obs_shape, env.spec.num_agents))
        )

    def _view(self, state: State, ts: TimeStep) -> TimeStep:
        return ts.replace(obs=agent_id_view(ts.obs, self.obs_shape))  # type: ignore[attr-defined]  # flax struct.dataclass adds replace


def _id_layout(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape an observation of `shape` is given its id in: itself when flat or an image, else flattened."""
    return tuple(shape) if len(shape) in (1, 3) else (int(np.prod(shape)),)


def agent_id_shape(shape: tuple[int, ...], num_agents: int) -> tuple[int, ...]:
    """One agent's observation shape (`shape`, the environment's) as `AgentID` shows it."""
    layout = _id_layout(shape)
    return (*layout[:-1], layout[-1] + num_agents)


def agent_id_view(obs: Any, obs_shape: tuple[int, ...]) -> Any:
    """Observations `[..., N, *obs_shape]` as `AgentID` shows them: flattened first unless flat or
    an image, then each agent's id appended (`with_agent_id`); numpy in, numpy out."""
    layout = _id_layout(obs_shape)
    obs = obs.reshape(*obs.shape[:obs.ndim - len(obs_shape)], *layout)
    return with_agent_id(obs, len(layout))


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
