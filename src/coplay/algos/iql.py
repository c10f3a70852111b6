"""IQL: independent Q-learning (Tan, 1993), with deep Q-networks (Tampuu et al., 2017).

Every agent learns Q(o_i, a_i) from its own observations and its own reward
(or the team's, `reward=team`, the common-reward setting of PyMARL/EPyMARL),
treating the other agents as part of the environment: one TD problem per agent,

    L = mean_{t, i active} (Q_i(o_t, a_t) - y_t^i)^2,
    y_t^i = sum_{k<n} gamma^k r_{t+k}^i + gamma^n max_a' Q_i^target(o_{t+n}, a')   (no episode end before)

with the double-Q choice of a' by the online network by default. Acting,
replay, target networks and n-step windows are the Q family's
(`coplay.algos.common.q_trainer`).

Time limits are treated like terminations (no bootstrap through them), as in
PyMARL and JaxMARL.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos.common import q_learning as ql
from coplay.algos.common.q_trainer import QLoop


@dataclass(frozen=True)
class Config(ql.QConfig):
    reward: str = ql.reward_param()


class IQL(QLoop):
    name = "iql"
    config_class = Config
    config: Config

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        c = self.config
        q_taken, next_value, w = self.td_inputs(params, target_params, w)          # [T, B, N]
        loss, target = ql.independent_td_loss(q_taken, next_value, w, c.gamma, c.n_step, c.loss, c.reward)
        return loss, {"q_taken": jnp.mean(q_taken), "q_target": jnp.mean(target)}
