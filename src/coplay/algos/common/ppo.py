"""The PPO family's shared machinery: its config, the clipped objective
(Schulman et al., 2017) weighted so that inactive agents contribute nothing,
the learning-rate schedule, and the minibatch epochs that apply it.

    loss, stats = objective(dist, logits, values, minibatch, config, policy_weight, value_weight)
    params, opt_state, stats = train_epochs(key, loss_fn, optimizer, params, opt_state, batch,
                                            config.epochs, split)

The objective, to minimise, for ratio r = pi(a|o) / pi_old(a|o) and advantage A:

    L = -mean_w[min(r A, clip(r, 1 - eps, 1 + eps) A)]
        + vf_coef * 0.5 * mean_v[(V - target)^2]          (optionally clipped around V_old)
        - ent_coef * mean_w[H(pi(.|o))]

where mean_w and mean_v are means weighted by `policy_weight` and `value_weight`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import optax

from coplay.algos.base import Health, RolloutConfig
from coplay.algos.common.minibatch import shuffle_split
from coplay.core.config import param
from coplay.core.spaces import num_actions
from coplay.core.types import EnvSpec
from coplay.nets import ACTIVATIONS
from coplay.nets.agent import torso_param


@dataclass(frozen=True)
class PPOConfig(RolloutConfig):
    """The fields every PPO trainer has; algorithms subclass it (and may change defaults)."""

    lr: float = param(7e-4, "Adam learning rate", min=0.0, min_exclusive=True)
    anneal_lr: bool = param(True, "decay the learning rate linearly to 0 over the run")
    epochs: int = param(4, "passes over each batch", min=1)
    minibatches: int = param(2, "minibatches per epoch", min=1)
    gamma: float = param(0.95, "discount", min=0.0, max=1.0)
    gae_lambda: float = param(0.95, "GAE lambda", min=0.0, max=1.0)
    clip_eps: float = param(0.2, "PPO ratio clip", min=0.0, min_exclusive=True)
    clip_value: bool = param(False, "clip the value update around the rollout's values")
    vf_coef: float = param(0.5, "value loss weight", min=0.0)
    ent_coef: float = param(0.01, "entropy bonus weight", min=0.0)
    max_grad_norm: float = param(0.5, "global gradient-norm clip", min=0.0, min_exclusive=True)
    normalize_advantages: bool = param(True, "normalise advantages per minibatch")
    hidden_size: int = param(64, "units per hidden layer", min=1)
    num_layers: int = param(2, "hidden layers (feed-forward); layers around the GRU (recurrent)", min=1)
    activation: str = param("tanh", "hidden activation", choices=tuple(ACTIVATIONS))
    torso: str = torso_param()
    greedy_eval: bool = param(False, "evaluate with the most likely action instead of sampling")


# How far beyond the clip range an update's approximate KL may go before a run is
# reported as diverging: a clipped update keeps the KL near eps**2 / 2, well below eps.
KL_BEYOND_CLIP = 5.0


def health(config: PPOConfig, spec: EnvSpec) -> Health:
    """What a healthy PPO run keeps to: every update's approximate KL below
    `KL_BEYOND_CLIP` x the clip range, a discrete policy's entropy between 0 and
    log(number of actions), and a value loss that does not grow 10,000-fold."""
    ranges = {"loss/approx_kl": (-1e-3, KL_BEYOND_CLIP * config.clip_eps,
                                 f"far beyond the clip range algo.clip_eps={config.clip_eps}")}
    if spec.discrete_actions:
        most = math.log(num_actions(spec.action_space))
        ranges["loss/entropy"] = (-1e-3, most * (1 + 1e-3) + 1e-3,
                                  f"a policy over {num_actions(spec.action_space)} actions has an entropy between 0 "
                                  f"and log({num_actions(spec.action_space)}) = {most:.3g}")
    return Health(ranges=ranges, steady=("loss/value",))


class OptimiserConfig(Protocol):
    """The fields the optimiser reads: PPOConfig's, and any family's with the same names."""

    @property
    def lr(self) -> float: ...
    @property
    def anneal_lr(self) -> bool: ...
    @property
    def epochs(self) -> int: ...
    @property
    def minibatches(self) -> int: ...
    @property
    def max_grad_norm(self) -> float: ...


def learning_rate(config: OptimiserConfig, num_updates: int) -> float | optax.Schedule:
    """The configured rate, or a linear decay to 0 over every minibatch step of the run."""
    if not config.anneal_lr:
        return config.lr
    return optax.linear_schedule(config.lr, 0.0, max(num_updates * config.epochs * config.minibatches, 1))


def adam(config: OptimiserConfig, num_updates: int) -> optax.GradientTransformation:
    """Adam (eps 1e-5, as in the reference PPO implementations) after a global-norm clip."""
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.adam(learning_rate(config, num_updates), eps=1e-5))


def masked_mean(x: jax.Array, weight: jax.Array) -> jax.Array:
    weight = weight.astype(x.dtype)
    return jnp.sum(x * weight) / jnp.maximum(jnp.sum(weight), 1.0)


def normalize(x: jax.Array, weight: jax.Array) -> jax.Array:
    mean = masked_mean(x, weight)
    var = masked_mean(jnp.square(x - mean), weight)
    return (x - mean) / (jnp.sqrt(var) + 1e-8)


def clip_terms(logp: jax.Array, old_logp: jax.Array, adv: jax.Array,
               clip: float) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Elementwise PPO-clip: `(loss to minimise, ratio, log ratio)`, for losses that
    aggregate the terms their own way (per token, per sequence)."""
    log_ratio = logp - old_logp
    ratio = jnp.exp(log_ratio)
    return -jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - clip, 1.0 + clip) * adv), ratio, log_ratio


def clipped_surrogate(logp: jax.Array, old_logp: jax.Array, adv: jax.Array, clip: float,
                      weight: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PPO-clip policy loss (to minimise) and diagnostics."""
    loss, ratio, log_ratio = clip_terms(logp, old_logp, adv, clip)
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


def objective(dist: Any, logits: jax.Array, values: jax.Array, mb: dict[str, jax.Array], config: PPOConfig,
              policy_weight: jax.Array, value_weight: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The PPO loss of one minibatch. `logits` are already masked (`dist.prepare`);
    `mb` holds the rollout's `action`, `logp`, `value`, `adv` and `target`."""
    c = config
    logp = dist.log_prob(logits, mb["action"])
    adv = normalize(mb["adv"], policy_weight) if c.normalize_advantages else mb["adv"]
    pg_loss, stats = clipped_surrogate(logp, mb["logp"], adv, c.clip_eps, policy_weight)
    v_loss = clipped_value_loss(values, mb["value"], mb["target"], c.clip_eps if c.clip_value else None,
                                value_weight)
    ent = masked_mean(dist.entropy(logits), policy_weight)
    total = pg_loss + c.vf_coef * v_loss - c.ent_coef * ent
    return total, {"loss/policy": pg_loss, "loss/value": v_loss, "loss/entropy": ent,
                   "loss/approx_kl": stats["approx_kl"], "loss/clip_frac": stats["clip_frac"]}


LossFn = Callable[[Any, Any], tuple[jax.Array, dict[str, jax.Array]]]
SplitFn = Callable[[jax.Array, Any], Any]


def shuffled(minibatches: int) -> SplitFn:
    """The usual split: samples on the leading axis, shuffled into `minibatches` parts."""
    return lambda key, batch: shuffle_split(key, batch, minibatches)


def train_epochs(key: jax.Array, loss_fn: LossFn, optimizer: optax.GradientTransformation, params: Any,
                 opt_state: Any, batch: Any, epochs: int, split: SplitFn) -> tuple[Any, Any, dict[str, jax.Array]]:
    """`epochs` passes over `batch`, each split by `split(key, batch)` into minibatches
    (leading axis) and one gradient step per minibatch. Returns the new parameters,
    optimiser state, and each statistic of `loss_fn` (plus `grad_norm`) averaged
    over every step."""

    def epoch(carry, k):
        def minibatch(carry, mb):
            params, opt_state = carry
            grads, stats = jax.grad(loss_fn, has_aux=True)(params, mb)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            stats["grad_norm"] = optax.tree.norm(grads)
            return (optax.apply_updates(params, updates), opt_state), stats

        return jax.lax.scan(minibatch, carry, split(k, batch))

    (params, opt_state), stats = jax.lax.scan(epoch, (params, opt_state), jax.random.split(key, epochs))
    return params, opt_state, {k: v.mean() for k, v in stats.items()}
