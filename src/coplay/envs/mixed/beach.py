"""The beach problem domain with two objectives (Mannion et al., 2018), in pure JAX:
MOMAland's `mobeach_v0` step for step.

N agents (default 100), each of a type (drawn with `type_distribution`, default
30% type 0, 70% type 1), start in sections of a beach (uniformly, or by
`position_distribution`) and each step move one section left, stay, or move one
section right (actions 0, 1, 2; the ends of the beach hold them). After
`num_timesteps` steps (default 1) the episode ends and each agent is paid, in
two objectives, for the section it ends in:

    capacity: c * exp(-c / capacity)                 (c agents in the section; best at c = capacity)
    mixture:  min_type(count) / c                    (0 for an empty section)

(`reward_mode=individual`, the default), or every agent the whole beach's:
the capacity reward summed over sections and the mixture reward averaged over
them (`reward_mode=team`). Earlier steps pay nothing.

Observation of agent i, as MOMAland's: [type, section, section capacity, agents
in the section, share of them of agent i's type]; the global state is every
agent's observation, concatenated. Where MOMAland's parallel environment
returns its terminations in the truncations' place (and a `state()` that is
empty once the episode is over), this one says the episode terminated, not
truncated; `tests/test_beach.py` replays episodes recorded from MOMAland and
checks observations and rewards agree. Rewards are non-negative, so the
reference point is (0, 0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError, unknown_name
from coplay.core.spaces import Box, Discrete, outside
from coplay.core.types import EnvSpec, TimeStep

MOVES = np.array([-1, 0, 1], np.int32)   # left, stay, right
ACTION_NAMES = ("left", "stay", "right")
REWARD_MODES = ("individual", "team")


@struct.dataclass
class BeachState:
    types: jax.Array      # [N] int32
    section: jax.Array    # [N] int32
    t: jax.Array          # [] int32 steps taken


def _positive_int(name: str, value, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ConfigError(f"beach: {name}={value!r} is out of range; it must be an integer >= {least}")
    return int(value)


def _distribution(name: str, value, size: int | None) -> np.ndarray:
    p = np.asarray(value, np.float64)
    if p.ndim != 1 or (size is not None and p.size != size) or p.size == 0 or not np.all(np.isfinite(p)) \
            or np.any(p < 0) or p.sum() <= 0:
        need = f"{size} " if size is not None else ""
        raise ConfigError(f"beach: {name}={np.asarray(value).tolist()} must be {need}non-negative numbers with a "
                          "positive sum")
    return p / p.sum()


class Beach(Env):
    def __init__(self, num_agents: int = 100, sections: int = 6, capacity: int = 7,
                 type_distribution=(0.3, 0.7), position_distribution=None, reward_mode: str = "individual",
                 num_timesteps: int = 1):
        n = _positive_int("num_agents", num_agents)
        self.sections = _positive_int("sections", sections)
        self.capacity = float(_positive_int("capacity", capacity))
        self.type_p = _distribution("type_distribution", type_distribution, None)
        self.position_p = (np.full(self.sections, 1.0 / self.sections) if position_distribution is None
                           else _distribution("position_distribution", position_distribution, self.sections))
        if reward_mode not in REWARD_MODES:
            raise unknown_name("reward_mode", reward_mode, REWARD_MODES)
        self.team = reward_mode == "team"
        self.num_timesteps = _positive_int("num_timesteps", num_timesteps)
        self.num_types = self.type_p.size
        self.reference_point = np.zeros(2)
        self.spec = EnvSpec(
            name="beach", num_agents=n, obs_space=Box(0.0, float(n), (5,)), action_space=Discrete(len(MOVES)),
            global_state_space=Box(0.0, float(n), (n * 5,)), max_steps=self.num_timesteps, reward_dim=2,
            reward_names=("capacity", "mixture"), teams=(0,) * n,
        )

    def reset_to(self, types, section) -> tuple[BeachState, TimeStep]:
        """Like `reset`, with each agent's type and section given (`[N]` each)."""
        n = self.spec.num_agents
        types, section = np.asarray(types), np.asarray(section)
        if types.shape != (n,) or section.shape != (n,) or types.min() < 0 or types.max() >= self.num_types \
                or section.min() < 0 or section.max() >= self.sections:
            raise ConfigError(f"beach: reset_to needs {n} types in 0..{self.num_types - 1} and {n} sections in "
                              f"0..{self.sections - 1}")
        state = BeachState(jnp.asarray(types, jnp.int32), jnp.asarray(section, jnp.int32), jnp.zeros((), jnp.int32))
        return state, self._timestep(state, jnp.zeros(self.spec.reward_shape, jnp.float32), jnp.zeros((), bool),
                                     jnp.zeros((), jnp.int32))

    def _reset(self, key: jax.Array) -> tuple[BeachState, TimeStep]:
        k_type, k_pos = jax.random.split(key)
        n = self.spec.num_agents
        types = jax.random.choice(k_type, self.num_types, (n,), p=jnp.asarray(self.type_p, jnp.float32))
        section = jax.random.choice(k_pos, self.sections, (n,), p=jnp.asarray(self.position_p, jnp.float32))
        state = BeachState(types.astype(jnp.int32), section.astype(jnp.int32), jnp.zeros((), jnp.int32))
        return state, self._timestep(state, jnp.zeros(self.spec.reward_shape, jnp.float32), jnp.zeros((), bool),
                                     jnp.zeros((), jnp.int32))

    def _step(self, state: BeachState, actions: jax.Array, key: jax.Array) -> tuple[BeachState, TimeStep]:
        del key   # the beach is deterministic once reset
        invalid = outside(self.spec.action_space, actions)
        move = jnp.where(invalid, 0, jnp.asarray(MOVES)[jnp.clip(actions, 0, len(MOVES) - 1)])
        section = jnp.clip(state.section + move, 0, self.sections - 1)
        new = BeachState(state.types, section, state.t + 1)
        done = new.t >= self.num_timesteps
        reward = jnp.where(done, self._reward(new), 0.0)
        return new, self._timestep(new, reward, done, jnp.sum(invalid, dtype=jnp.int32))

    def _counts(self, state: BeachState) -> tuple[jax.Array, jax.Array]:
        """Agents per section `[S]` and per section and type `[S, types]`."""
        per_type = jnp.zeros((self.sections, self.num_types), jnp.float32).at[state.section, state.types].add(1.0)
        return per_type.sum(-1), per_type

    def _reward(self, state: BeachState) -> jax.Array:
        """`[N, 2]`: (capacity, mixture) of each agent's section, or of the whole beach."""
        consumption, per_type = self._counts(state)
        capacity = consumption * jnp.exp(-consumption / self.capacity)                          # [S]
        mixture = jnp.where(consumption > 0, per_type.min(-1) / jnp.maximum(consumption, 1.0), 0.0)   # [S]
        if self.team:
            whole = jnp.stack([capacity.sum(), mixture.mean()])
            return jnp.broadcast_to(whole, (self.spec.num_agents, 2))
        return jnp.stack([capacity, mixture], -1)[state.section]

    def _timestep(self, state: BeachState, reward: jax.Array, done: jax.Array, invalid: jax.Array) -> TimeStep:
        n = self.spec.num_agents
        consumption, per_type = self._counts(state)
        here = consumption[state.section]
        obs = jnp.stack([state.types.astype(jnp.float32), state.section.astype(jnp.float32),
                         jnp.full((n,), self.capacity), here, per_type[state.section, state.types] / here], -1)
        return TimeStep(obs=obs, reward=reward, done=done, truncated=jnp.zeros((), bool),
                        active=jnp.ones((n,), bool), action_mask=jnp.ones((n, len(MOVES)), bool),
                        global_state=obs.reshape(-1), info={"invalid_actions": invalid})
