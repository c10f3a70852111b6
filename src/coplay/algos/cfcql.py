"""CFCQL: counterfactual conservative Q-learning (Shao et al., NeurIPS 2023).

A team value Q_tot = mix(Q_1, ..., Q_N; s) (QMIX's mixer, or VDN's sum with
`algo.mixer=vdn`) is learned from a dataset by the TD loss of QMIX, plus a
conservative penalty taken one agent at a time, the others' actions held at
the data's:

    L = L_TD + alpha * mean_t [ sum_i lambda_i(s_t) log sum_{a_i} exp Q_tot(s_t, a_i, a_t^{-i}) - Q_tot(s_t, a_t) ]

(`coplay.algos.common.conservative.counterfactual_penalty`). Joint-action CQL
(`algo=qmix_cql`) sums over |A|^N joint actions, and its over-estimation
correction grows with them; the counterfactual sum has N |A| terms and is
exact. The weights lambda_i sum to one: uniform over the active agents with
`algo.lambda_temp=0` (the authors' default), else a softmax over agents of
lambda_temp x KL(mu_i || beta_i), where mu_i is the softmax of agent i's
counterfactual team values and beta_i its behaviour policy, a network trained
beside the Q-values by behaviour cloning on the same windows (as the
authors' `sparse_lambda` option does), so the agent whose values stray
furthest from the data is held back most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from coplay.algos.base import Capabilities
from coplay.algos.common import conservative
from coplay.algos.common import q_learning as ql
from coplay.algos.common.offline import OfflineTeamConfig, alpha_param
from coplay.algos.common.q_trainer import QLoop
from coplay.core.config import param
from coplay.nets import distributions


@dataclass(frozen=True)
class Config(OfflineTeamConfig):
    cql_alpha: float = alpha_param()
    lambda_temp: float = param(0.0, "temperature of the agents' penalty weights: 0 = uniform; > 0 = a softmax "
                                     "of each agent's KL divergence from a behaviour model trained beside it",
                               min=0.0)


class CFCQL(QLoop):
    name = "cfcql"
    config_class = Config
    capabilities = Capabilities(recurrent=True, needs_global_state=True)
    config: Config
    loss_name = "loss"         # the TD loss and the penalty together (each also logged alone)

    def mixer_kind(self) -> str | None:
        return self.config.mixer

    def extra_networks(self) -> tuple[str, ...]:
        """With `lambda_temp > 0`, a behaviour model: the agents' network, cloned from the data."""
        return ("behaviour",) if self.config.lambda_temp > 0 else ()

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        c = self.config
        window = w                                                                    # burn-in included
        q, td, target, q_tot, mix, w = self.team_parts(params, target_params, w)
        t = q.shape[0]
        action, mask, active = w["action"][:t], w["action_mask"][:t], w["active"][:t]
        q_cf = conservative.counterfactual_values(q, action, active, mix, w["global_state"][:t])
        stats: dict[str, Any] = {}
        behaviour_logits, bc = None, jnp.zeros(())
        if "behaviour" in params:
            behaviour_logits = self.unroll(params["behaviour"], window)[:t]
            log_beta = jax.nn.log_softmax(distributions.masked_logits(behaviour_logits, mask), axis=-1)
            bc = ql.masked_mean(-ql.chosen(log_beta, action), active)
            behaviour_logits = jax.lax.stop_gradient(behaviour_logits)
            stats["loss/behaviour"] = bc
        weights = conservative.counterfactual_weights(q_cf, mask, active, behaviour_logits, c.lambda_temp)
        penalty = conservative.counterfactual_penalty(q_cf, mask, q_tot, weights)
        penalty = ql.masked_mean(penalty, jnp.any(active, axis=-1))
        stats.update({"loss/td": td, "loss/cql": penalty, "q_taken": jnp.mean(q_tot), "q_target": jnp.mean(target),
                      "lambda_max": jnp.mean(jnp.max(weights, axis=-1))})
        return td + c.cql_alpha * penalty + bc, stats
