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


def init_stacked(init_fn: Callable[[jax.Array], Any], keys: jax.Array) -> Any:
    """keys: [M, 2] -> pytree with a leading axis of size M."""
    init_fn = jax.jit(init_fn)
    copies = [init_fn(keys[i]) for i in range(keys.shape[0])]
    return jax.tree.map(lambda *xs: jnp.stack(xs), *copies)
