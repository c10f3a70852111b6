"""QMIX+CQL (MACQL): a team value learned from a dataset, with CQL's penalty over joint actions.

The team value Q_tot = mix(Q_1(o_1, a_1), ..., Q_N(o_N, a_N); s) (QMIX's monotonic
mixer, or VDN's sum with `algo.mixer=vdn`) is learned by the TD loss of online
QMIX (`coplay.algos.qmix`) on the dataset's transitions, plus CQL's penalty
taken over the team's joint actions:

    L = L_TD + alpha * mean_t [ log sum_{a joint, legal} exp Q_tot(s_t, a) - Q_tot(s_t, a_t) ]

The sum has |A|^N terms: it is exact while there are at most `algo.ood_samples`
of them, and otherwise estimated from that many joint actions drawn uniformly
(`coplay.algos.common.conservative.joint_penalty`), as OG-MARL's QMIX+CQL and
CFCQL's `raw_cql` baseline do. As agents are added the sample covers an ever
smaller part of the joint space, which is the failure CFCQL (`algo=cfcql`)
was made to avoid.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos.base import Capabilities
from coplay.algos.common import conservative
from coplay.algos.common import q_learning as ql
from coplay.algos.common.offline import OfflineTeamConfig, alpha_param
from coplay.algos.common.q_trainer import QLoop
from coplay.core.config import param


@dataclass(frozen=True)
class Config(OfflineTeamConfig):
    cql_alpha: float = alpha_param()
    ood_samples: int = param(100, "joint actions the penalty's sum is estimated from (exact when the team has "
                                  "at most this many)", min=1)


class QMIXCQL(QLoop):
    name = "qmix_cql"
    config_class = Config
    config: Config
    capabilities = Capabilities(recurrent=True, needs_global_state=True)
    loss_name = "loss"         # the TD loss and the penalty together (each also logged alone)

    def mixer_kind(self) -> str | None:
        return self.config.mixer

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        c = self.config
        q, td, target, q_tot, mix, w = self.team_parts(params, target_params, w)
        t = q.shape[0]
        penalty = conservative.joint_penalty(w["key"][0], q, w["action"][:t], w["action_mask"][:t],
                                             w["active"][:t], mix, w["global_state"][:t], q_tot, c.ood_samples)
        penalty = ql.masked_mean(penalty, jnp.any(w["active"][:t], axis=-1))
        return td + c.cql_alpha * penalty, {"loss/td": td, "loss/cql": penalty, "q_taken": jnp.mean(q_tot),
                                            "q_target": jnp.mean(target)}
