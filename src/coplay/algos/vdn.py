"""VDN: value-decomposition networks (Sunehag et al., 2018).

The team's value is the sum of the agents' values, Q_tot = sum_i Q_i(o_i, a_i),
learned end to end from the team reward. Each agent still acts greedily on its
own Q_i, and because the sum is monotonic in every Q_i, those greedy choices
together maximise Q_tot. Inactive agents (the `active` mask) add nothing.
Everything else is the Q family's trainer (`coplay.algos.iql`)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos import iql
from coplay.core.env import Env


@dataclass(frozen=True)
class Config(iql.MixingConfig):
    pass


class Trainer(iql.Trainer):
    name = "vdn"
    mixes = True

    def mix(self, mixer_params, q: jax.Array, state: jax.Array | None) -> jax.Array:
        return jnp.sum(q, axis=-1)


steps_per_update = iql.steps_per_update


def make_trainer(config: Config, env: Env, num_updates: int) -> Trainer:
    return Trainer(config, env, num_updates)
