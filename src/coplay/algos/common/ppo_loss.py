"""The PPO objective, weighted so that inactive agents contribute nothing."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def masked_mean(x: jax.Array, weight: jax.Array) -> jax.Array:
    weight = weight.astype(x.dtype)
    return jnp.sum(x * weight) / jnp.maximum(jnp.sum(weight), 1.0)


def normalize(x: jax.Array, weight: jax.Array) -> jax.Array:
    mean = masked_mean(x, weight)
    var = masked_mean(jnp.square(x - mean), weight)
    return (x - mean) / (jnp.sqrt(var) + 1e-8)


def clipped_surrogate(logp: jax.Array, old_logp: jax.Array, adv: jax.Array, clip: float,
                      weight: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PPO-clip policy loss (to minimise) and diagnostics."""
    log_ratio = logp - old_logp
    ratio = jnp.exp(log_ratio)
    loss = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - clip, 1.0 + clip) * adv)
    stats = {
        "approx_kl": masked_mean((ratio - 1.0) - log_ratio, weight),
        "clip_frac": masked_mean((jnp.abs(ratio - 1.0) > clip).astype(jnp.float32), weight),
    }
    return masked_mean(loss, weight), stats


def clipped_value_loss(value: jax.Array, old_value: jax.Array, target: jax.Array, clip: float | None,
                       weight: jax.Array) -> jax.Array:
    """Squared error, with the PPO value clip around the rollout's value when `clip` is set."""
    loss = jnp.square(value - target)
    if clip is not None:
        clipped = old_value + jnp.clip(value - old_value, -clip, clip)
        loss = jnp.maximum(loss, jnp.square(clipped - target))
    return 0.5 * masked_mean(loss, weight)
