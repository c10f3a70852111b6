"""MAICQ: multi-agent implicit constraint Q-learning (Yang et al., NeurIPS 2021).

An actor-critic that learns from a dataset without ever valuing an action the
data does not show. The critic is a team value Q_tot = mix(Q_1, ..., Q_N; s)
(QMIX's mixer, or VDN's sum with `algo.mixer=vdn`) learned by SARSA on the
data's own next joint action, each target re-weighted across the batch:

    y_t = r_t + gamma * (1 - d_t) * B softmax_b(Q'_tot(s_{t+1}, a_{t+1}) / beta_Q) Q'_tot(s_{t+1}, a_{t+1})

(the batch's softmax times B has mean 1: beta_Q large is plain SARSA, small
leans on the data's best continuations). Each agent's policy pi_i (a network
like the agents' Q network, its outputs logits over legal actions) is fitted
to the data's actions by advantage-weighted regression:

    L_pi = - mean_{t, b, i} k_i B softmax_b((Q_i(o, a_i) - sum_a pi_i(a | o) Q_i(o, a)) / beta_pi) log pi_i(a_i | o)

where k_i = dQ_tot / dQ_i is the agent's share of the team value at the data's
actions (1 under VDN). The policy is an implicit constraint: it is
exp(Q / beta_pi)-tilted behaviour, so it only moves probability between actions
the data took. The agents act greedily on pi (`algo.acting=sample`: draw from
it). Temperatures default to the authors' (beta_pi = 0.1, beta_Q = 1000). The
bootstrap is the data's next action, so `algo.double_q` is not read, and
`algo.backup` is refused.

Why this actor-critic and not OMAR or IDDPG+BC: those two optimise continuous
actions through the critic's gradient, and coplay's offline trainers, on the Q
family's networks, choose among discrete actions; MAICQ is the discrete one of the three, and the
only one of them that constrains by construction rather than by a penalty, which
makes it the useful contrast to the CQL family beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos.base import Capabilities
from coplay.algos.common import q_learning as ql
from coplay.algos.common.offline import OfflineTeamConfig
from coplay.algos.common.q_trainer import QLoop
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.nets import distributions


@dataclass(frozen=True)
class Config(OfflineTeamConfig):
    adv_temp: float = param(0.1, "beta_pi: temperature of the policy's advantage weights (small: imitate only "
                                 "the data's best actions)", min=0.0, min_exclusive=True)
    target_temp: float = param(1000.0, "beta_Q: temperature of the critic's target weights over the batch (large: "
                                       "plain SARSA on the data's next actions)", min=0.0, min_exclusive=True)


def batch_softmax_weights(x: jax.Array, temperature: float, axis: int = 1) -> jax.Array:
    """B softmax(x / temperature) over the batch axis: weights of mean 1, no gradient."""
    x = jax.lax.stop_gradient(x)
    return x.shape[axis] * jax.nn.softmax(x / temperature, axis=axis)


class MAICQ(QLoop):
    name = "maicq"
    config_class = Config
    config: Config
    capabilities = Capabilities(recurrent=True, needs_global_state=True)
    loss_name = "loss"         # the TD loss and the actor's together (each also logged alone)

    def __init__(self, config: Config, env: Env, num_updates: int):
        if config.backup != "max":
            raise ConfigError(f"algo.backup={config.backup!r}: maicq bootstraps on the data's next action (SARSA), "
                              "so it reads no backup; leave algo.backup=max")
        super().__init__(config, env, num_updates)

    def mixer_kind(self) -> str | None:
        return self.config.mixer

    def extra_networks(self) -> tuple[str, ...]:
        return ("policy",)      # pi, shaped like the agents' Q-network; the critic's target holds no copy of it

    acting_network = "policy"   # the agents act on pi, greedily

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        c = self.config
        t, n = self.train_len, c.n_step
        q = self.unroll(params["agent"], w)                                   # [L - burn_in, B, N, A]
        q_target = self.unroll(target_params["agent"], w)
        logits = self.unroll(params["policy"], w)[:t]
        w = {k: v[self.burn_in:] for k, v in w.items()}
        action, mask, active = w["action"][:t], w["action_mask"][:t], w["active"][:t]

        # critic: SARSA on the data's next joint action, targets re-weighted over the batch
        assert self.mixing is not None
        mix, target_mix = self.mixing.mix(params["mixer"]), self.mixing.mix(target_params["mixer"])

        def weighted_target_mix(q_next, state):
            value = target_mix(q_next, state)
            return batch_softmax_weights(value, c.target_temp) * value

        q_taken = ql.chosen(q[:t], action)
        next_taken = ql.chosen(q_target[n:n + t], w["action"][n:n + t])
        td, target = ql.team_td_loss(q_taken, next_taken, w, mix, weighted_target_mix, c.gamma, n, c.loss)

        # actor: advantage-weighted regression on the data's actions, scaled by each agent's share of Q_tot
        log_pi = jax.nn.log_softmax(distributions.masked_logits(logits, mask), axis=-1)
        q_fixed = jax.lax.stop_gradient(q[:t])
        baseline = jnp.sum(jnp.exp(jax.lax.stop_gradient(log_pi)) * jnp.where(mask, q_fixed, 0.0), axis=-1)
        advantage = ql.chosen(q_fixed, action) - baseline                       # [T, B, N]
        weight = batch_softmax_weights(jnp.where(active, advantage, -1e9), c.adv_temp)
        state = w["global_state"][:t]
        share = jax.grad(lambda x: jnp.sum(mix(x, state)))(jax.lax.stop_gradient(q_taken) * active)
        actor = ql.masked_mean(-jax.lax.stop_gradient(share * weight) * ql.chosen(log_pi, action), active)

        agree = (ql.greedy(logits, mask) == action).astype(jnp.float32)
        q_tot = mix(q_taken * active, state)
        return td + actor, {"loss/td": td, "loss/actor": actor, "q_taken": jnp.mean(q_tot),
                            "q_target": jnp.mean(target), "accuracy": ql.masked_mean(agree, active)}
