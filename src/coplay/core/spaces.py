"""Per-agent spaces. An environment's `EnvSpec` holds the space of one agent;
the arrays that cross the contract add a leading agent axis `[N, ...]`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np


class Space:
    if TYPE_CHECKING:
        # Read-only: fields of Box, computed by Discrete and MultiDiscrete.
        @property
        def shape(self) -> tuple[int, ...]: ...

        @property
        def dtype(self) -> np.dtype: ...

    def sample(self, key: jax.Array) -> jax.Array:  # pragma: no cover - abstract
        raise NotImplementedError

    def contains(self, x) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class Discrete(Space):
    """Integers `0 .. n-1`; shape `()`."""

    n: int

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int32)

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, (), 0, self.n, dtype=jnp.int32)

    def contains(self, x) -> bool:
        x = np.asarray(x)
        return x.shape == () and np.issubdtype(x.dtype, np.integer) and 0 <= int(x) < self.n


@dataclass(frozen=True)
class MultiDiscrete(Space):
    """A vector of integers, entry `i` in `0 .. nvec[i]-1`."""

    nvec: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.nvec),)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int32)

    def sample(self, key: jax.Array) -> jax.Array:
        nvec = jnp.asarray(self.nvec)
        u = jax.random.uniform(key, nvec.shape)
        return jnp.floor(u * nvec).astype(jnp.int32)

    def contains(self, x) -> bool:
        x = np.asarray(x)
        return (
            x.shape == self.shape
            and np.issubdtype(x.dtype, np.integer)
            and bool(np.all((x >= 0) & (x < np.asarray(self.nvec))))
        )


@dataclass(frozen=True)
class Box(Space):
    """Real vectors with elementwise bounds (`-inf`/`inf` allowed)."""

    low: float
    high: float
    shape: tuple[int, ...]
    dtype: np.dtype = np.dtype(np.float32)

    def sample(self, key: jax.Array) -> jax.Array:
        lo = max(self.low, -1.0) if np.isinf(self.low) else self.low
        hi = min(self.high, 1.0) if np.isinf(self.high) else self.high
        return jax.random.uniform(key, self.shape, minval=lo, maxval=hi).astype(self.dtype)

    def contains(self, x) -> bool:
        x = np.asarray(x)
        return x.shape == self.shape and bool(np.all((x >= self.low) & (x <= self.high)))


@dataclass(frozen=True)
class Text(Space):
    """Free text (a `str`), as a game played on the host reads and writes it (a TextArena
    game: `coplay.envs.text.host_game`). Not an array: no compiled learner takes it."""

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(object)

    def sample(self, key: jax.Array) -> jax.Array:
        raise TypeError("free text cannot be sampled as an array")

    def contains(self, x) -> bool:
        return isinstance(x, str)


def num_actions(space: Space) -> int:
    """Width of an action mask for `space`: `n` for Discrete, 0 for others."""
    return space.n if isinstance(space, Discrete) else 0


def outside(space: Space, actions: jax.Array) -> jax.Array:
    """`[N]` bool: the agents whose action lies outside `space`: a `Discrete` index out
    of range, or a `Box` action with a NaN entry (values past a Box's bounds are the
    environment's to clip). Spread and foraging let such an agent do nothing and
    count it in `info["invalid_actions"]`."""
    if isinstance(space, Discrete):
        return (actions < 0) | (actions >= space.n)
    if isinstance(space, Box):
        return jnp.isnan(actions).reshape(actions.shape[0], -1).any(-1)
    return jnp.zeros(actions.shape[:1], bool)
