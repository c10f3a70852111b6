"""A preference per episode: the weight vector a preference-conditioned policy
acts for, drawn when an episode starts and shown to the agents.

    Preference(env)                        # w ~ Dirichlet(1, ..., 1): uniform over the simplex
    Preference(env, concentration=0.5)     # favours the corners (one objective dominating)
    Preference(env, weights=[0.7, 0.3])    # one fixed preference (evaluation)

The environment keeps its vector reward `[N, K]`. The episode's weight `w` (`[K]`,
non-negative, summing to 1; one for the whole team) is appended to every agent's
observation and to the flattened global state, whose last K entries it is
(`Preference.weight(ts)` reads it back), and `info["utility"]` (`[N]`) is each
agent's linear utility of the step's reward, w . r, so that `EpisodeStats` sums
it into the episode's utility under its own preference. An environment that
resets itself inside `step` (`auto_resets`, those stepped on the host) draws the
next episode's weight on the step that ends an episode."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from coplay.core.env import Env, Wrapper
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box
from coplay.core.types import TimeStep


@struct.dataclass
class PreferenceState:
    env_state: Any
    weight: jax.Array   # [K] the episode's preference


class Preference(Wrapper):
    def __init__(self, env: Env, weights: Any = None, concentration: float = 1.0):
        super().__init__(env)
        spec = env.spec
        k = spec.reward_dim
        if k < 2:
            raise ConfigError(f"Preference needs vector rewards (reward_dim >= 2); {spec.name!r} has a scalar "
                              "reward")
        space = spec.obs_space
        if not isinstance(space, Box) or len(space.shape) != 1:
            raise ConfigError(f"Preference appends the weight to flat Box observations; {spec.name!r} has {space}")
        if not concentration > 0:
            raise ConfigError(f"concentration must be positive, got {concentration}")
        if weights is not None:
            weights = jnp.asarray(weights, jnp.float32)   # may be traced (an evaluation vmapped over weights)
            if weights.shape != (k,):
                raise ConfigError(f"weights for {spec.name!r} must be {k} numbers (one per objective: "
                                  f"{', '.join(spec.objective_names)}), got shape {weights.shape}")
            if not isinstance(weights, jax.core.Tracer) and not (bool(jnp.all(weights >= 0))
                                                                  and bool(jnp.sum(weights) > 0)):
                raise ConfigError(f"weights must be non-negative with a positive sum, got {weights.tolist()}")
        self.weights = weights
        self.concentration = float(concentration)
        self.num_objectives = k
        state_size = math.prod(spec.global_state_space.shape)
        gs = spec.global_state_space
        self.spec = dataclasses.replace(
            spec, obs_space=Box(min(space.low, 0.0), max(space.high, 1.0), (space.shape[0] + k,)),
            global_state_space=Box(min(gs.low, 0.0), max(gs.high, 1.0), (state_size + k,)))

    def draw(self, key: jax.Array) -> jax.Array:
        """`[K]`: the fixed weight, or one drawn from the Dirichlet distribution."""
        if self.weights is not None:
            return self.weights
        return jax.random.dirichlet(key, jnp.full((self.num_objectives,), self.concentration, jnp.float32))

    @staticmethod
    def weight(ts: TimeStep, k: int) -> jax.Array:
        """`[..., K]`: the weight a (batched) time step was shown, its global state's last K entries."""
        return ts.global_state[..., -k:]

    def _reset(self, key: jax.Array) -> tuple[PreferenceState, TimeStep]:
        k_weight, k_env = jax.random.split(key)
        env_state, ts = self.env.reset(k_env)
        w = self.draw(k_weight)
        return PreferenceState(env_state, w), self._view(ts, w, jnp.zeros(ts.reward.shape[0], jnp.float32))

    def _step(self, state: PreferenceState, actions: jax.Array, key: jax.Array) -> tuple[PreferenceState, TimeStep]:
        k_weight, k_env = jax.random.split(key)
        env_state, ts = self.env.step(state.env_state, actions, k_env)
        utility = ts.reward.astype(jnp.float32) @ state.weight          # under the weight the step was taken for
        w = state.weight
        if self.env.auto_resets:   # the time step already shows the next episode
            w = jnp.where(ts.done, self.draw(k_weight), w)
        return PreferenceState(env_state, w), self._view(ts, w, utility)

    def _view(self, ts: TimeStep, w: jax.Array, utility: jax.Array) -> TimeStep:
        n = ts.obs.shape[0]
        obs = jnp.concatenate([ts.obs, jnp.broadcast_to(w.astype(ts.obs.dtype), (n, w.shape[0]))], axis=-1)
        state = jnp.concatenate([ts.global_state.reshape(-1).astype(jnp.float32), w])
        return ts.replace(obs=obs, global_state=state,   # type: ignore[attr-defined]  # flax struct.dataclass
                          info={**ts.info, "utility": utility})

    def base_state(self, state: PreferenceState) -> Any:
        return self.env.base_state(state.env_state)
