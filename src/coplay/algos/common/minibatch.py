"""Shuffling a batch into minibatches inside the compiled update."""

from __future__ import annotations

from typing import Any

import jax


def shuffle_split(key: jax.Array, batch: Any, num_minibatches: int, axis: int = 0) -> Any:
    """Permute `batch` along `axis` (size B) and split it into
    `num_minibatches` parts: every leaf [..., B, ...] -> [M, ..., B/M, ...] with
    the minibatch index first."""
    size = jax.tree.leaves(batch)[0].shape[axis]
    perm = jax.random.permutation(key, size)

    def split(x):
        x = jax.numpy.take(x, perm, axis=axis)
        x = x.reshape(*x.shape[:axis], num_minibatches, size // num_minibatches, *x.shape[axis + 1:])
        return jax.numpy.moveaxis(x, axis, 0)

    return jax.tree.map(split, batch)
