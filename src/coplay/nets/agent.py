"""The per-agent network both algorithm families use, and how to run it for
every agent at once (one shared network, or one network per agent).

A torso reads each agent's observation: `mlp` flattens it (an observation of any
shape, a vector or an image), `cnn` reads an image or grid `[H, W, C]` with a
small CNN (`CNN`). Which one a trainer builds is its config's `torso`
(`torso_param`), resolved against the environment's observation shape by
`choose_torso` (`auto`: the CNN for a 3-D observation, the MLP otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from coplay.core.config import param
from coplay.core.errors import ConfigError
from coplay.nets.gru import ResetGRU
from coplay.nets.mlp import ACTIVATIONS, MLP, ActorHead, ValueHead, dense

TORSOS = ("mlp", "cnn")                # what an AgentNet reads observations with
TORSO_CHOICES = ("auto", *TORSOS)      # what a config may say (`auto`: by the observation's shape)


def torso_param(default: str = "auto") -> Any:
    """The `torso` field of a config whose agents' networks are `AgentNet`s."""
    return param(default, "what reads each agent's observation: cnn (a small CNN over an image or grid "
                          "observation [H, W, C]), mlp (the observation flattened, of any shape), or auto (cnn "
                          "when the observation is [H, W, C], mlp otherwise)", choices=TORSO_CHOICES)


def choose_torso(setting: str, obs_shape: Sequence[int], where: str = "algo.torso") -> str:
    """The torso (`TORSOS`) that `setting` (`TORSO_CHOICES`) means for a per-agent
    observation of shape `obs_shape`; ConfigError for a CNN on an observation that
    is not an image `[H, W, C]`, or an unknown setting."""
    shape = tuple(int(d) for d in obs_shape)
    if setting == "auto":
        return "cnn" if len(shape) == 3 else "mlp"
    if setting not in TORSOS:
        raise ConfigError(f"{where}={setting!r} is not allowed; valid choices: {', '.join(TORSO_CHOICES)}")
    if setting == "cnn" and len(shape) != 3:
        raise ConfigError(f"{where}=cnn reads image or grid observations [H, W, C] per agent; this environment's "
                          f"observations have shape {shape}: use {where}=mlp (or auto)")
    return setting


def patches(x: jax.Array, k: int) -> jax.Array:
    """Every k x k neighbourhood of an image, zero-padded at the edges ('same'):
    [B, H, W, C] -> [B, H, W, k * k * C], ordered (row, column, channel). A dense layer on
    them is a convolution; built from k * k shifted slices, which XLA's CPU backend runs
    about ten times faster than its convolution inside a loop (a rollout's or an update's
    scan)."""
    top = k // 2
    padded = jnp.pad(x, ((0, 0), (top, k - 1 - top), (top, k - 1 - top), (0, 0)))
    h, w = x.shape[1], x.shape[2]
    return jnp.concatenate([padded[:, i:i + h, j:j + w, :] for i in range(k) for j in range(k)], axis=-1)


class CNN(nn.Module):
    """A small CNN over an image or grid, as JaxMARL's Overcooked PPO has: 5x5, 3x3 and
    3x3 convolutions of `channels` (same padding, stride 1; each a dense layer over the
    `patches`), flattened, then a dense layer of `features`; orthogonal initialisation at
    `mlp.dense`'s scale, sqrt(2).

    x: [B, H, W, C] -> [B, features]"""

    features: int
    activation: str = "relu"
    channels: int = 32
    kernels: Sequence[int] = (5, 3, 3)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        for k in self.kernels:
            x = act(dense(self.channels)(patches(x, k)))
        x = x.reshape(x.shape[0], -1)
        return act(dense(self.features)(x))


class AgentNet(nn.Module):
    """A torso, feed-forward layers or a GRU after the first layer, then a head:
    `out` outputs (logits, Q-values or means) from a dense layer initialised at
    `head_scale`, or one value when `out=0`.

    torso `mlp`: the observation is flattened first (`[B, ...]` -> `[B, D]`, so an
    image goes through the MLP as one vector); `cnn`: an image `[B, H, W, C]` goes
    through `CNN` (to `hidden_size` features) before the layers above.

    carry: [B, H] (H = 0 when feed-forward); x: [B, ...]; reset: [B] -> (carry, [B, out] or [B])."""

    out: int
    hidden_size: int
    num_layers: int
    activation: str
    recurrent: bool
    head_scale: float = 0.01
    torso: str = "mlp"

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array, reset: jax.Array):
        if self.torso == "cnn":
            if x.ndim != 4:
                raise ValueError(f"AgentNet(torso='cnn') reads images [B, H, W, C], got shape {x.shape}")
            x = CNN(self.hidden_size, self.activation)(x.astype(jnp.float32))
        elif self.torso == "mlp":
            x = x.reshape(x.shape[0], -1)
        else:
            raise ValueError(f"AgentNet torso={self.torso!r}: one of {', '.join(TORSOS)}")
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
