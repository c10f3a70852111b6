"""Cheap talk: a speaker that controls nothing but a message appended to chosen agents'
observations (Lu et al., "Adversarial Cheap Talk", ICML 2023).

    env = CheapTalk(coplay.make("spread"), linear_speaker, params, victims=(0, 1, 2), message_dim=2)
    # every agent's observation grows by 2 entries: the message for the victims, zeros for
    # the others; rewards, actions and dynamics are the environment's own

The message is `speak(params, global_state) -> [message_dim]`, read from the
environment's global state each step (the speaker sees the state, the victims see its
message). `linear_speaker` is the default: `tanh(state @ w + b)`, messages in [-1, 1].
`params` may be traced values: an evolution strategy builds one wrapper per member of
its population inside one compiled program (`coplay.eval.cheap_talk`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.env import Env, State, TimeStepWrapper
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box
from coplay.core.types import TimeStep

Speaker = Callable[[Any, jax.Array], jax.Array]


def linear_speaker(params: Any, state: jax.Array) -> jax.Array:
    """`tanh(state @ w + b)`: params `{"w": [S, d], "b": [d]}`, state `[S]` -> message `[d]`."""
    return jnp.tanh(state.reshape(-1) @ params["w"] + params["b"])


def linear_speaker_params(env: Env, message_dim: int) -> dict[str, jax.Array]:
    """Zero parameters of `linear_speaker` for `env` (the message 0 until they move)."""
    size = int(np.prod(env.spec.global_state_space.shape))
    return {"w": jnp.zeros((size, message_dim), jnp.float32), "b": jnp.zeros((message_dim,), jnp.float32)}


class CheapTalk(TimeStepWrapper):
    """`env` with `message_dim` entries appended to every agent's observation: `speak`'s
    message for the agents in `victims`, zeros for the others."""

    def __init__(self, env: Env, speak: Speaker, params: Any, victims: Sequence[int], message_dim: int):
        super().__init__(env)
        s = env.spec
        n = s.num_agents
        if not isinstance(s.obs_space, Box) or len(s.obs_space.shape) != 1:
            raise ConfigError(f"{s.name!r}: cheap talk appends to flat observations, and its observations are "
                              f"{s.obs_space}")
        bad = [v for v in victims if not 0 <= v < n]
        if bad or not victims:
            raise ConfigError(f"victims={list(victims)}: {s.name!r} has agents 0..{n - 1}; name at least one")
        if message_dim < 1:
            raise ConfigError(f"message_dim={message_dim} must be at least 1")
        self.speak, self.params, self.message_dim = speak, params, message_dim
        self.victims = jnp.asarray([i in set(victims) for i in range(n)])
        box = s.obs_space
        self.spec = dataclasses.replace(
            s, name=f"{s.name}/cheap_talk",
            obs_space=Box(min(box.low, -1.0), max(box.high, 1.0), (box.shape[0] + message_dim,), box.dtype))

    def _view(self, state: State, ts: TimeStep) -> TimeStep:
        message = self.speak(self.params, ts.global_state).astype(ts.obs.dtype)
        heard = jnp.where(self.victims[:, None], message[None, :], 0.0)
        return ts.replace(obs=jnp.concatenate([ts.obs, heard], axis=-1))  # type: ignore[attr-defined]


__all__ = ["CheapTalk", "Speaker", "linear_speaker", "linear_speaker_params"]
