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

    def _view(self, state: State, ts: TimeStep) -> TimeStep:
        return ts.replace(obs=with_agent_id(ts.obs))  # type: ignore[attr-defined]  # flax struct.dataclass adds replace


def with_agent_id(obs: Any) -> Any:
    """Flat observations `[..., N, O]` with each agent's one-hot index appended: `[..., N, O + N]`
    (what `AgentID` shows; numpy in, numpy out)."""
    xp = np if isinstance(obs, np.ndarray) else jnp
    n = obs.shape[-2]
    eye = xp.broadcast_to(xp.eye(n, dtype=obs.dtype), (*obs.shape[:-2], n, n))
    return xp.concatenate([obs, eye], axis=-1)
