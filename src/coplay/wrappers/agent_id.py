"""Agent-id features: append a one-hot of the agent's index to its observation,
so one shared network can still tell agents apart."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from coplay.core.env import State, TimeStepWrapper
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box
from coplay.core.types import TimeStep


class AgentID(TimeStepWrapper):
    def __init__(self, env):
        super().__init__(env)
        space = env.spec.obs_space
        if not isinstance(space, Box) or len(space.shape) != 1:
            raise ConfigError(
                f"AgentID needs flat Box observations, {env.spec.name!r} has {space}"
            )
        n = env.spec.num_agents
        self.spec = dataclasses.replace(
            env.spec, obs_space=Box(min(space.low, 0.0), max(space.high, 1.0), (space.shape[0] + n,))
        )
        self._eye = jnp.eye(n, dtype=jnp.float32)

    def _view(self, state: State, ts: TimeStep) -> TimeStep:
        return ts.replace(  # type: ignore[attr-defined]  # flax struct.dataclass adds replace
            obs=jnp.concatenate([ts.obs, self._eye.astype(ts.obs.dtype)], axis=-1))
