"""HAPPO: heterogeneous-agent PPO (Kuba et al., 2022, "Trust Region Policy
Optimisation in Multi-Agent Reinforcement Learning"; HARL, Zhong et al., JMLR 2024).

Every agent has its own actor (no parameter sharing), and the agents are updated one
after another, in a new random order i_1, ..., i_N each update. Agent i_m maximises
PPO's clipped surrogate of the advantage weighted by how much the agents updated
before it have already changed their part of the joint action's probability:

    M_{i_m} = prod_{j < m} pi_{i_j}^new(a_{i_j} | o_{i_j}) / pi_{i_j}^old(a_{i_j} | o_{i_j})
    L_{i_m} = -mean[ M_{i_m} min(r A, clip(r, 1 - eps, 1 + eps) A) ] - ent_coef H(pi_{i_m})
    r = pi_{i_m}(a | o) / pi_{i_m}^old(a | o)

(M of the first agent is 1; it is a constant of agent i_m's update, read after each
earlier agent's epochs.) Because each agent sees what the earlier ones did, the
joint update improves the team's return monotonically in the trust-region analysis
(the multi-agent advantage decomposition), which updating every agent on the same
data at once (MAPPO, IPPO) does not guarantee, and agents that must act differently
on the same observation can learn to (`tests/test_happo.py`).

The rest is MAPPO's (`coplay.algos.mappo`): the rollout, GAE, the centralised
critic on the global state with the agent's id (trained on its own epochs before
the actors), the networks and the policy it plays. Each actor keeps its own Adam
state. Feed-forward networks only (`algo.recurrent=false`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from coplay.algos import mappo
from coplay.algos.base import Capabilities
from coplay.algos.common import ppo
from coplay.algos.common.metrics import episode_metrics
from coplay.algos.common.rollout import Transition
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.nets.agent import apply_agents


@dataclass(frozen=True)
class Config(mappo.Config):
    share_params: bool = param(False, "HAPPO's agents each have their own actor: must stay false")


class HAPPO(mappo.MAPPO):
    name = "happo"
    config_class = Config
    capabilities = Capabilities(continuous_actions=True, needs_global_state=True)

    def __init__(self, config: Config, env: Env, num_updates: int):
        if config.share_params:
            raise ConfigError("algo.share_params=true: HAPPO updates each agent's own actor in turn; one shared "
                              "network is MAPPO (algo=mappo)")
        if config.recurrent:
            raise ConfigError("algo.recurrent=true: HAPPO here is feed-forward; recurrent networks train with "
                              "algo=mappo or algo=ippo")
        super().__init__(config, env, num_updates)
        self.actor_opt = ppo.adam(config, num_updates)
        self.critic_opt = ppo.adam(config, num_updates)

    def init(self, key: jax.Array) -> mappo.TrainState:
        state = super().init(key)
        opt = {"actor": jax.vmap(self.actor_opt.init)(state.params["actor"]),   # one Adam state per agent
               "critic": self.critic_opt.init(state.params["critic"])}
        return dataclasses.replace(state, opt_state=opt)

    # ----- learning ----------------------------------------------------------------------------
    def _critic_loss(self, params: Any, mb: dict) -> tuple[jax.Array, dict[str, jax.Array]]:
        s = mb["critic_in"].shape[0]
        _, values = apply_agents(self.critic, params, self.initial_carry((s,)), mb["critic_in"],
                                 jnp.zeros((s,), bool), False)
        c = self.config
        loss = ppo.clipped_value_loss(values, mb["value"], mb["target"], c.clip_eps if c.clip_value else None,
                                      mb["active"])
        return c.vf_coef * loss, {"loss/value": loss}

    def _actor_logits(self, params: Any, obs: jax.Array, mask: jax.Array) -> jax.Array:
        s = obs.shape[0]
        _, logits = apply_agents(self.actor, params, self.initial_carry((s,))[:, :1], obs[:, None],
                                 jnp.zeros((s,), bool), True)
        return self.dist.prepare(logits[:, 0], mask)

    def _actor_loss(self, params: Any, mb: dict) -> tuple[jax.Array, dict[str, jax.Array]]:
        """One agent's HAPPO loss on a minibatch of its samples (`factor`: M of the earlier agents)."""
        c = self.config
        logits = self._actor_logits(params, mb["obs"], mb["action_mask"])
        logp = self.dist.log_prob(logits, mb["action"])
        adv = ppo.normalize(mb["adv"], mb["active"]) if c.normalize_advantages else mb["adv"]
        terms, ratio, log_ratio = ppo.clip_terms(logp, mb["logp"], adv, c.clip_eps)
        pg_loss = ppo.masked_mean(mb["factor"] * terms, mb["active"])
        ent = ppo.masked_mean(self.dist.entropy(logits), mb["active"])
        stats = {"loss/policy": pg_loss, "loss/entropy": ent,
                 "loss/approx_kl": ppo.masked_mean((ratio - 1.0) - log_ratio, mb["active"]),
                 "loss/clip_frac": ppo.masked_mean((jnp.abs(ratio - 1.0) > c.clip_eps).astype(jnp.float32),
                                                   mb["active"])}
        return pg_loss - c.ent_coef * ent, stats

    def actor_update(self, key: jax.Array, params: Any, opt: Any, data: dict) -> tuple[Any, Any, dict]:
        """One agent's turn: PPO epochs of `_actor_loss` on its samples (HATRPO replaces it)."""
        c = self.config
        return ppo.train_epochs(key, self._actor_loss, self.actor_opt, params, opt, data, c.epochs,
                                ppo.shuffled(c.minibatches))

    def learn(self, state: mappo.TrainState, scalar_reward: Callable[[Transition], jax.Array],
              ) -> tuple[mappo.TrainState, dict[str, jax.Array]]:
        c = self.config
        key, k_roll, k_critic, k_order, k_actors = jax.random.split(state.key, 5)
        (env_state, ts, carry), traj, batch = self.collect(state, scalar_reward, k_roll)   # [S, N, ...]
        split = ppo.shuffled(c.minibatches)
        critic, critic_opt, critic_stats = ppo.train_epochs(
            k_critic, self._critic_loss, self.critic_opt, state.params["critic"], state.opt_state["critic"],
            batch, c.epochs, split)

        def agent_turn(carry, x):
            actors, opts, factor = carry
            i, k = x
            own = {name: batch[name][:, i] for name in ("obs", "action_mask", "action", "logp", "adv", "active")}
            params, opt = (jax.tree.map(lambda t: t[i], tree) for tree in (actors, opts))
            params, opt, stats = self.actor_update(k, params, opt, {**own, "factor": factor})
            new_logp = self.dist.log_prob(self._actor_logits(params, own["obs"], own["action_mask"]), own["action"])
            factor = factor * jnp.where(own["active"], jnp.exp(new_logp - own["logp"]), 1.0)
            actors, opts = (jax.tree.map(lambda t, v: t.at[i].set(v), tree, new)
                            for tree, new in ((actors, params), (opts, opt)))
            return (actors, opts, jax.lax.stop_gradient(factor)), stats

        order = jax.random.permutation(k_order, self.num_agents)
        samples = batch["adv"].shape[0]
        (actors, actor_opts, factor), stats = jax.lax.scan(
            agent_turn, (state.params["actor"], state.opt_state["actor"], jnp.ones((samples,), jnp.float32)),
            (order, jax.random.split(k_actors, self.num_agents)))
        metrics = {k: v.mean() for k, v in stats.items()}
        metrics["loss/value"] = critic_stats["loss/value"]
        metrics["happo/joint_ratio_spread"] = jnp.std(factor)    # spread of the product of every new/old ratio
        metrics.update(episode_metrics(traj.info))
        new_state = mappo.TrainState(params={"actor": actors, "critic": critic},
                                     opt_state={"actor": actor_opts, "critic": critic_opt}, env_state=env_state,
                                     ts=ts, carry=carry, key=key, updates=state.updates + 1)
        return new_state, metrics

