"""Parameter initialisation for several agents or seeds.

`vmap` over `module.init` turns the orthogonal initialiser's QR decomposition
into one batched LAPACK call, which on small CPU machines can deadlock XLA's
thread pool. Here each copy is initialised by itself (the same compiled
function, called once per key) and the results are stacked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.compile import jit_once


def init_stacked(init_fn: Callable[[jax.Array], Any], keys: jax.Array, top_level: bool = False) -> Any:
    """keys: [M, 2] -> pytree with a leading axis of size M. `top_level`: called
    outside any trace (a run's initial state), so `init_fn` is compiled without
    machine-code optimisation: it runs once per key (`coplay.core.compile`)."""
    init_fn = jit_once(init_fn) if top_level else jax.jit(init_fn)   # else nested in a trace: no options
    copies = [init_fn(keys[i]) for i in range(keys.shape[0])]
    if top_level:   # stacked on the host and put on the device: an eager `jnp.stack`, or `jnp.asarray`
        # of a host array, compiles a small program per leaf shape
        return jax.tree.map(lambda *xs: jax.device_put(np.stack([np.asarray(x) for x in xs])), *copies)
    return jax.tree.map(lambda *xs: jnp.stack(xs), *copies)
