"""The functional environment contract.

    state, ts = env.reset(key)
    state, ts = env.step(state, actions, key)

Both are pure functions of their arguments, so they can be `jit`-ed, `vmap`-ed
and `scan`-ned. Subclasses implement `_reset` and `_step`; the public methods
check the actions' shape at trace time (free under `jit`) and then delegate.
Values are not checked: an action outside the action space (see
`coplay.core.spaces.outside`) has an outcome each environment documents and
counts in `info`, the same under `jit` and outside it (spread and foraging:
the agent does nothing, `info["invalid_actions"]`; the games: the mover
forfeits, `info["illegal_action"]`).
"""

from __future__ import annotations

import abc
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.errors import ActionError
from coplay.core.types import EnvSpec, TimeStep

State = Any


class Env(abc.ABC):
    """Base class of coplay environments (and wrappers, which are environments)."""

    spec: EnvSpec
    # True where `step` already starts the next episode when one ends (environments
    # stepped on the host, see coplay.interop.host); AutoReset leaves those alone.
    auto_resets: bool = False
    # True where a state can be stepped only once (host copies cannot be rewound). Loops
    # that stop once every episode has ended must then run to their full length: under
    # `vmap`, a batched stop condition steps finished members and keeps their old states.
    states_used_once: bool = False
    # True where an agent's observation identifies the state it decides in (a text
    # game whose view is its information state, a puzzle whose view is the board):
    # turns that saw equal views can then be grouped as one state (GiGPO's anchors).
    views_are_states: bool = False

    @property
    def num_agents(self) -> int:
        return self.spec.num_agents

    def reset(self, key: jax.Array) -> tuple[State, TimeStep]:
        """Start an episode. `key`: a PRNG key. Returns the state and first TimeStep."""
        return self._reset(key)

    def step(self, state: State, actions: jax.Array, key: jax.Array) -> tuple[State, TimeStep]:
        """Advance one step. `actions`: `[N]` int (discrete) or `[N, d]` float (an
        array, or a list of numbers)."""
        if isinstance(actions, (list, tuple)):
            actions = jnp.asarray(actions)
        self.check_actions(actions)
        return self._step(state, actions, key)

    @abc.abstractmethod
    def _reset(self, key: jax.Array) -> tuple[State, TimeStep]: ...

    @abc.abstractmethod
    def _step(self, state: State, actions: jax.Array, key: jax.Array) -> tuple[State, TimeStep]: ...

    def check_actions(self, actions: jax.Array) -> None:
        """Raise ActionError unless `actions` has this environment's action shape and kind."""
        expected = self.spec.action_shape
        shape = tuple(np.shape(actions))
        if shape != expected:
            raise ActionError(
                f"{self.spec.name}: actions have shape {shape}, expected {expected} "
                f"(num_agents={self.spec.num_agents}, action space {self.spec.action_space})"
            )
        dtype = jnp.asarray(actions).dtype if not hasattr(actions, "dtype") else actions.dtype
        if self.spec.discrete_actions and not jnp.issubdtype(dtype, jnp.integer):
            raise ActionError(
                f"{self.spec.name}: discrete actions must be integers, got dtype {dtype}"
            )

    def base_state(self, state: State) -> State:
        """The innermost environment's state inside `state` (wrappers that keep
        state of their own unwrap it), e.g. for rendering."""
        return state

    def close(self) -> None:  # noqa: B027 - a no-op unless the environment holds something
        """Release what the environment holds outside JAX (host copies, worker
        processes); pure JAX environments hold nothing."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r}, num_agents={self.spec.num_agents})"


class Wrapper(Env):
    """An environment built on another; forwards everything it does not change."""

    def __init__(self, env: Env):
        self.env = env
        self.spec = env.spec

    @property
    def auto_resets(self) -> bool:  # type: ignore[override]
        return self.env.auto_resets

    @property
    def states_used_once(self) -> bool:  # type: ignore[override]
        return self.env.states_used_once

    @property
    def views_are_states(self) -> bool:  # type: ignore[override]
        return self.env.views_are_states

    def close(self) -> None:
        self.env.close()

    def base_state(self, state: State) -> State:
        return self.env.base_state(state)

    @property
    def unwrapped(self) -> Env:
        env = self.env
        while isinstance(env, Wrapper):
            env = env.env
        return env

    def step(self, state: State, actions: jax.Array, key: jax.Array) -> tuple[State, TimeStep]:
        # The innermost environment checks the actions; wrappers need not repeat it.
        return self._step(state, actions, key)


class TimeStepWrapper(Wrapper):
    """A wrapper that changes only what each time step shows, `_view(state, ts)`; the
    inner environment's state passes through unchanged."""

    def _view(self, state: State, ts: TimeStep) -> TimeStep:
        raise NotImplementedError

    def _reset(self, key: jax.Array) -> tuple[State, TimeStep]:
        state, ts = self.env.reset(key)
        return state, self._view(state, ts)

    def _step(self, state: State, actions: jax.Array, key: jax.Array) -> tuple[State, TimeStep]:
        state, ts = self.env.step(state, actions, key)
        return state, self._view(state, ts)
