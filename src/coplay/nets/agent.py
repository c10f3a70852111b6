"""The per-agent network both algorithm families use, and how to run it for
every agent at once (one shared network, or one network per agent)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from coplay.nets.gru import ResetGRU
from coplay.nets.mlp import ACTIVATIONS, MLP, ActorHead, ValueHead, dense


class AgentNet(nn.Module):
    """Feed-forward, or with a GRU after the first layer, then a head:
    `out` outputs (logits, Q-values or means) from a dense layer initialised at
    `head_scale`, or one value when `out=0`.

    carry: [B, H] (H = 0 when feed-forward); x: [B, D]; reset: [B] -> (carry, [B, out] or [B])."""

    out: int
    hidden_size: int
    num_layers: int
    activation: str
    recurrent: bool
    head_scale: float = 0.01

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array, reset: jax.Array):
        if self.recurrent:
            x = ACTIVATIONS[self.activation](dense(self.hidden_size)(x))
            carry, x = ResetGRU(self.hidden_size)(carry, x, reset)
            x = MLP((self.hidden_size,) * (self.num_layers - 1), self.activation)(x)
        else:
            x = MLP((self.hidden_size,) * self.num_layers, self.activation)(x)
        y = ActorHead(self.out, self.head_scale)(x) if self.out else ValueHead()(x)
        return carry, y


def apply_agents(net: nn.Module, params: Any, carry: jax.Array, x: jax.Array, reset: jax.Array, shared: bool):
    """Run `net` for every agent. x: [B, N, D]; carry: [B, N, H]; reset: [B].
    Shared parameters fold agents into the batch; separate ones (leading axis N) are vmapped."""
    b, n = x.shape[:2]
    reset = jnp.broadcast_to(reset[:, None], (b, n))
    if shared:
        fold = lambda a: a.reshape(b * n, *a.shape[2:])  # noqa: E731
        carry, y = net.apply(params, fold(carry), fold(x), fold(reset))
        unfold = lambda a: a.reshape(b, n, *a.shape[1:])  # noqa: E731
        return unfold(carry), unfold(y)
    return jax.vmap(net.apply, in_axes=(0, 1, 1, 1), out_axes=1)(params, carry, x, reset)
