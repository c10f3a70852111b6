"""VDN: value-decomposition networks (Sunehag et al., 2018).

The team's value is the sum of the agents' values, Q_tot = sum_i Q_i(o_i, a_i),
learned end to end from the team reward r (the mean of the agents' rewards):

    L = mean_t (Q_tot(o_t, a_t) - y_t)^2,
    y_t = sum_{k<n} gamma^k r_{t+k} + gamma^n sum_i Q_i^target(o_{t+n}^i, a'_i)

Each agent still acts greedily on its own Q_i, and because the sum is
monotonic in every Q_i, those greedy choices together maximise Q_tot.
Inactive agents add nothing. Acting, replay, target networks and n-step
windows are the Q family's (`coplay.algos.common.q_trainer`).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos.common import q_learning as ql
from coplay.algos.common.mixing import vdn_sum
from coplay.algos.common.q_trainer import QLoop


@dataclass(frozen=True)
class Config(ql.QConfig):
    pass


class VDN(QLoop):
    name = "vdn"
    config_class = Config
    config: Config

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        c = self.config
        q_taken, next_value, w = self.td_inputs(params, target_params, w)          # [T, B, N]
        loss, target = ql.team_td_loss(q_taken, next_value, w, vdn_sum, vdn_sum, c.gamma, c.n_step, c.loss)
        return loss, {"q_taken": jnp.mean(q_taken), "q_target": jnp.mean(target)}
