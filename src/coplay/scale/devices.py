"""Several devices: a run's seeds, and where they do not fill the devices its
parallel environments, spread over every device JAX sees.

A run's TrainState is stacked over seeds (every leaf `[S, ...]`) and trained by
`jit(vmap(...))`. When JAX sees D > 1 devices (GPUs, or CPU devices made with
`XLA_FLAGS=--xla_force_host_platform_device_count=D`), the state is placed on a
two-axis device mesh `("seeds", "envs")` of shape `(Ds, De)`:

- `Ds = gcd(S, D)` devices split the seeds. Seeds are independent, so nothing
  crosses devices for them and the figures are the same as on one device.
- The remaining `De = D / Ds` devices split each seed's E parallel environments
  (data parallelism inside a seed): the parts of the TrainState that its class
  declares per-environment (`coplay.algos.base.per_env`: environment states,
  time steps, carries, replay storage, per-game bookkeeping; `[S, E, ...]`) are
  split along that axis, while parameters and optimiser state are replicated
  over it. XLA's SPMD partitioner then runs each device's
  environments where they live and sums gradients across devices; the figures
  match one device's up to the order of floating-point sums. This needs De to
  divide E; where it does not, the environments stay whole (`describe` says so).

All of this follows from the input placement: the compiled chunk is the same
`jit(vmap(...))`, with no change to the config.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from coplay.algos.base import env_axis_mask


def mesh_shape(num_seeds: int, num_envs: int, num_devices: int) -> tuple[int, int] | None:
    """`(Ds, De)`: devices along seeds and along environments, or None for one device
    (or when the devices split neither the seeds nor the environments)."""
    if num_devices < 2:
        return None
    ds = math.gcd(num_seeds, num_devices)
    de = num_devices // ds
    if de == 1 or num_envs % de == 0:
        return ds, de
    return None


def run_mesh(num_seeds: int, num_envs: int, devices: list | None = None) -> Mesh | None:
    """The `("seeds", "envs")` mesh over all devices, or None when the run stays on one device."""
    devices = list(jax.devices() if devices is None else devices)
    shape = mesh_shape(num_seeds, num_envs, len(devices))
    if shape is None:
        return None
    return Mesh(np.asarray(devices).reshape(shape), ("seeds", "envs"))


def shard_state(state: Any, mesh: Mesh | None) -> Any:
    """Place a stacked TrainState on `mesh`: every leaf's seed axis over "seeds", and
    the environment axis of its per-environment parts (`[S, E, ...]`) over "envs"."""
    if mesh is None:
        return state
    by_seed = NamedSharding(mesh, PartitionSpec("seeds"))
    by_env = NamedSharding(mesh, PartitionSpec("seeds", "envs"))

    def place(per_env: bool, part: Any) -> Any:
        return jax.tree.map(lambda leaf: jax.device_put(leaf, by_env if per_env else by_seed), part)

    return jax.tree.map(place, env_axis_mask(state), state)


def state_placement(state: Any) -> Any:
    """Each leaf's sharding where `shard_state` spread the state over several devices;
    None for a state on one device, on the host (as a restored checkpoint is), or None."""
    def spread(leaf: Any) -> bool:
        sharding = getattr(leaf, "sharding", None)
        return sharding is not None and len(sharding.device_set) > 1

    if state is None or not any(spread(leaf) for leaf in jax.tree.leaves(state)):
        return None
    return jax.tree.map(lambda leaf: leaf.sharding, state)


def describe(num_seeds: int, num_envs: int) -> str:
    """One line on where the seeds and their environments run."""
    devices = jax.devices()
    kind = devices[0].platform
    shape = mesh_shape(num_seeds, num_envs, len(devices))
    if len(devices) < 2:
        return f"{num_seeds} seed(s) on one {kind} device"
    if shape is None:
        return (f"{num_seeds} seed(s) on one device: {len(devices)} devices are visible but divide neither "
                f"the seeds nor the {num_envs} environments per seed (use a multiple of {len(devices)} "
                f"seeds to spread them)")
    ds, de = shape
    if de == 1:
        return f"{num_seeds} seeds over {ds} {kind} devices, {num_seeds // ds} each"
    return (f"{num_seeds} seed(s) over {len(devices)} {kind} devices: seeds split {ds} way(s), each seed's "
            f"{num_envs} environments split {de} ways ({num_envs // de} per device)")
