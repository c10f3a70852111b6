"""QMIX: monotonic value factorisation (Rashid et al., 2018).

Q_tot(s, a) = f(Q_1(o_1, a_1), ..., Q_N(o_N, a_N); s), where the mixing network
f has non-negative weights produced by hypernetworks that read the global state
s (`coplay.nets.mixers.MonotonicMixer`), learned from the team reward r (the
mean of the agents' rewards):

    L = mean_t (Q_tot(s_t, a_t) - y_t)^2,
    y_t = sum_{k<n} gamma^k r_{t+k} + gamma^n f^target(Q_1^target(o_{t+n}, a'_1), ...; s_{t+n})

Monotonicity keeps decentralised greedy action selection consistent with the
joint greedy action, while the state-conditioned mixing can represent more than
VDN's sum (the two-step game, `env=two_step`, is the classic case). Inactive
agents enter the mixer as zeros; a separate target mixer bootstraps the target.
Acting, replay, target networks and n-step windows are the Q family's
(`coplay.algos.common.q_trainer`).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from coplay.algos.base import Capabilities
from coplay.algos.common import q_learning as ql
from coplay.algos.common.mixing import MixerConfig
from coplay.algos.common.q_trainer import QLoop


@dataclass(frozen=True)
class Config(MixerConfig, ql.QConfig):
    pass


class QMIX(QLoop):
    name = "qmix"
    config_class = Config
    config: Config
    capabilities = Capabilities(recurrent=True, needs_global_state=True)

    def mixer_kind(self) -> str | None:
        return "qmix"

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        assert self.mixing is not None
        c = self.config
        q_taken, next_value, w = self.td_inputs(params, target_params, w)          # [T, B, N]
        loss, target = ql.team_td_loss(q_taken, next_value, w, self.mixing.mix(params["mixer"]),
                                       self.mixing.mix(target_params["mixer"]), c.gamma, c.n_step, c.loss)
        return loss, {"q_taken": jnp.mean(q_taken), "q_target": jnp.mean(target)}
