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


# Rows of up to this many actions are summed one action after another, unrolled;
# longer rows by a parallel prefix sum.
_IN_ORDER = 32


def prefix_sum(x: jax.Array) -> jax.Array:
    """Inclusive cumulative sum along the last axis: [..., A] -> [..., A].

    A parallel prefix sum (`lax.associative_scan`): `jnp.cumsum` compiles on CPU to a
    windowed sum whose work grows with A squared, which costs more than sampling
    itself at a few actions and dominates it at hundreds."""
    return jax.lax.associative_scan(jnp.add, x, axis=-1)


def _running_sum(x: jax.Array) -> jax.Array:
    """Inclusive cumulative sum along the last axis, added strictly in order (unrolled,
    one add per entry): non-decreasing for x >= 0, and unchanged across a zero."""
    sums = [x[..., 0]]
    for i in range(1, x.shape[-1]):
        sums.append(sums[-1] + x[..., i])
    return jnp.stack(sums, axis=-1)


def sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    """One action per row of `logits` [..., A], drawn with probability softmax(logits):
    [...] int32.

    Inverse CDF with one uniform number u per row: with p = exp(logits - max) and
    cumulative sums c, the action is the first index i with c_i > u * c_{A-1}. That
    is exact up to float32 rounding of the sums, and it draws one number per row
    where the Gumbel-max trick (`jax.random.categorical`) draws A, which costs more
    than everything else a small policy does when acting. Only actions with p > 0 are
    ever returned: masked logits (-1e9, see `masked_logits`) are never chosen while
    some logit of the row is larger than -1e9 + 100, and rounding that puts u * c_{A-1}
    at or past the total yields the last such action, never an index after it. A row
    whose logits are all -inf has no distribution and gives 0.
    """
    logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
    top = jnp.max(logits, axis=-1, keepdims=True)
    p = jnp.exp(logits - jnp.where(jnp.isfinite(top), top, 0.0))
    u = jax.random.uniform(key, (*logits.shape[:-1], 1), p.dtype)
    index = jnp.arange(logits.shape[-1], dtype=jnp.int32)
    last = jnp.max(jnp.where(p > 0, index, 0), axis=-1)  # the last action with p > 0
    if logits.shape[-1] <= _IN_ORDER:
        # Sums in order never decrease and repeat exactly across a zero, so the number of
        # sums at or below the target is the first index past it, and has p > 0; it is A
        # only where rounding put the target at the total.
        cdf = _running_sum(p)
        passed = jnp.sum(cdf <= u * cdf[..., -1:], axis=-1, dtype=jnp.int32)
        return jnp.minimum(passed, last)
    # A parallel prefix sum adds in another order for each index, so its sums may differ
    # across a zero: the first index past the target is searched among p > 0 only.
    cdf = prefix_sum(p)
    hit = (cdf > u * cdf[..., -1:]) & (p > 0)
    return jnp.where(jnp.any(hit, axis=-1), jnp.argmax(hit, axis=-1), last).astype(jnp.int32)


def log_prob(logits: jax.Array, actions: jax.Array) -> jax.Array:
    logp = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(logp, actions[..., None], axis=-1)[..., 0]


def entropy(logits: jax.Array) -> jax.Array:
    logp = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


def kl(old_logits: jax.Array, new_logits: jax.Array) -> jax.Array:
    """KL(old || new) of two categoricals over the same (masked) actions: actions the old
    policy never takes contribute nothing (no 0 * inf)."""
    old_logp, new_logp = jax.nn.log_softmax(old_logits), jax.nn.log_softmax(new_logits)
    p = jnp.exp(old_logp)
    return jnp.sum(jnp.where(p > 0, p * (old_logp - new_logp), 0.0), axis=-1)


class Categorical:
    """Discrete actions: the network's outputs are logits [..., A]; illegal ones are masked."""

    def outputs(self, num_actions: int) -> int:
        return num_actions

    def prepare(self, out: jax.Array, mask: jax.Array) -> jax.Array:
        return masked_logits(out, mask)

    sample = staticmethod(sample)
    log_prob = staticmethod(log_prob)
    entropy = staticmethod(entropy)
    kl = staticmethod(kl)

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

    def kl(self, old: jax.Array, new: jax.Array) -> jax.Array:
        """KL(old || new) of two diagonal normals."""
        m0, s0 = self._split(old)
        m1, s1 = self._split(new)
        return jnp.sum(s1 - s0 + (jnp.exp(2 * s0) + jnp.square(m0 - m1)) / (2 * jnp.exp(2 * s1)) - 0.5, axis=-1)

    def mode(self, out: jax.Array) -> jax.Array:
        return self._split(out)[0]
