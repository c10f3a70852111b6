"""Environments that step on the host (PettingZoo, Gymnasium), under the same
functional contract as coplay's JAX environments, so every algorithm trains
on them with its own compiled `act` and update code.

A host environment keeps a pool of copies of the foreign environment. Its JAX
state is only a handle, `HostState(slot, generation, pool)`, and `reset` and
`step` reach the copies through `jax.pure_callback`: under `vmap` one
callback receives the whole batch (all seeds and parallel environments) and
steps every copy it names, so acting and learning stay inside one `jit`.

What differs from a JAX environment, and why:

- **States are used once.** A copy cannot be rewound, so a state can be
  stepped only once; stepping a state that was already stepped raises
  `HostEnvError` instead of silently returning another branch.
- **Copies reset themselves** (`auto_resets = True`): when an episode ends,
  `step` returns the finished step's reward, `done`, `truncated` and `info`
  with the next episode's first observation, exactly what the `AutoReset`
  wrapper gives for JAX environments (which leaves such environments alone).
- **Copies are allocated by `reset`.** Each reset of a fresh handle takes a
  copy from the pool (a new one while the pool is below `max_copies`, else the
  least recently used one, whose old handle then fails loudly if stepped).
- **Resuming** a run restores handles that name a pool from another process;
  such a handle gets a fresh copy, and that step is reported as a truncated
  episode end with reward 0, so every episode after the resume is real.

Seeds for the copies come from the JAX keys given to `reset` and `step`, so a
run is reproducible for a given seed, as far as the foreign environment is.
"""

from __future__ import annotations

import abc
import itertools
import secrets
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import CoplayError
from coplay.core.types import EnvSpec, TimeStep


class HostEnvError(CoplayError, RuntimeError):
    """A host-stepped environment broke its API, or a handle was misused."""


@dataclass
class HostStep:
    """One copy's step in coplay's layout (NumPy, agents on the leading axis)."""

    obs: np.ndarray           # [N, *obs_shape]
    reward: np.ndarray        # [N] or [N, K]
    done: bool
    truncated: bool
    active: np.ndarray        # [N] bool
    action_mask: np.ndarray   # [N, A] bool
    global_state: np.ndarray  # [*state_shape]


class HostCopy(abc.ABC):
    """One copy of a foreign environment, translated to coplay's layout."""

    @abc.abstractmethod
    def reset(self, seed: int) -> HostStep: ...

    @abc.abstractmethod
    def step(self, actions: np.ndarray) -> HostStep:
        """`actions`: `[N]` ints or `[N, d]` floats; inactive agents' entries are ignored."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


@struct.dataclass
class HostState:
    slot: jax.Array        # [] int32: which copy
    generation: jax.Array  # [] int32: the copy's step counter when this state was made
    pool: jax.Array        # [] int32: which pool (process) made the handle


_STEP_FIELDS = ("obs", "reward", "done", "truncated", "active", "action_mask", "global_state")


def _seed(key_data: np.ndarray) -> int:
    k = np.asarray(key_data, np.uint64).reshape(-1)
    return int(k[0]) << 32 | int(k[-1])


class HostPool:
    """The copies behind one host environment, with their handles' bookkeeping."""

    def __init__(self, make_copy, spec: EnvSpec, max_copies: int):
        self.make_copy = make_copy
        self.spec = spec
        self.max_copies = max_copies
        self.id = secrets.randbits(31)
        self.copies: list[HostCopy] = []
        self.generation: list[int] = []
        self.steps: list[int] = []      # steps into the current episode
        self.last_use: list[int] = []
        self.tick = itertools.count()

    # -- handles ---------------------------------------------------------------
    def _allocate(self, now: int) -> int:
        if len(self.copies) < self.max_copies:
            self.copies.append(self.make_copy())
            self.generation.append(0)
            self.steps.append(0)
            self.last_use.append(-1)
            return len(self.copies) - 1
        slot = int(np.argmin(self.last_use))
        if self.last_use[slot] == now:
            raise HostEnvError(
                f"{self.spec.name}: more than max_copies={self.max_copies} episodes run at once; "
                f"raise max_copies")
        self.generation[slot] += 1  # its old handle is now stale
        return slot

    def _start(self, slot: int, seed: int, now: int) -> HostStep:
        self.steps[slot] = 0
        self.last_use[slot] = now
        return self.copies[slot].reset(seed)

    # -- callbacks (leading batch dims B = slot.shape) -------------------------
    def reset_batch(self, key_data: np.ndarray):
        key_data = np.asarray(key_data)  # callbacks receive jax Arrays; indexing those is slow
        batch = key_data.shape[:-1]
        now = next(self.tick)
        out, slots, gens = [], [], []
        for k in key_data.reshape(-1, key_data.shape[-1]):
            slot = self._allocate(now)
            out.append(self._start(slot, _seed(k), now))
            slots.append(slot)
            gens.append(self.generation[slot])
        return self._pack(batch, out, slots, gens)

    def step_batch(self, slot: np.ndarray, gen: np.ndarray, pool: np.ndarray, actions: np.ndarray,
                   key_data: np.ndarray):
        slot, gen, pool, actions, key_data = map(np.asarray, (slot, gen, pool, actions, key_data))
        batch = slot.shape
        now = next(self.tick)
        n = len(batch)
        flat_actions = actions.reshape(-1, *actions.shape[n:])
        out, slots, gens = [], [], []
        for s, g, p, a, k in zip(slot.reshape(-1), gen.reshape(-1), pool.reshape(-1), flat_actions,
                                 key_data.reshape(-1, key_data.shape[-1])):
            s, g = int(s), int(g)
            if int(p) != self.id:  # a handle from another process (a resumed checkpoint)
                s = self._allocate(now)
                first = self._start(s, _seed(k), now)
                first.reward = np.zeros(self.spec.reward_shape, np.float32)
                first.done = first.truncated = True
                out.append(first)
            else:
                if s >= len(self.copies) or g != self.generation[s]:
                    raise HostEnvError(
                        f"{self.spec.name}: a state of copy {s} was stepped twice, or after its copy was "
                        f"recycled (generation {g}, copy at {self.generation[s] if s < len(self.copies) else '-'});"
                        f" host-stepped environments cannot branch from an old state (raise max_copies if "
                        f"more than {self.max_copies} episodes run at once)")
                self.generation[s] += 1
                self.last_use[s] = now
                out.append(self._advance(s, a, k))
            slots.append(s)
            gens.append(self.generation[s])
        return self._pack(batch, out, slots, gens)

    def _advance(self, slot: int, actions: np.ndarray, key_data: np.ndarray) -> HostStep:
        ts = self.copies[slot].step(actions)
        self.steps[slot] += 1
        if not ts.done and self.steps[slot] >= self.spec.max_steps:
            ts.done = ts.truncated = True
        if ts.done:  # the next episode starts now; the finished step's reward and flags are kept
            first = self._start(slot, _seed(key_data), self.last_use[slot])
            ts = HostStep(obs=first.obs, reward=ts.reward, done=True, truncated=ts.truncated,
                          active=first.active, action_mask=first.action_mask, global_state=first.global_state)
        return ts

    def _pack(self, batch, steps: list[HostStep], slots, gens):
        shapes = self.result_shapes()
        fields = []
        for name in _STEP_FIELDS:
            want = shapes[name]
            fields.append(np.stack([np.asarray(getattr(t, name), want.dtype) for t in steps])
                          .reshape(tuple(batch) + tuple(want.shape)))
        slots = np.asarray(slots, np.int32).reshape(batch)
        gens = np.asarray(gens, np.int32).reshape(batch)
        return (slots, gens, *fields)

    def result_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        spec = self.spec
        return {
            "obs": jax.ShapeDtypeStruct((spec.num_agents, *spec.obs_space.shape), jnp.float32),
            "reward": jax.ShapeDtypeStruct(spec.reward_shape, jnp.float32),
            "done": jax.ShapeDtypeStruct((), jnp.bool_),
            "truncated": jax.ShapeDtypeStruct((), jnp.bool_),
            "active": jax.ShapeDtypeStruct((spec.num_agents,), jnp.bool_),
            "action_mask": jax.ShapeDtypeStruct((spec.num_agents, spec.num_actions), jnp.bool_),
            "global_state": jax.ShapeDtypeStruct(spec.global_state_space.shape, jnp.float32),
        }

    def close(self) -> None:
        for c in self.copies:
            c.close()
        self.copies.clear()


class HostEnv(Env):
    """A coplay environment whose copies step on the host (see the module doc).

    `make_copy()` builds one `HostCopy`; `spec` describes it in coplay's terms."""

    auto_resets = True

    def __init__(self, make_copy, spec: EnvSpec, max_copies: int = 4096):
        if max_copies < 1:
            raise HostEnvError(f"max_copies must be >= 1, got {max_copies}")
        self.spec = spec
        self.pool = HostPool(make_copy, spec, max_copies)

    def _result_types(self):
        i32 = jax.ShapeDtypeStruct((), jnp.int32)
        return (i32, i32, *self.pool.result_shapes().values())

    def _timestep(self, pool_id, out) -> tuple[HostState, TimeStep]:
        slot, gen, *fields = out
        f = dict(zip(_STEP_FIELDS, fields))
        state = HostState(slot=slot, generation=gen, pool=jnp.full_like(slot, pool_id))
        return state, TimeStep(info={}, **f)

    def _reset(self, key: jax.Array) -> tuple[HostState, TimeStep]:
        out = jax.pure_callback(self.pool.reset_batch, self._result_types(), _key_data(key),
                                vmap_method="broadcast_all")
        return self._timestep(self.pool.id, out)

    def _step(self, state: HostState, actions: jax.Array, key: jax.Array) -> tuple[HostState, TimeStep]:
        out = jax.pure_callback(self.pool.step_batch, self._result_types(), state.slot, state.generation,
                                state.pool, actions, _key_data(key), vmap_method="broadcast_all")
        return self._timestep(self.pool.id, out)

    def close(self) -> None:
        self.pool.close()


def _key_data(key: jax.Array) -> jax.Array:
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key


def box_bounds(spaces: list[Any], size: int) -> tuple[float, float]:
    """Scalar bounds covering gymnasium Boxes flattened and zero-padded to `size`."""
    low = min(float(np.min(sp.low)) for sp in spaces)
    high = max(float(np.max(sp.high)) for sp in spaces)
    if any(int(np.prod(sp.shape)) < size for sp in spaces):
        low, high = min(low, 0.0), max(high, 0.0)
    return low, high


__all__ = ["HostCopy", "HostEnv", "HostEnvError", "HostPool", "HostState", "HostStep", "box_bounds"]
