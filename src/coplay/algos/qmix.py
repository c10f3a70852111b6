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
from typing import Any, cast

import jax
import jax.numpy as jnp

from coplay.algos.base import Capabilities
from coplay.algos.common import q_learning as ql
from coplay.algos.common.q_trainer import QLearner
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.types import TimeStep
from coplay.nets.mixers import MonotonicMixer


@dataclass(frozen=True)
class Config(ql.QConfig):
    mixer_embed: int = param(32, "width of the mixing network's hidden layer", min=1)
    hypernet_hidden: int = param(64, "hidden units of the hypernetworks that produce the mixing weights", min=1)
    mixer_init_scale: float = param(0.01, "initial scale (variance) of the hypernetworks' output layers: small "
                                          "starts Q_tot near the state value", min=0.0, min_exclusive=True)


class QMIX(QLearner[Config]):
    name = "qmix"
    config_class = Config
    capabilities = Capabilities(recurrent=True, needs_global_state=True)

    def __init__(self, config: Config, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        self.mixer = MonotonicMixer(config.mixer_embed, config.hypernet_hidden, config.mixer_init_scale)

    def init_mixer(self, key: jax.Array, global_state: jax.Array) -> Any:
        state = global_state.reshape(global_state.shape[0], -1)
        return self.mixer.init(key, jnp.zeros((state.shape[0], self.num_agents)), state)

    def replay_item(self, ts: TimeStep, action, reward, done, carry) -> dict[str, jax.Array]:
        return {**super().replay_item(ts, action, reward, done, carry), "global_state": ts.global_state}

    def _mix(self, mixer_params: dict):
        def mix(q: jax.Array, state: jax.Array | None) -> jax.Array:
            assert state is not None, "QMIX stores the global state in replay"
            t, b = q.shape[:2]
            out = self.mixer.apply(mixer_params, q.reshape(t * b, -1), state.reshape(t * b, -1))
            return jnp.reshape(cast(jax.Array, out), (t, b))

        return mix

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        c = self.config
        q_taken, next_value, w = self.td_inputs(params, target_params, w)          # [T, B, N]
        loss, target = ql.team_td_loss(q_taken, next_value, w, self._mix(params["mixer"]),
                                       self._mix(target_params["mixer"]), c.gamma, c.n_step, c.loss)
        return loss, {"q_taken": jnp.mean(q_taken), "q_target": jnp.mean(target)}
