"""Feed-forward torsos and heads. Orthogonal initialisation as in the PPO
literature; parameters are always initialised outside any `vmap` (see
`coplay.nets.init.init_stacked`), so the QR decomposition behind the orthogonal
initialiser never becomes a batched LAPACK call."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu}


def dense(features: int, scale: float = float(np.sqrt(2))) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros)


class MLP(nn.Module):
    """x: [..., in] -> [..., hidden[-1]]"""

    hidden: Sequence[int] = (64, 64)
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        for h in self.hidden:
            x = act(dense(h)(x))
        return x


class ActorHead(nn.Module):
    """Logits, Q-values or means over actions. The default small initial scale
    makes a first policy near uniform."""

    num_actions: int
    scale: float = 0.01

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return dense(self.num_actions, self.scale)(x)


class ValueHead(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return jnp.squeeze(dense(1, 1.0)(x), -1)
