"""MAPPO: multi-agent PPO with a centralised critic (Yu et al., 2022).

Each agent acts from its own observation; the critic scores each agent from
the environment's `global_state` plus the agent's one-hot id. Setting
`critic="local"` gives IPPO (de Witt et al., 2020), which `coplay.algos.ippo`
does. Feed-forward or recurrent (GRU) networks, one network shared by all
agents or one per agent. Discrete actions (a categorical that never samples an
illegal action of the `action_mask`) or continuous ones (a diagonal Gaussian;
the environment clips to its bounds). Inactive agents (the `active` mask)
contribute nothing to the loss.

Truncated episodes are treated like terminated ones when computing advantages
(no bootstrap through the time limit), as in the reference MAPPO and JaxMARL
implementations, so returns stay comparable with theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from coplay.algos.base import Policy, check_env_support
from coplay.algos.common.advantages import gae
from coplay.algos.common.metrics import episode_metrics
from coplay.algos.common.minibatch import shuffle_split
from coplay.algos.common.ppo_loss import clipped_surrogate, clipped_value_loss, masked_mean, normalize
from coplay.algos.common.rollout import Transition, reset_envs, rollout
from coplay.core.config import check, param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.types import TimeStep
from coplay.nets import ACTIVATIONS, distributions, init_stacked
from coplay.nets.agent import AgentNet, apply_agents
from coplay.wrappers import AgentID, AutoReset, EpisodeStats


@dataclass(frozen=True)
class Config:
    lr: float = param(7e-4, "Adam learning rate", min=0.0, min_exclusive=True)
    anneal_lr: bool = param(True, "decay the learning rate linearly to 0 over the run")
    num_envs: int = param(64, "parallel environments per seed", min=1)
    rollout_len: int = param(25, "steps per environment between updates", min=1)
    epochs: int = param(4, "passes over each batch", min=1)
    minibatches: int = param(2, "minibatches per epoch", min=1)
    gamma: float = param(0.95, "discount", min=0.0, max=1.0)
    gae_lambda: float = param(0.95, "GAE lambda", min=0.0, max=1.0)
    clip_eps: float = param(0.2, "PPO ratio clip", min=0.0, min_exclusive=True)
    clip_value: bool = param(False, "clip the value update around the rollout's values")
    vf_coef: float = param(0.5, "value loss weight", min=0.0)
    ent_coef: float = param(0.01, "entropy bonus weight", min=0.0)
    max_grad_norm: float = param(0.5, "global gradient-norm clip", min=0.0, min_exclusive=True)
    normalize_advantages: bool = param(True, "normalise advantages per minibatch")
    hidden_size: int = param(64, "units per hidden layer", min=1)
    num_layers: int = param(2, "hidden layers (feed-forward); layers around the GRU (recurrent)", min=1)
    activation: str = param("tanh", "hidden activation", choices=tuple(ACTIVATIONS))
    recurrent: bool = param(False, "GRU actor and critic over the observation history")
    share_params: bool = param(True, "one network for all agents (else one per agent)")
    agent_id: bool = param(True, "append a one-hot agent id to observations when sharing parameters")
    critic: str = param("global", "critic input: global state (MAPPO) or own observation (IPPO)",
                        choices=("global", "local"))
    greedy_eval: bool = param(False, "evaluate with the most likely action instead of sampling")


@struct.dataclass
class TrainState:
    params: dict
    opt_state: Any
    env_state: Any
    ts: TimeStep            # batched [E, ...]: what the next action is chosen from
    carry: tuple            # (actor, critic) GRU carries [E, N, H] (H = 0 when feed-forward)
    key: jax.Array
    updates: jax.Array


class Trainer:
    """MAPPO/IPPO for one seed. `update` is pure; the experiment layer vmaps it over seeds."""

    def __init__(self, config: Config, env: Env, num_updates: int, name: str = "mappo"):
        check(config, "algo.")
        spec = env.spec
        check_env_support(spec, name, continuous=True)
        batch = config.num_envs if config.recurrent else config.num_envs * config.rollout_len
        unit = "num_envs" if config.recurrent else "num_envs * rollout_len"
        if batch % config.minibatches:
            raise ConfigError(f"algo.minibatches={config.minibatches} must divide {unit} = {batch}")
        self.config = config
        if config.share_params and config.agent_id:
            env = AgentID(env)
        self.env = AutoReset(EpisodeStats(env))
        self.num_agents = spec.num_agents
        self.steps_per_update = config.num_envs * config.rollout_len
        self.num_updates = num_updates
        c = config
        self.dist = (distributions.Categorical() if spec.discrete_actions
                     else distributions.DiagGaussian(int(np.prod(spec.action_space.shape))))
        self.actor = AgentNet(self.dist.outputs(spec.num_actions), c.hidden_size, c.num_layers, c.activation,
                              c.recurrent)
        self.critic = AgentNet(0, c.hidden_size, c.num_layers, c.activation, c.recurrent)
        self.carry_size = c.hidden_size if c.recurrent else 0
        steps = num_updates * c.epochs * c.minibatches
        lr = optax.linear_schedule(c.lr, 0.0, max(steps, 1)) if c.anneal_lr else c.lr
        # Actor and critic are clipped and stepped apart: with one global clip, the
        # critic's large early gradients (returns of tens) would shrink the policy's step.
        def opt():
            return optax.chain(optax.clip_by_global_norm(c.max_grad_norm), optax.adam(lr, eps=1e-5))

        self.optimizer = optax.multi_transform({"actor": opt(), "critic": opt()},
                                               {"actor": "actor", "critic": "critic"})

    # ----- inputs -------------------------------------------------------------------------
    def critic_input(self, ts: TimeStep) -> jax.Array:
        """[B, N, D]: own observation (IPPO) or global state with the agent's one-hot id (MAPPO)."""
        if self.config.critic == "local":
            return ts.obs.reshape(*ts.obs.shape[:2], -1)
        b, n = ts.global_state.shape[0], self.num_agents
        state = jnp.broadcast_to(ts.global_state.reshape(b, 1, -1), (b, n, ts.global_state[0].size))
        ids = jnp.broadcast_to(jnp.eye(n, dtype=state.dtype), (b, n, n))
        return jnp.concatenate([state, ids], axis=-1)

    def initial_carry(self, batch: tuple[int, ...]) -> jax.Array:
        return jnp.zeros((*batch, self.num_agents, self.carry_size), jnp.float32)

    # ----- initialisation (one seed, outside vmap) -----------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        k_actor, k_critic, k_env, k_state = jax.random.split(key, 4)
        env_state, ts = reset_envs(self.env, k_env, self.config.num_envs)
        obs = ts.obs[0].reshape(self.num_agents, -1)
        c_in = self.critic_input(jax.tree.map(lambda x: x[:1], ts))[0]
        carry = jnp.zeros((1, self.carry_size))
        reset = jnp.zeros((1,), bool)

        def init_net(net, x, k):
            if self.config.share_params:
                return net.init(k, carry, x[:1], reset)
            return init_stacked(lambda kk: net.init(kk, carry, x[:1], reset), jax.random.split(k, self.num_agents))

        params = {"actor": init_net(self.actor, obs, k_actor), "critic": init_net(self.critic, c_in, k_critic)}
        batch = (self.config.num_envs,)
        return TrainState(
            params=params, opt_state=self.optimizer.init(params), env_state=env_state, ts=ts,
            carry=(self.initial_carry(batch), self.initial_carry(batch)), key=k_state,
            updates=jnp.zeros((), jnp.int32),
        )

    # ----- acting -----------------------------------------------------------------------------
    def _act(self, params, carry, ts: TimeStep, key):
        a_carry, c_carry = carry
        shared = self.config.share_params
        a_carry, logits = apply_agents(self.actor, params["actor"], a_carry, ts.obs, ts.done, shared)
        logits = self.dist.prepare(logits, ts.action_mask)
        action = self.dist.sample(key, logits)
        c_carry, value = apply_agents(self.critic, params["critic"], c_carry, self.critic_input(ts), ts.done, shared)
        extras = {"logp": self.dist.log_prob(logits, action), "value": value}
        return (a_carry, c_carry), action, extras

    def policy(self) -> Policy:
        greedy = self.config.greedy_eval

        def act(params, obs, mask, key, carry, reset):
            carry, logits = apply_agents(self.actor, params, carry, obs, reset, self.config.share_params)
            logits = self.dist.prepare(logits, mask)
            action = self.dist.mode(logits) if greedy else self.dist.sample(key, logits)
            return action, carry

        return Policy(act=act, initial_carry=self.initial_carry, env=self.env)

    def policy_params(self, state: TrainState) -> Any:
        return state.params["actor"]

    # ----- learning ----------------------------------------------------------------------------
    def _forward(self, params, mb: dict) -> tuple[jax.Array, jax.Array]:
        """Logits and values for a minibatch: [S, N, ...] (feed-forward) or [T, S, N, ...] (recurrent)."""
        shared = self.config.share_params
        if not self.config.recurrent:
            s = mb["obs"].shape[0]
            carry, reset = self.initial_carry((s,)), jnp.zeros((s,), bool)
            _, logits = apply_agents(self.actor, params["actor"], carry, mb["obs"], reset, shared)
            _, values = apply_agents(self.critic, params["critic"], carry, mb["critic_in"], reset, shared)
            return logits, values

        def step(carry, x):
            a_c, c_c = carry
            a_c, logits = apply_agents(self.actor, params["actor"], a_c, x["obs"], x["reset"], shared)
            c_c, values = apply_agents(self.critic, params["critic"], c_c, x["critic_in"], x["reset"], shared)
            return (a_c, c_c), (logits, values)

        xs = {k: mb[k] for k in ("obs", "critic_in", "reset")}
        _, (logits, values) = jax.lax.scan(step, (mb["actor_carry0"], mb["critic_carry0"]), xs)
        return logits, values

    def _loss(self, params, mb: dict):
        c = self.config
        logits, values = self._forward(params, mb)
        logits = self.dist.prepare(logits, mb["action_mask"])
        logp = self.dist.log_prob(logits, mb["action"])
        weight = mb["active"]
        adv = normalize(mb["adv"], weight) if c.normalize_advantages else mb["adv"]
        pg_loss, stats = clipped_surrogate(logp, mb["logp"], adv, c.clip_eps, weight)
        v_loss = clipped_value_loss(values, mb["value"], mb["target"], c.clip_eps if c.clip_value else None, weight)
        ent = masked_mean(self.dist.entropy(logits), weight)
        total = pg_loss + c.vf_coef * v_loss - c.ent_coef * ent
        return total, {"loss/policy": pg_loss, "loss/value": v_loss, "loss/entropy": ent,
                       "loss/approx_kl": stats["approx_kl"], "loss/clip_frac": stats["clip_frac"]}

    def update(self, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        c = self.config
        key, k_roll, k_epochs = jax.random.split(state.key, 3)
        carry0 = state.carry
        act = lambda carry, ts, k: self._act(state.params, carry, ts, k)  # noqa: E731
        (env_state, ts, carry), traj = rollout(self.env, act, state.env_state, state.ts, carry0, k_roll,
                                               c.rollout_len)
        _, last_value = apply_agents(self.critic, state.params["critic"], carry[1], self.critic_input(ts),
                                     ts.done, c.share_params)
        adv, target = gae(traj.reward, traj.extras["value"], traj.done[..., None], last_value, c.gamma, c.gae_lambda)
        batch = self._batch(traj, adv, target)

        def epoch(carry, k):
            params, opt_state = carry
            if c.recurrent:  # minibatches of whole environment sequences
                seq = {k_: v for k_, v in batch.items() if not k_.endswith("carry0")}
                mbs = shuffle_split(k, seq, c.minibatches, axis=1)
                mbs.update(shuffle_split(k, {"actor_carry0": carry0[0], "critic_carry0": carry0[1]},
                                         c.minibatches, axis=0))
            else:
                mbs = shuffle_split(k, batch, c.minibatches)

            def minibatch(carry, mb):
                params, opt_state = carry
                grads, stats = jax.grad(self._loss, has_aux=True)(params, mb)
                updates, opt_state = self.optimizer.update(grads, opt_state, params)
                stats["grad_norm"] = optax.tree.norm(grads)
                return (optax.apply_updates(params, updates), opt_state), stats

            return jax.lax.scan(minibatch, (params, opt_state), mbs)

        (params, opt_state), stats = jax.lax.scan(epoch, (state.params, state.opt_state),
                                                  jax.random.split(k_epochs, c.epochs))
        metrics = {k: v.mean() for k, v in stats.items()}
        metrics.update(episode_metrics(traj.info))
        new_state = TrainState(params=params, opt_state=opt_state, env_state=env_state, ts=ts, carry=carry,
                               key=key, updates=state.updates + 1)
        return new_state, metrics

    def _batch(self, traj: Transition, adv: jax.Array, target: jax.Array) -> dict:
        """Training data [T, E, ...]; feed-forward flattens time and envs into one sample axis."""
        data = {
            "obs": traj.ts.obs, "critic_in": jax.vmap(self.critic_input)(traj.ts),
            "action_mask": traj.ts.action_mask, "active": traj.ts.active, "action": traj.action,
            "logp": traj.extras["logp"], "value": traj.extras["value"], "adv": adv, "target": target,
            "reset": traj.ts.done,
        }
        if self.config.recurrent:
            return data
        return {k: v.reshape(v.shape[0] * v.shape[1], *v.shape[2:]) for k, v in data.items() if k != "reset"}


def steps_per_update(config: Config) -> int:
    return config.num_envs * config.rollout_len


def make_trainer(config: Config, env: Env, num_updates: int) -> Trainer:
    return Trainer(config, env, num_updates)
