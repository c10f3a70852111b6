"""Multi-objective QMIX: vector Q-values mixed under a preference, in the spirit of
MO-MIX (Hu et al., 2023).

One network per agent (shared, as QMIX's) takes the agent's observation and the
preference weight w and gives a vector of K Q-values per action,
Q_i(o_i, a, w) in R^K. Each objective k has its own monotonic mixer
(`coplay.nets.mixers.MonotonicMixer`) whose hypernetworks read the global state
with w appended, so the team's vector value is

    Q_tot^k(s, a, w) = f_k(Q_1^k(o_1, a_1, w), ..., Q_N^k(o_N, a_N, w); s, w),

learned from the team's reward in objective k (the mean of the agents'), one
TD problem per objective:

    y_t^k = sum_{j<n} gamma^j r^k_{t+j} + gamma^n f_k^target(Q_i^k,target(o_{t+n}, a*_i, w); s_{t+n}, w),
    a*_i  = argmax_a w . Q_i(o_{t+n}, a, w)       (over legal actions; the online network's with double Q)

Agents act greedily on the utility w . Q_i(o_i, a, w) (epsilon-greedy while
training). Each episode draws its weight (`coplay.wrappers.Preference`,
`algo.concentration`), so one network learns the whole front; evaluations play
it at `algo.weights` weights spread over the simplex, as `pc_mappo`'s do
(`coplay.algos.common.conditioned`). Replay, targets, n-step windows and the
recurrent option are the Q family's (`coplay.algos.common.q_trainer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from coplay.algos import qmix
from coplay.algos.base import Capabilities
from coplay.algos.common import q_learning as ql
from coplay.algos.common.conditioned import CONDITIONED_RETURN, Conditioning, concentration_param, weights_param
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.policy import Evaluator, Policy
from coplay.nets import init_stacked


@dataclass(frozen=True)
class Config(qmix.Config):
    # The front is one of undiscounted episode returns: a longer horizon than the Q family's default.
    gamma: float = param(0.99, "discount", min=0.0, max=1.0)
    weights: int = weights_param()
    concentration: float = concentration_param()
    show_weight: int = param(0, "the weight (an index into the weights) that `coplay eval` and `record` play the "
                                "network at", min=0, affects_results=False)


def _take(q: jax.Array, action: jax.Array) -> jax.Array:
    """q: [..., A, K], action: [...] -> the vector of the action taken [..., K]."""
    return jnp.take_along_axis(q, action[..., None, None].astype(jnp.int32), axis=-2)[..., 0, :]


class MOQMIX(qmix.QMIX):
    """QMIX over vector Q-values, one mixer per objective, conditioned on the preference; one seed."""

    name = "mo_qmix"
    config_class = Config
    # the preference is appended to flat observations (`coplay.wrappers.Preference`) and read back from them
    capabilities = Capabilities(recurrent=True, needs_global_state=True, vector_reward=True, needs_vector_reward=True,
                                image_obs=False)
    return_convention = CONDITIONED_RETURN
    config: Config

    def __init__(self, config: Config, env: Env, num_updates: int):
        self.conditioning = Conditioning(self.name, self.capabilities, env, config)
        self.num_objectives = self.conditioning.num_objectives
        super().__init__(config, self.conditioning.env, num_updates)
        self.fronts = self.conditioning.fronts
        self.weight_at = env.spec.obs_space.shape[0]     # the weight follows the environment's own observation

    def net_outputs(self, num_actions: int) -> int:
        return num_actions * self.num_objectives         # a vector Q-value per action

    # ----- the conditioned network's utility, acting and evaluation ---------------------------
    def update(self, state: Any) -> tuple[Any, dict[str, jax.Array]]:
        state, metrics = super().update(state)
        return state, self.conditioning.returns(metrics)

    def policy(self) -> Policy:
        return self.conditioning.policy(super().policy(), self.wrap)

    def evaluator(self, episodes: int) -> Evaluator:
        return self.conditioning.evaluator(super().policy(), self.wrap, episodes)

    # ----- vector Q-values, and the utility actions are chosen by ----------------------------
    def q_values(self, agent_params, carry, obs, reset):
        """obs: [B, N, ...] -> (carry, Q [B, N, A, K])."""
        carry, q = super().q_values(agent_params, carry, obs, reset)
        return carry, q.reshape(*q.shape[:-1], self.num_actions, self.num_objectives)

    def weight(self, obs: jax.Array) -> jax.Array:
        """`[..., N, K]`: the preference each agent was shown, read from its observation."""
        return obs[..., self.weight_at:self.weight_at + self.num_objectives]

    def acting_q(self, q: jax.Array, obs: jax.Array) -> jax.Array:
        return jnp.einsum("bnak,bnk->bna", q, self.weight(obs))

    # ----- one mixer per objective --------------------------------------------------------------
    def init_mixer(self, key: jax.Array, global_state: jax.Array) -> Any:
        one = super().init_mixer
        return init_stacked(lambda k: one(k, global_state), jax.random.split(key, self.num_objectives))

    def td_inputs(self, params: dict, target_params: dict, w: dict[str, jax.Array]):
        """Each agent's vector Q of the action taken, q_taken [T, B, N, K], and the target
        network's vector at the action that is best for the weight n steps later,
        next_value [T, B, N, K]."""
        c = self.config
        t, n = self.train_len, c.n_step
        q = self.unroll(params["agent"], w)                       # [L, B, N, A, K]
        q_target = self.unroll(target_params["agent"], w)
        w = {k: v[self.burn_in:] for k, v in w.items()}
        weight = self.weight(w["obs"].reshape(*w["obs"].shape[:3], -1))[n:n + t]     # [T, B, N, K]
        utility = lambda x: jnp.einsum("tbnak,tbnk->tbna", x, weight)  # noqa: E731
        best = ql.greedy(utility(q[n:n + t] if c.double_q else q_target[n:n + t]), w["action_mask"][n:n + t])
        return _take(q[:t], w["action"][:t]), _take(q_target[n:n + t], best), w

    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        c = self.config
        q_taken, next_value, w = self.td_inputs(params, target_params, w)          # [T, B, N, K]

        mixing = self.mixing
        assert mixing is not None

        def objective(q_k, next_k, reward_k, mixer, target_mixer):
            return ql.team_td_loss(q_k, next_k, {**w, "reward": reward_k}, mixing.mix(mixer), mixing.mix(target_mixer),
                                   c.gamma, c.n_step, c.loss)

        losses, targets = jax.vmap(objective, in_axes=(-1, -1, -1, 0, 0))(
            q_taken, next_value, w["reward"], params["mixer"], target_params["mixer"])
        return jnp.mean(losses), {"q_taken": jnp.mean(q_taken), "q_target": jnp.mean(targets)}

