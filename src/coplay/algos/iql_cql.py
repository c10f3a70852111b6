"""IQL+CQL: independent Q-learning from a dataset with a conservative penalty.

Each agent learns its own Q(o_i, a_i) by the TD loss of online IQL
(`coplay.algos.iql`) on the dataset's transitions, plus CQL's penalty (Kumar et
al., 2020) on its own actions, so values of actions the data never shows are
pushed below the data's:

    L = L_TD + alpha * mean_{t, i active} [ log sum_{a legal} exp Q_i(o_t^i, a) - Q_i(o_t^i, a_t^i) ]

(`coplay.algos.common.conservative.cql_penalty`). With alpha = 0 it is plain
offline IQL. This is OG-MARL's IQL+CQL baseline, which "Dispelling the Mirage
of Progress in Offline MARL" (Formanek et al., 2024) found as strong as most
published methods.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos.common import conservative
from coplay.algos.common import q_learning as ql
from coplay.algos.common.offline import OfflineQConfig, alpha_param
from coplay.algos.common.q_trainer import QLoop


@dataclass(frozen=True)
class Config(OfflineQConfig):
    reward: str = ql.reward_param()
    cql_alpha: float = alpha_param()


class IQLCQL(QLoop):
    name = "iql_cql"
    config_class = Config
    config: Config
    loss_name = "loss"         # the TD loss and the penalty together (each also logged alone)

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        q, td, target, w = self.independent_parts(params, target_params, w)              # q: [T, B, N, A]
        t = q.shape[0]
        penalty = ql.masked_mean(conservative.cql_penalty(q, w["action"][:t], w["action_mask"][:t]), w["active"][:t])
        return td + self.config.cql_alpha * penalty, {"loss/td": td, "loss/cql": penalty,
                                                      "q_taken": jnp.mean(ql.chosen(q, w["action"][:t])),
                                                      "q_target": jnp.mean(target)}
