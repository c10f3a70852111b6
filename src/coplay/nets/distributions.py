"""Action distributions: categorical over legal actions only, and diagonal
Gaussian for continuous actions. Each has the same methods (prepare, sample,
log_prob, entropy, mode), so a policy-gradient trainer is written once for both."""

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


class Categorical:
    """Discrete actions: the network's outputs are logits [..., A]; illegal ones are masked."""

    def outputs(self, num_actions: int) -> int:
        return num_actions

    def prepare(self, out: jax.Array, mask: jax.Array) -> jax.Array:
        return masked_logits(out, mask)

    sample = staticmethod(sample)
    log_prob = staticmethod(log_prob)
    entropy = staticmethod(entropy)

    @staticmethod
    def mode(logits: jax.Array) -> jax.Array:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)


class DiagGaussian:
    """Continuous actions: the network's outputs are [..., 2d], the mean and the
    log standard deviation of independent normals (the environment clips
    samples to its bounds). There is no action mask."""

    def __init__(self, dim: int):
        self.dim = dim

    def outputs(self, num_actions: int) -> int:
        return 2 * self.dim

    def prepare(self, out: jax.Array, mask: jax.Array) -> jax.Array:
        return out

    def _split(self, out: jax.Array) -> tuple[jax.Array, jax.Array]:
        return out[..., :self.dim], jnp.clip(out[..., self.dim:], -5.0, 2.0)

    def sample(self, key: jax.Array, out: jax.Array) -> jax.Array:
        mean, log_std = self._split(out)
        return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)

    def log_prob(self, out: jax.Array, actions: jax.Array) -> jax.Array:
        mean, log_std = self._split(out)
        z = (actions - mean) * jnp.exp(-log_std)
        return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * jnp.log(2 * jnp.pi), axis=-1)

    def entropy(self, out: jax.Array) -> jax.Array:
        _, log_std = self._split(out)
        return jnp.sum(log_std + 0.5 * jnp.log(2 * jnp.pi * jnp.e), axis=-1)

    def mode(self, out: jax.Array) -> jax.Array:
        return self._split(out)[0]
