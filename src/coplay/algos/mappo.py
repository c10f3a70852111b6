"""MAPPO: multi-agent PPO with a centralised critic (Yu et al., 2022).

Each agent acts from its own observation; the critic scores each agent from
the environment's `global_state` plus the agent's one-hot id. IPPO
(`coplay.algos.ippo`) is the same trainer with a critic that sees only the
agent's own observation. Feed-forward or recurrent (GRU) networks, one network
shared by all agents or one per agent. Discrete actions (a categorical that
never samples an illegal action of the `action_mask`) or continuous ones (a
diagonal Gaussian; the environment clips to its bounds). Inactive agents (the
`active` mask) contribute nothing to the loss.

The objective is PPO's clipped surrogate with a value loss and an entropy
bonus (`coplay.algos.common.ppo.objective`), advantages from GAE (Schulman et
al., 2016):

    A_t = sum_k (gamma lambda)^k delta_{t+k},  delta_t = r_t + gamma V(s_{t+1}) (1 - done_t) - V(s_t)

Truncated episodes are treated like terminated ones when computing advantages
(no bootstrap through the time limit), as in the reference MAPPO and JaxMARL
implementations, so returns stay comparable with theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from coplay.algos.base import Capabilities, Health, Trainer, per_env
from coplay.algos.common import ppo
from coplay.algos.common.advantages import gae
from coplay.algos.common.metrics import episode_metrics
from coplay.algos.common.minibatch import shuffle_split
from coplay.algos.common.rollout import Transition, acting_env, reset_envs, rollout
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.core.types import TimeStep
from coplay.nets import distributions, init_stacked
from coplay.nets.agent import AgentNet, apply_agents, choose_torso


@dataclass(frozen=True)
class Config(ppo.PPOConfig):
    recurrent: bool = param(False, "GRU actor and critic over the observation history")
    share_params: bool = param(True, "one network for all agents (else one per agent)")
    agent_id: bool = param(True, "append a one-hot agent id to observations when sharing parameters")
    shaped_reward: str = param("", "an info entry ([N] per step) added to the reward the policy learns from, "
                               "weighted 1 at first and annealed by algo.shaping_steps (Overcooked's "
                               "shaped_reward); returns and metrics stay the environment's reward")
    shaping_steps: int = param(0, "env steps per seed over which the shaped reward's weight falls linearly "
                               "from 1 to 0 (0: weight 1 throughout)", min=0)


@struct.dataclass
class TrainState:
    params: dict
    opt_state: Any
    key: jax.Array
    updates: jax.Array
    env_state: Any = per_env()
    ts: TimeStep = per_env()   # batched [E, ...]: what the next action is chosen from
    carry: tuple = per_env()   # (actor, critic) GRU carries [E, N, H] (H = 0 when feed-forward)


class MAPPO(Trainer[Config]):
    """MAPPO for one seed. `update` is pure; the experiment layer vmaps it over seeds."""

    name = "mappo"
    config_class = Config
    capabilities = Capabilities(continuous_actions=True, needs_global_state=True, recurrent=True)

    def __init__(self, config: Config, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        spec = env.spec
        c = config
        batch = c.num_envs if c.recurrent else c.num_envs * c.rollout_len
        unit = "num_envs" if c.recurrent else "num_envs * rollout_len"
        if batch % c.minibatches:
            raise ConfigError(f"algo.minibatches={c.minibatches} must divide {unit} = {batch}")
        self.env = self.wrap(env)
        self.num_agents = spec.num_agents
        self.dist = (distributions.Categorical() if spec.discrete_actions
                     else distributions.DiagGaussian(int(np.prod(spec.action_space.shape))))
        self.torso = choose_torso(c.torso, spec.obs_space.shape)     # refused before anything compiles
        self.actor = AgentNet(self.dist.outputs(spec.num_actions), c.hidden_size, c.num_layers, c.activation,
                              c.recurrent, torso=self.torso)
        self.critic = AgentNet(0, c.hidden_size, c.num_layers, c.activation, c.recurrent, torso=self.critic_torso())
        self.carry_size = c.hidden_size if c.recurrent else 0
        if c.shaped_reward:
            self._check_shaped_reward(c.shaped_reward)
        # Actor and critic are clipped and stepped apart: with one global clip, the
        # critic's large early gradients (returns of tens) would shrink the policy's step.
        self.optimizer = optax.multi_transform(
            {"actor": ppo.adam(c, num_updates), "critic": ppo.adam(c, num_updates)},
            {"actor": "actor", "critic": "critic"})

    def wrap(self, env: Env) -> Env:
        """The environment as the trainer steps it: agent ids (when one network serves every
        agent), episode statistics, and auto-reset."""
        return acting_env(env, self.config.share_params and self.config.agent_id)

    def _check_shaped_reward(self, key: str) -> None:
        """Refuse, before anything compiles, an `algo.shaped_reward` the environment's info lacks
        or whose entries are not one number per agent."""
        info = jax.eval_shape(self.env.reset, jax.random.PRNGKey(0))[1].info
        own = sorted(k for k in info if not k.startswith("episode/"))
        if key not in own:
            raise ConfigError(f"algo.shaped_reward={key!r} is not an info entry of {self.env.spec.name}; "
                              f"its entries: {', '.join(own) or '(none)'}")
        if tuple(info[key].shape) != (self.num_agents,):
            raise ConfigError(f"algo.shaped_reward={key!r} has shape {tuple(info[key].shape)}; a shaped reward "
                              f"is one number per agent, shape ({self.num_agents},)")

    def shaping_weight(self, updates: jax.Array) -> jax.Array:
        """The shaped reward's weight in the update after `updates` updates: 1 - steps / shaping_steps,
        at least 0, where steps are the env steps per seed before the update's rollout (as
        JaxMARL's Overcooked baselines anneal REW_SHAPING_HORIZON)."""
        c = self.config
        if not c.shaping_steps:
            return jnp.ones(())
        steps = updates.astype(jnp.float32) * c.steps_per_update
        return jnp.clip(1.0 - steps / c.shaping_steps, 0.0, 1.0)

    # ----- inputs -------------------------------------------------------------------------
    def critic_torso(self) -> str:
        """What the critic reads its input with: the global state is flat (the MLP); a critic
        of the agent's own observation (IPPO's) reads it as the actor does."""
        return "mlp"

    def critic_input(self, ts: TimeStep) -> jax.Array:
        """[B, N, D]: the global state with the agent's one-hot id."""
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
        obs = ts.obs[0]     # [N, ...]: each agent's observation in its own shape (an image stays one)
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

    def health(self) -> Health:
        return ppo.health(self.config, self.env.spec)

    def policy(self) -> Policy:
        greedy = self.config.greedy_eval

        def act(params, obs, mask, key, carry, reset):
            carry, logits = apply_agents(self.actor, params, carry, obs, reset, self.config.share_params)
            logits = self.dist.prepare(logits, mask)
            action = self.dist.mode(logits) if greedy else self.dist.sample(key, logits)
            return action, carry

        def probs(params, obs, mask, carry, reset):
            carry, logits = apply_agents(self.actor, params, carry, obs, reset, self.config.share_params)
            return jax.nn.softmax(self.dist.prepare(logits, mask), axis=-1), carry

        categorical = isinstance(self.dist, distributions.Categorical) and not greedy
        return Policy(act=act, initial_carry=self.initial_carry, env=self.env, probs=probs if categorical else None)

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
        logits, values = self._forward(params, mb)
        logits = self.dist.prepare(logits, mb["action_mask"])
        return ppo.objective(self.dist, logits, values, mb, self.config, mb["active"], mb["active"])

    def update(self, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        return self.learn(state, lambda traj: traj.reward)

    def learn(self, state: TrainState, scalar_reward: Callable[[Transition], jax.Array],
              ) -> tuple[TrainState, dict[str, jax.Array]]:
        """`update`, with the rewards the advantages are computed from given by
        `scalar_reward(traj)`, `[T, E, N]` from the rollout (the weight sweep,
        `coplay.algos.mo_ppo`, passes the utility of a vector reward under one weight), plus
        the annealed `algo.shaped_reward` where one is named."""
        c = self.config
        key, k_roll, k_epochs = jax.random.split(state.key, 3)
        carry0 = state.carry
        (env_state, ts, carry), traj, batch = self.collect(state, scalar_reward, k_roll)
        split: ppo.SplitFn
        if c.recurrent:  # minibatches of whole environment sequences, each with its starting carries
            batch["actor_carry0"], batch["critic_carry0"] = carry0
            split = self._split_sequences
        else:
            split = ppo.shuffled(c.minibatches)
        params, opt_state, metrics = ppo.train_epochs(k_epochs, self._loss, self.optimizer, state.params,
                                                      state.opt_state, batch, c.epochs, split)
        metrics.update(episode_metrics(traj.info))
        new_state = TrainState(params=params, opt_state=opt_state, env_state=env_state, ts=ts, carry=carry,
                               key=key, updates=state.updates + 1)
        return new_state, metrics

    def collect(self, state: TrainState, scalar_reward: Callable[[Transition], jax.Array], key: jax.Array,
                ) -> tuple[tuple[Any, TimeStep, tuple], Transition, dict]:
        """One rollout from `state` and its training batch (`_batch`: advantages and value targets
        of `scalar_reward(traj)`, plus the annealed `algo.shaped_reward`). Returns the final
        (env_state, ts, carries), the trajectory and the batch."""
        c = self.config
        act = lambda carry, ts, k: self._act(state.params, carry, ts, k)  # noqa: E731
        (env_state, ts, carry), traj = rollout(self.env, act, state.env_state, state.ts, state.carry, key,
                                               c.rollout_len)
        _, last_value = apply_agents(self.critic, state.params["critic"], carry[1], self.critic_input(ts),
                                     ts.done, c.share_params)
        reward = scalar_reward(traj)
        if c.shaped_reward:
            reward = reward + self.shaping_weight(state.updates) * traj.info[c.shaped_reward]
        adv, target = self.advantages(traj, reward, last_value)
        return (env_state, ts, carry), traj, self._batch(traj, adv, target)

    def advantages(self, traj: Transition, reward: jax.Array, last_value: jax.Array) -> tuple[jax.Array, jax.Array]:
        """GAE advantages and value targets `[T, E, N]` of the rollout's `reward`."""
        return gae(reward, traj.extras["value"], traj.done[..., None], last_value, self.config.gamma,
                   self.config.gae_lambda)

    def _split_sequences(self, key: jax.Array, batch: dict) -> dict:
        """Recurrent minibatches: sequences [T, E, ...] split along E, with their carries [E, ...]."""
        m = self.config.minibatches
        seq = {k: v for k, v in batch.items() if not k.endswith("carry0")}
        carries = {k: v for k, v in batch.items() if k.endswith("carry0")}
        return {**shuffle_split(key, seq, m, axis=1), **shuffle_split(key, carries, m, axis=0)}

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
