"""Several devices: the seeds of a run spread over every device JAX sees.

A run's TrainState is stacked over seeds (every leaf `[S, ...]`) and trained by
`jit(vmap(...))`. When JAX sees D > 1 devices (GPUs, or CPU devices made with
`XLA_FLAGS=--xla_force_host_platform_device_count=D`) and D divides the
number of seeds, the state is placed with its seed axis split over a one-axis
device mesh; the compiled chunk then runs each device's seeds where they live
(XLA's SPMD partitioner follows the input placement), with no change to the
config. Seeds are independent, so nothing crosses devices during training and
the figures are the same as on one device.

With one device, or a seed count that D does not divide, everything stays on
the default device (`seed_mesh` returns None) and `describe` says why.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


def seed_mesh(num_seeds: int, devices: list | None = None) -> Mesh | None:
    """A mesh over all devices with axis "seeds", or None when there is one device or
    the seeds do not split evenly over them."""
    devices = list(jax.devices() if devices is None else devices)
    if len(devices) < 2 or num_seeds % len(devices):
        return None
    return Mesh(np.asarray(devices), ("seeds",))


def shard_seeds(tree: Any, mesh: Mesh | None) -> Any:
    """Place every leaf `[S, ...]` of `tree` with its seed axis split over `mesh` (as is if None)."""
    if mesh is None:
        return tree
    return jax.device_put(tree, NamedSharding(mesh, PartitionSpec("seeds")))


def describe(num_seeds: int) -> str:
    """One line on where the seeds run."""
    devices = jax.devices()
    if len(devices) < 2:
        return f"{num_seeds} seed(s) on one {devices[0].platform} device"
    if num_seeds % len(devices):
        return (f"{num_seeds} seed(s) on one device: {len(devices)} devices are visible but do not divide "
                f"the seeds (use a multiple of {len(devices)} to spread them)")
    return f"{num_seeds} seeds over {len(devices)} {devices[0].platform} devices, {num_seeds // len(devices)} each"
