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
from typing import Any

import jax
import jax.numpy as jnp

from coplay.algos.base import Capabilities
from coplay.algos.common import q_learning as ql
from coplay.algos.common.mixing import MixerConfig, Mixing
from coplay.algos.common.q_trainer import QLearner
from coplay.core.env import Env
from coplay.core.types import TimeStep


@dataclass(frozen=True)
class Config(MixerConfig, ql.QConfig):
    pass


class QMIX(QLearner[Config]):
    name = "qmix"
    config_class = Config
    capabilities = Capabilities(recurrent=True, needs_global_state=True)

    def __init__(self, config: Config, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        self.mixing = Mixing("qmix", self.num_agents, config)

    def init_mixer(self, key: jax.Array, global_state: jax.Array) -> Any:
        return self.mixing.init(key, global_state)

    def replay_item(self, ts: TimeStep, action, reward, done, carry) -> dict[str, jax.Array]:
        return {**super().replay_item(ts, action, reward, done, carry), "global_state": ts.global_state}

    def _mix(self, mixer_params: dict) -> ql.Mix:
        return self.mixing.mix(mixer_params)

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        c = self.config
        q_taken, next_value, w = self.td_inputs(params, target_params, w)          # [T, B, N]
        loss, target = ql.team_td_loss(q_taken, next_value, w, self._mix(params["mixer"]),
                                       self._mix(target_params["mixer"]), c.gamma, c.n_step, c.loss)
        return loss, {"q_taken": jnp.mean(q_taken), "q_target": jnp.mean(target)}
