"""How the agents' values make the team's: VDN's sum or QMIX's monotonic mixer
(`coplay.nets.mixers.MonotonicMixer`), as `mix(q [T, B, N], state [T, B, ...]) -> [T, B]`
(or q [T, B, J, N] -> [T, B, J] for J joint actions of each state, the state's
hypernetworks run once), for every trainer that learns a team value (online or
from a dataset)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import jax
import jax.numpy as jnp

from coplay.algos.common.q_learning import Mix
from coplay.core.config import param
from coplay.nets.mixers import MonotonicMixer

Mixer = Literal["qmix", "vdn"]
MIXERS: tuple[str, ...] = get_args(Mixer)


@dataclass(frozen=True)
class MixerConfig:
    """The monotonic mixer's fields (QMIX)."""

    mixer_embed: int = param(32, "width of the mixing network's hidden layer", min=1)
    hypernet_hidden: int = param(64, "hidden units of the hypernetworks that produce the mixing weights", min=1)
    mixer_init_scale: float = param(0.01, "initial scale (variance) of the layers that emit the "
                                          "mixing weights and the first bias: small starts Q_tot near the state "
                                          "value", min=0.0, min_exclusive=True)
    mixer_init: str = param("weights", "which of the mixer's layers start small: 'weights' (those that emit "
                                       "the mixing weights and the first bias, by variance scaling with "
                                       "mixer_init_scale; the others flax's default), 'weights_and_value' (also "
                                       "the state value's last layer, so Q_tot starts near 0) or 'orthogonal' "
                                       "(every layer orthogonal with gain mixer_init_scale and zero biases, as "
                                       "JaxMARL's QMIX)", choices=("weights", "weights_and_value", "orthogonal"))


def vdn_sum(q: jax.Array, state: jax.Array | None) -> jax.Array:
    """VDN: the team value is the sum of the agents'."""
    return jnp.sum(q, axis=-1)


class Mixing:
    """`kind` = "qmix" (a monotonic mixer reading the global state) or "vdn" (the sum)."""

    def __init__(self, kind: str, num_agents: int, config: MixerConfig):
        assert kind in MIXERS, kind
        self.kind, self.num_agents = kind, num_agents
        self.mixer = MonotonicMixer(config.mixer_embed, config.hypernet_hidden, config.mixer_init_scale,
                                    config.mixer_init)

    def init(self, key: jax.Array, global_state: jax.Array) -> Any:
        """The mixer's parameters (none for the sum); global_state: [1, ...]."""
        if self.kind == "vdn":
            return {}
        state = global_state.reshape(global_state.shape[0], -1)
        return self.mixer.init(key, jnp.zeros((state.shape[0], self.num_agents)), state)

    def mix(self, mixer_params: Any) -> Mix:
        if self.kind == "vdn":
            return vdn_sum

        def mix(q: jax.Array, state: jax.Array | None) -> jax.Array:
            assert state is not None, "the monotonic mixer reads the global state"
            t, b = q.shape[:2]
            out = self.mixer.apply(mixer_params, q.reshape(t * b, *q.shape[2:]), state.reshape(t * b, -1))
            return jnp.reshape(cast(jax.Array, out), q.shape[:-1])

        return mix
