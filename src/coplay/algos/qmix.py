"""QMIX: monotonic value factorisation (Rashid et al., 2018).

Q_tot(s, a) = f(Q_1(o_1, a_1), ..., Q_N(o_N, a_N); s), where the mixing network
f has non-negative weights produced by hypernetworks that read the global state
s (`coplay.nets.mixers.MonotonicMixer`). Monotonicity keeps decentralised
greedy action selection consistent with the joint greedy action, while the
state-conditioned mixing can represent more than VDN's sum (the two-step game,
`env=two_step`, is the classic case). Learned from the team reward; inactive
agents enter the mixer as zeros. A separate target mixer bootstraps the target.
Everything else is the Q family's trainer (`coplay.algos.iql`)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos import iql
from coplay.core.config import param
from coplay.core.env import Env
from coplay.nets.mixers import MonotonicMixer


@dataclass(frozen=True)
class Config(iql.MixingConfig):
    mixer_embed: int = param(32, "width of the mixing network's hidden layer", min=1)
    hypernet_hidden: int = param(64, "hidden units of the hypernetworks that produce the mixing weights", min=1)
    mixer_init_scale: float = param(0.01, "initial scale (variance) of the hypernetworks' output layers: small "
                                          "starts Q_tot near the state value", min=0.0, min_exclusive=True)


class Trainer(iql.Trainer):
    name = "qmix"
    mixes = True
    uses_state = True

    def __init__(self, config: Config, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        self.mixer = MonotonicMixer(config.mixer_embed, config.hypernet_hidden, config.mixer_init_scale)

    def init_mixer(self, key: jax.Array, global_state: jax.Array) -> dict:
        state = global_state.reshape(global_state.shape[0], -1)
        return self.mixer.init(key, jnp.zeros((state.shape[0], self.num_agents)), state)

    def mix(self, mixer_params, q: jax.Array, state: jax.Array | None) -> jax.Array:
        t, b = q.shape[:2]
        out = self.mixer.apply(mixer_params, q.reshape(t * b, -1), state.reshape(t * b, -1))
        return out.reshape(t, b)


steps_per_update = iql.steps_per_update


def make_trainer(config: Config, env: Env, num_updates: int) -> Trainer:
    return Trainer(config, env, num_updates)
