"""The environment contract's data: `TimeStep` (what an environment returns
after `reset` or `step`) and `EnvSpec` (its static description)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
from flax import struct

from coplay.core.errors import ConfigError
from coplay.core.spaces import Box, Discrete, Space, num_actions


@struct.dataclass
class TimeStep:
    """One step of an environment, agents on the leading axis.

    obs:          [N, *obs_shape]  each agent's observation
    reward:       [N] or [N, K]    reward of the step (K objectives when spec.reward_dim == K > 1)
    done:         []  bool         the episode ended with this step (terminated or truncated)
    truncated:    []  bool         it ended by the time limit, not by the game itself
    active:       [N] bool         who acts now (all in simultaneous games, the mover in turn-based ones)
    action_mask:  [N, A] bool      legal actions (A = 0 for continuous actions)
    global_state: [*state_shape]   what a centralised critic sees
    info:         dict of fixed-shape arrays, per-step facts (e.g. collisions, win)
    """

    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    truncated: jax.Array
    active: jax.Array
    action_mask: jax.Array
    global_state: jax.Array
    info: dict[str, jax.Array] = struct.field(default_factory=dict)


@dataclass(frozen=True)
class EnvSpec:
    """Static facts about an environment; hashable so it can be a jit static.

    `obs_space` and `action_space` are per agent. `teams[i]` is agent i's team id
    and `roles[i]` its role name. `render_rgb(state) -> uint8 [H, W, 3]` and
    `render_text(state) -> str` are present where the environment can render;
    they run on the host on one (unbatched) state.
    """

    name: str
    num_agents: int
    obs_space: Space
    action_space: Space
    global_state_space: Box
    max_steps: int
    reward_dim: int = 1
    teams: tuple[int, ...] = ()
    roles: tuple[str, ...] = ()
    turn_based: bool = False
    reward_names: tuple[str, ...] = ()
    render_rgb: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    render_text: Callable[[Any], str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        n = self.num_agents
        if not self.teams:
            object.__setattr__(self, "teams", (0,) * n)
        if not self.roles:
            object.__setattr__(self, "roles", ("agent",) * n)
        if len(self.teams) != n or len(self.roles) != n:
            raise ConfigError(
                f"EnvSpec {self.name!r}: teams and roles need one entry per agent ({n}), "
                f"got {len(self.teams)} and {len(self.roles)}"
            )
        if self.reward_dim < 1:
            raise ConfigError(f"EnvSpec {self.name!r}: reward_dim must be >= 1, got {self.reward_dim}")
        if self.reward_names and len(self.reward_names) != self.reward_dim:
            raise ConfigError(f"EnvSpec {self.name!r}: reward_names {self.reward_names} needs one name per "
                              f"objective (reward_dim={self.reward_dim})")

    @property
    def num_actions(self) -> int:
        """Width of `action_mask`: `n` for Discrete actions, 0 otherwise."""
        return num_actions(self.action_space)

    @property
    def discrete_actions(self) -> bool:
        return isinstance(self.action_space, Discrete)

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of the `actions` argument of `step`: `[N]` or `[N, d]`."""
        return (self.num_agents, *self.action_space.shape)

    @property
    def objective_names(self) -> tuple[str, ...]:
        """One name per objective: `reward_names`, or `objective0`, `objective1`, ... where
        the environment names none."""
        if self.reward_names:
            return self.reward_names
        return tuple(f"objective{k}" for k in range(self.reward_dim))

    @property
    def reward_shape(self) -> tuple[int, ...]:
        return (self.num_agents,) if self.reward_dim == 1 else (self.num_agents, self.reward_dim)
