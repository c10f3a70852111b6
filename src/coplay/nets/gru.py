"""A GRU over time with resets at episode boundaries."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class ResetGRU(nn.Module):
    """One step of a GRU whose carry restarts from zeros where `reset` is true.

    carry: [B, H], x: [B, D], reset: [B] bool -> (carry [B, H], out [B, H])
    """

    features: int

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array, reset: jax.Array) -> tuple[jax.Array, jax.Array]:
        carry = jnp.where(reset[..., None], jnp.zeros_like(carry), carry)
        carry, out = nn.GRUCell(self.features)(carry, x)
        return carry, out

    @staticmethod
    def initial_carry(batch_shape: tuple[int, ...], features: int) -> jax.Array:
        return jnp.zeros((*batch_shape, features), jnp.float32)
