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

**Where the copies live.** By default in this process, stepped one after
another inside the callback. With `workers=W` they are spread over W worker
processes (`worker_backend="process"`, spawned) or W Ray actors
(`worker_backend="ray"`, which a Ray cluster can place on other machines),
copy `slot` on worker `slot % W`; each step sends every worker its copies'
actions at once and gathers the results, so slow environments step in
parallel. The handles' bookkeeping stays here, and the episodes are the same
as with `workers=0`. A worker that dies raises `HostEnvError` at the next step
(its copies are lost). As with any spawned process, a script that uses
process workers needs the `if __name__ == "__main__":` guard.

**Errors.** Whatever goes wrong on the host raises `HostEnvError` naming the
environment: a broken API (see `coplay.interop.layout`), a misused handle, or
an exception of the foreign environment's own (chained as the cause). Raised
inside a compiled function, it would reach the caller as XLA's
`INTERNAL: CpuCallback error`; `coplay.core.errors.callback_errors` (used by
`coplay.train` and the CLI) raises it again with its own type and message.
"""

from __future__ import annotations

import abc
import itertools
import secrets
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import CoplayError, HostEnvError, raised_in_callback
from coplay.core.types import EnvSpec, TimeStep


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


def copy_seed(key_data: np.ndarray) -> int:
    """The integer seed a copy is reset with, from the raw data of a JAX key."""
    k = np.asarray(key_data, np.uint64).reshape(-1)
    return int(k[0]) << 32 | int(k[-1])


def foreign_error(name: str, error: Exception) -> HostEnvError:
    """The `HostEnvError` for an exception raised by foreign environment `name`'s own code."""
    return HostEnvError(f"{name}: the environment raised {type(error).__name__}: {error}")


@dataclass
class Command:
    """What one copy does in a batched call: `start` a new episode (creating the
    copy if `slot` is new), or `step` it; a step that ends the episode (by the
    environment, or at `at_limit`, the step limit) starts the next one with `seed`."""

    slot: int
    seed: int
    action: np.ndarray | None = None  # None: start
    at_limit: bool = False


def run_commands(copies: dict[int, HostCopy], make_copy: Callable[[], HostCopy], commands: list[Command]
                 ) -> list[HostStep]:
    """Carry out `commands` on `copies` (slot -> copy), in order; shared by every store."""
    out = []
    for c in commands:
        if c.slot not in copies:
            copies[c.slot] = make_copy()
        copy_ = copies[c.slot]
        if c.action is None:
            out.append(copy_.reset(c.seed))
            continue
        ts = copy_.step(c.action)
        if not ts.done and c.at_limit:
            ts.done = ts.truncated = True
        if ts.done:  # the next episode starts now; the finished step's reward and flags are kept
            first = copy_.reset(c.seed)
            ts = HostStep(obs=first.obs, reward=ts.reward, done=True, truncated=ts.truncated,
                          active=first.active, action_mask=first.action_mask, global_state=first.global_state)
        out.append(ts)
    return out


class LocalStore:
    """Copies in this process, stepped one after another."""

    def __init__(self, make_copy: Callable[[], HostCopy]):
        self.make_copy = make_copy
        self.copies: dict[int, HostCopy] = {}

    def run(self, commands: list[Command]) -> list[HostStep]:
        return run_commands(self.copies, self.make_copy, commands)

    def close(self) -> None:
        for c in self.copies.values():
            c.close()
        self.copies.clear()


class _ShardedStore(abc.ABC):
    """Copies spread over `workers` workers, copy `slot` on worker `slot % workers`;
    each batched call sends every worker its commands at once, then gathers."""

    def __init__(self, workers: int):
        self.workers = workers

    @abc.abstractmethod
    def _send(self, w: int, commands: list[Command]) -> None:
        """Start worker `w` on `commands`, without waiting."""

    @abc.abstractmethod
    def _receive(self, w: int) -> list[HostStep]:
        """Worker `w`'s steps for the commands last sent to it, in order."""

    def run(self, commands: list[Command]) -> list[HostStep]:
        groups: list[list[int]] = [[] for _ in range(self.workers)]
        for i, c in enumerate(commands):
            groups[c.slot % self.workers].append(i)
        busy = [w for w, g in enumerate(groups) if g]
        for w in busy:
            self._send(w, [commands[i] for i in groups[w]])
        out: list[HostStep | None] = [None] * len(commands)
        error: Exception | None = None
        for w in busy:  # every worker is stepping its copies while we wait for the first
            try:
                for i, ts in zip(groups[w], self._receive(w)):
                    out[i] = ts
            except Exception as e:  # noqa: BLE001 - read every reply first, so none is left for the next call
                error = error or e
        if error is not None:
            raise error
        return out  # type: ignore[return-value]


def _process_worker(conn, make_copy_bytes: bytes) -> None:
    import cloudpickle

    make_copy = cloudpickle.loads(make_copy_bytes)
    copies: dict[int, HostCopy] = {}
    while True:
        try:
            commands = conn.recv()
        except (EOFError, KeyboardInterrupt):  # the main process is gone or stopping
            break
        if commands is None:
            break
        try:
            conn.send(("ok", run_commands(copies, make_copy, commands)))
        except Exception as e:  # noqa: BLE001 - the error travels to the main process
            conn.send(("error", e))
    for c in copies.values():
        c.close()


class ProcessStore(_ShardedStore):
    """Copies in `workers` worker processes (spawned, so they start clean of JAX's threads)."""

    def __init__(self, make_copy: Callable[[], HostCopy], workers: int):
        import multiprocessing as mp

        import cloudpickle  # gymnasium's own dependency: it ships the factory to the workers

        super().__init__(workers)
        ctx = mp.get_context("spawn")
        payload = cloudpickle.dumps(make_copy)
        self.conns, self.procs = [], []
        for _ in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_process_worker, args=(child, payload), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)
        # Workers stop with the store, or at exit for a store nobody closed.
        self._finalizer = weakref.finalize(self, ProcessStore._stop, self.conns, self.procs)

    def _died(self, w: int) -> HostEnvError:
        self.procs[w].join(timeout=1)
        return HostEnvError(f"host worker process {self.procs[w].pid} died (exit code {self.procs[w].exitcode}); "
                            f"its environment copies are lost: build the environment again")

    def _send(self, w: int, commands: list[Command]) -> None:
        try:
            self.conns[w].send(commands)
        except (BrokenPipeError, OSError):
            raise self._died(w) from None

    def _receive(self, w: int) -> list[HostStep]:
        try:
            status, value = self.conns[w].recv()
        except (EOFError, OSError):
            raise self._died(w) from None
        if status == "error":
            raise value
        return value

    def close(self) -> None:
        self._finalizer()

    @staticmethod
    def _stop(conns: list, procs: list) -> None:
        for conn, proc in zip(conns, procs):
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


class RayStore(_ShardedStore):
    """Copies in `workers` Ray actors, which a Ray cluster may place on other machines
    (`pip install coplay[ray]`; uses the running Ray instance, or starts a local one)."""

    def __init__(self, make_copy: Callable[[], HostCopy], workers: int):
        from coplay.interop.extras import require

        ray = require("ray", "ray", "host workers on Ray")
        super().__init__(workers)
        if not ray.is_initialized():
            ray.init(include_dashboard=False, log_to_driver=False)
        actor = ray.remote(num_cpus=0)(_RayWorker)
        self.ray = ray
        self.actors = [actor.remote(make_copy) for _ in range(workers)]
        self.pending: dict[int, Any] = {}

    def _send(self, w: int, commands: list[Command]) -> None:
        self.pending[w] = self.actors[w].run.remote(commands)

    def _receive(self, w: int) -> list[HostStep]:
        try:
            return self.ray.get(self.pending.pop(w))
        except self.ray.exceptions.RayTaskError as e:
            raise e.as_instanceof_cause() from None

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)
        self.actors = []


class _RayWorker:
    def __init__(self, make_copy: Callable[[], HostCopy]):
        self.store = LocalStore(make_copy)

    def run(self, commands: list[Command]) -> list[HostStep]:
        return self.store.run(commands)


BACKENDS = ("process", "ray")


def make_store(make_copy: Callable[[], HostCopy], workers: int, backend: str):
    """Where the copies live: this process (`workers=0`), or `workers` processes or Ray actors."""
    if workers < 0:
        raise HostEnvError(f"workers must be >= 0, got {workers}")
    if backend not in BACKENDS:
        raise HostEnvError(f"worker_backend={backend!r} is not one of {', '.join(BACKENDS)}")
    if workers == 0:
        return LocalStore(make_copy)
    return (ProcessStore if backend == "process" else RayStore)(make_copy, workers)


class HostPool:
    """The copies behind one host environment, and their handles' bookkeeping
    (which stays in this process, wherever the copies live)."""

    def __init__(self, make_copy: Callable[[], HostCopy], spec: EnvSpec, max_copies: int, workers: int = 0,
                 backend: str = "process"):
        self.spec = spec
        self.max_copies = max_copies
        self.id = secrets.randbits(31)
        self.store = make_store(make_copy, workers, backend)
        self.generation: list[int] = []
        self.steps: list[int] = []      # steps into the current episode
        self.last_use: list[int] = []
        self.tick = itertools.count()

    # -- handles ---------------------------------------------------------------
    def _allocate(self, now: int) -> int:
        if len(self.generation) < self.max_copies:
            self.generation.append(0)
            self.steps.append(0)
            self.last_use.append(now)
            return len(self.generation) - 1
        slot = int(np.argmin(self.last_use))
        if self.last_use[slot] == now:
            raise raised_in_callback(HostEnvError(
                f"{self.spec.name}: more than max_copies={self.max_copies} episodes run at once; "
                f"raise max_copies"))
        self.generation[slot] += 1  # its old handle is now stale
        self.last_use[slot] = now
        return slot

    def _start(self, slot: int, seed: int) -> Command:
        self.steps[slot] = 0
        return Command(slot, seed)

    # -- callbacks (leading batch dims B = slot.shape) -------------------------
    def _run(self, commands: list[Command]) -> list[HostStep]:
        """The store runs `commands`; an error of the foreign environment's own becomes a
        `HostEnvError` naming it, and every error is kept for `callback_errors`."""
        try:
            return self.store.run(commands)
        except CoplayError as e:
            raise raised_in_callback(e) from None
        except Exception as e:
            raise raised_in_callback(foreign_error(self.spec.name, e)) from e

    def reset_batch(self, key_data: np.ndarray):
        key_data = np.asarray(key_data)  # callbacks receive jax Arrays; indexing those is slow
        batch = key_data.shape[:-1]
        now = next(self.tick)
        commands = [self._start(self._allocate(now), copy_seed(k)) for k in key_data.reshape(-1, key_data.shape[-1])]
        return self._pack(batch, self._run(commands), commands)

    def step_batch(self, slot: np.ndarray, gen: np.ndarray, pool: np.ndarray, actions: np.ndarray,
                   key_data: np.ndarray):
        slot, gen, pool, actions, key_data = map(np.asarray, (slot, gen, pool, actions, key_data))
        batch = slot.shape
        now = next(self.tick)
        flat_actions = actions.reshape(-1, *actions.shape[len(batch):])
        commands, restarted = [], []
        for s, g, p, a, k in zip(slot.reshape(-1), gen.reshape(-1), pool.reshape(-1), flat_actions,
                                 key_data.reshape(-1, key_data.shape[-1])):
            s, g = int(s), int(g)
            if int(p) != self.id:  # a handle from another process (a resumed checkpoint)
                commands.append(self._start(self._allocate(now), copy_seed(k)))
                restarted.append(True)
                continue
            if s >= len(self.generation) or g != self.generation[s]:
                raise raised_in_callback(HostEnvError(
                    f"{self.spec.name}: a state of copy {s} was stepped twice, or after its copy was "
                    f"recycled (generation {g}, copy at {self.generation[s] if s < len(self.generation) else '-'});"
                    f" host-stepped environments cannot branch from an old state (raise max_copies if "
                    f"more than {self.max_copies} episodes run at once)"))
            self.generation[s] += 1
            self.last_use[s] = now
            self.steps[s] += 1
            commands.append(Command(s, copy_seed(k), np.asarray(a), self.steps[s] >= self.spec.max_steps))
            restarted.append(False)
        out = self._run(commands)
        for c, ts, fresh in zip(commands, out, restarted):
            if fresh:  # reported as a truncated end, so every later episode is a real one
                ts.reward = np.zeros(self.spec.reward_shape, np.float32)
                ts.done = ts.truncated = True
            elif ts.done:
                self.steps[c.slot] = 0
        return self._pack(batch, out, commands)

    def _pack(self, batch, steps: list[HostStep], commands: list[Command]):
        shapes = self.result_shapes()
        fields = []
        for name in _STEP_FIELDS:
            want = shapes[name]
            fields.append(np.stack([np.asarray(getattr(t, name), want.dtype) for t in steps])
                          .reshape(tuple(batch) + tuple(want.shape)))
        slots = np.asarray([c.slot for c in commands], np.int32).reshape(batch)
        gens = np.asarray([self.generation[c.slot] for c in commands], np.int32).reshape(batch)
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
        self.store.close()


class HostEnv(Env):
    """A coplay environment whose copies step on the host (see the module doc).

    `make_copy()` builds one `HostCopy`; `spec` describes it in coplay's terms."""

    auto_resets = True
    states_used_once = True

    def __init__(self, make_copy: Callable[[], HostCopy], spec: EnvSpec, max_copies: int = 4096,
                 workers: int = 0, worker_backend: str = "process"):
        if max_copies < 1:
            raise HostEnvError(f"max_copies must be >= 1, got {max_copies}")
        self.spec = spec
        self.pool = HostPool(make_copy, spec, max_copies, workers, worker_backend)

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


__all__ = ["BACKENDS", "HostCopy", "HostEnv", "HostEnvError", "HostPool", "HostState", "HostStep", "box_bounds",
           "copy_seed", "foreign_error", "make_store"]
