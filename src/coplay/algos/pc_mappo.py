"""Preference-conditioned MAPPO: one policy for the whole Pareto front.

Where the weight sweep (`coplay.algos.mo_ppo`) trains one policy per preference
weight, this trains one network that takes the weight as input, in the spirit of
conditioned networks for multi-objective RL (Abels et al., 2019; Basaklar et
al., 2023, PD-MORL) carried to MAPPO:

- each episode draws its weight w from a Dirichlet distribution over the simplex
  (`algo.concentration`; 1 is uniform), shown to every agent's actor and to the
  critic (`coplay.wrappers.Preference` appends it to observations and the global
  state);
- the critic is vector-valued, one head per objective, V(s, w) in R^K, trained on
  each objective's return: it learns how much of each objective the policy for
  w collects, which generalises across weights better than one scalar utility;
- GAE runs per objective, and the policy's advantage is the weight's utility of
  the vector advantage, A_t = w . A_t^vec, which for a linear utility is the
  advantage of w . r.

Evaluation plays the one policy at `algo.weights` weights spread evenly over the
simplex (the same weights the sweep trains, so fronts compare point for point)
and reports each one's vector return (`w<i>/objective/<name>`), the front the
experiment layer scores. `total_steps` counts every environment step (there is
one policy): at the same `total_steps`, the sweep of W weights has stepped W
times as many environments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from coplay.algos import mo_ppo
from coplay.algos.base import Capabilities
from coplay.algos.common import ppo
from coplay.algos.common.advantages import gae
from coplay.algos.common.conditioned import CONDITIONED_RETURN, Conditioning, concentration_param, weights_param
from coplay.algos.common.rollout import Transition
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Evaluator, Policy
from coplay.nets.agent import AgentNet
from coplay.wrappers import Preference


@dataclass(frozen=True)
class Config(mo_ppo.LaneConfig):
    weights: int = weights_param()
    concentration: float = concentration_param()


class PCMAPPO(mo_ppo.Lane):
    """One preference-conditioned MAPPO policy with a vector critic, for one seed."""

    name = "pc_mappo"
    config_class = Config
    # the preference is appended to flat observations (`coplay.wrappers.Preference`)
    capabilities = Capabilities(continuous_actions=True, recurrent=True, vector_reward=True, needs_vector_reward=True,
                                image_obs=False)
    return_convention = CONDITIONED_RETURN
    config: Config

    def __init__(self, config: Config, env: Env, num_updates: int):
        if config.shaped_reward:
            raise ConfigError(f"algo.shaped_reward={config.shaped_reward!r}: pc_mappo learns from a vector reward, "
                              "to which a scalar shaped reward cannot be added; mappo, ippo and mo_ppo take one")
        self.conditioning = Conditioning(self.name, self.capabilities, env, config)
        self.num_objectives = self.conditioning.num_objectives
        super().__init__(config, self.conditioning.env, num_updates)
        self.fronts = self.conditioning.fronts
        c, k = config, env.spec.reward_dim
        self.critic = AgentNet(k, c.hidden_size, c.num_layers, c.activation, c.recurrent, head_scale=1.0,
                               torso=self.critic_torso())

    # ----- the conditioned policy's utility, acting and evaluation -------------------------------
    def update(self, state: Any) -> tuple[Any, dict[str, jax.Array]]:
        state, metrics = super().update(state)
        return state, self.conditioning.returns(metrics)

    def policy(self) -> Policy:
        return self.conditioning.policy(super().policy(), self.wrap)

    def evaluator(self, episodes: int) -> Evaluator:
        return self.conditioning.evaluator(super().policy(), self.wrap, episodes)

    # ----- learning: a vector critic, and the utility of the vector advantage --------------------
    def advantages(self, traj: Transition, reward: jax.Array, last_value: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Per objective GAE `[T, E, N, K]`; the policy's advantage is `w . A` `[T, E, N]`,
        the value targets stay vectors."""
        c = self.config
        adv, target = gae(reward, traj.extras["value"], traj.done[..., None, None], last_value, c.gamma,
                          c.gae_lambda)
        w = Preference.weight(traj.ts, self.num_objectives)       # [T, E, K] the weight each step was taken for
        return jnp.einsum("tenk,tek->ten", adv, w), target

    def _loss(self, params, mb: dict):
        logits, values = self._forward(params, mb)
        logits = self.dist.prepare(logits, mb["action_mask"])
        per_head = jnp.broadcast_to(mb["active"][..., None], values.shape)   # every head's error, averaged
        return ppo.objective(self.dist, logits, values, mb, self.config, mb["active"], per_head)

