"""Categorical distribution over legal actions only."""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Large but finite, so masked logits never produce NaN in softmax or entropy.
_MASKED = -1e9


def masked_logits(logits: jax.Array, mask: jax.Array) -> jax.Array:
    """logits, mask: [..., A] -> logits with illegal actions at -1e9. A row whose
    mask is all false is left unmasked (no legal action means nothing to protect)."""
    any_legal = jnp.any(mask, axis=-1, keepdims=True)
    return jnp.where(mask | ~any_legal, logits, _MASKED)


def sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    return jax.random.categorical(key, logits).astype(jnp.int32)


def log_prob(logits: jax.Array, actions: jax.Array) -> jax.Array:
    logp = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(logp, actions[..., None], axis=-1)[..., 0]


def entropy(logits: jax.Array) -> jax.Array:
    logp = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(logp) * logp, axis=-1)
