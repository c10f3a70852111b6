"""IQL: independent Q-learning (Tan, 1993), with deep Q-networks (Tampuu et al., 2017).

Every agent learns Q(o_i, a_i) from its own observations and its own reward
(or the team's, `reward=team`, the common-reward setting of PyMARL/EPyMARL),
treating the other agents as part of the environment. Experience goes into a
replay buffer inside the TrainState; each update acts epsilon-greedily in
`num_envs` environments for `rollout_len` steps, writes them to the buffer and
takes `grad_steps` gradient steps on windows sampled from it, with a target
network, double-Q bootstrap and n-step returns. Agents are feed-forward or
recurrent (a GRU over the observation history, trained on windows with a
stored starting state and an optional burn-in, as in R2D2); one network
shared by all agents (with a one-hot agent id) or one per agent. Illegal
actions are never chosen, neither when acting nor in the max of the target.

This trainer is the Q family's: VDN (`coplay.algos.vdn`) and QMIX
(`coplay.algos.qmix`) change only `team_values`, how the agents' Q-values
become the quantity the TD loss is taken on.

Time limits are treated like terminations (no bootstrap through them), as in
PyMARL and JaxMARL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from coplay.algos.base import Policy, check_env_support
from coplay.algos.common import q_learning as ql
from coplay.algos.common.metrics import episode_metrics
from coplay.algos.common.replay import add_rollout, make_window_buffer, sample_windows
from coplay.algos.common.rollout import Transition, reset_envs, rollout
from coplay.core.config import check, param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.types import TimeStep
from coplay.nets import ACTIVATIONS, init_stacked
from coplay.nets.agent import AgentNet, apply_agents
from coplay.wrappers import AgentID, AutoReset, EpisodeStats

RECURRENT_SEQ_LEN = 20  # trained steps per window when recurrent and seq_len = 0


@dataclass(frozen=True)
class Config:
    lr: float = param(1e-3, "Adam learning rate", min=0.0, min_exclusive=True)
    anneal_lr: bool = param(True, "decay the learning rate linearly to 0 over the run")
    num_envs: int = param(16, "parallel environments per seed", min=1)
    rollout_len: int = param(8, "steps per environment between updates", min=1)
    buffer_size: int = param(50_000, "replay capacity in environment steps, per seed", min=1)
    batch_size: int = param(64, "windows sampled per gradient step", min=1)
    grad_steps: int = param(2, "gradient steps per update", min=1)
    learning_starts: int = param(5_000, "environment steps collected before learning begins", min=0)
    gamma: float = param(0.95, "discount", min=0.0, max=1.0)
    n_step: int = param(1, "steps of reward before bootstrapping (n-step returns)", min=1)
    double_q: bool = param(True, "bootstrap with the target network's value of the online network's best action")
    target_interval: int = param(100, "gradient steps between target-network updates", min=1)
    tau: float = param(1.0, "target update size: 1 = hard copy, < 1 = Polyak averaging", min=0.0, max=1.0,
                       min_exclusive=True)
    eps_start: float = param(1.0, "exploration rate at the start", min=0.0, max=1.0)
    eps_finish: float = param(0.05, "exploration rate after the decay", min=0.0, max=1.0)
    eps_decay: float = param(0.3, "fraction of the run over which exploration decays linearly", min=0.0, max=1.0)
    eval_epsilon: float = param(0.0, "exploration rate when evaluating", min=0.0, max=1.0)
    loss: str = param("mse", "TD loss", choices=("mse", "huber"))
    max_grad_norm: float = param(10.0, "global gradient-norm clip", min=0.0, min_exclusive=True)
    hidden_size: int = param(64, "units per hidden layer", min=1)
    num_layers: int = param(2, "hidden layers (feed-forward); layers around the GRU (recurrent)", min=1)
    activation: str = param("relu", "hidden activation", choices=tuple(ACTIVATIONS))
    recurrent: bool = param(False, "GRU agents over the observation history")
    seq_len: int = param(0, f"steps trained per sampled window; 0 = 1 (feed-forward) or {RECURRENT_SEQ_LEN} "
                            "(recurrent)", min=0)
    burn_in: int = param(0, "steps replayed before a recurrent window to warm its state (no loss on them)", min=0)
    share_params: bool = param(True, "one network for all agents (else one per agent)")
    agent_id: bool = param(True, "append a one-hot agent id to observations when sharing parameters")
    reward: str = param("own", "what each agent learns from: its own reward, or the team's (the mean of all "
                               "agents' rewards, the common-reward setting of value factorisation)",
                        choices=("own", "team"))


@dataclass(frozen=True)
class MixingConfig(Config):
    """The config of the algorithms that mix the agents' values into one team value (VDN, QMIX)."""

    reward: str = param("team", "the team value learns from the team reward (the mean of the agents' rewards)",
                        choices=("team",))


@struct.dataclass
class TrainState:
    params: dict            # {"agent": ..., "mixer": ...} (mixer only for QMIX)
    target_params: dict
    opt_state: Any
    buffer: Any             # flashbax trajectory-buffer state: rows = environments, columns = time
    env_state: Any
    ts: TimeStep            # batched [E, ...]: what the next action is chosen from
    carry: jax.Array        # agents' GRU state [E, N, H] (H = 0 when feed-forward)
    key: jax.Array
    updates: jax.Array
    grad_steps: jax.Array   # gradient steps applied (counts toward target updates)


class Trainer:
    """The Q family's trainer for one seed. `update` is pure; the experiment layer vmaps it over seeds."""

    name = "iql"
    uses_state = False  # whether team_values reads the global state (stored in replay only if so)

    def __init__(self, config: Config, env: Env, num_updates: int):
        check(config, "algo.")
        spec = env.spec
        check_env_support(spec, self.name, continuous=False)
        c = config
        if c.burn_in and not c.recurrent:
            raise ConfigError(f"algo.burn_in={c.burn_in} needs algo.recurrent=true (a feed-forward agent has no "
                              "state to warm up)")
        total = num_updates * steps_per_update(c)
        if c.learning_starts >= total:
            raise ConfigError(f"algo.learning_starts={c.learning_starts} is not below the run's {total} environment "
                              "steps per seed, so nothing would be learned; lower it or raise total_steps")
        self.config = config
        self.train_len = c.seq_len or (RECURRENT_SEQ_LEN if c.recurrent else 1)
        self.burn_in = c.burn_in
        self.window = self.burn_in + self.train_len + c.n_step
        if c.share_params and c.agent_id:
            env = AgentID(env)
        self.env = AutoReset(EpisodeStats(env))
        self.num_agents = spec.num_agents
        self.num_actions = spec.num_actions
        self.steps_per_update = steps_per_update(c)
        self.num_updates = num_updates
        self.net = AgentNet(spec.num_actions, c.hidden_size, c.num_layers, c.activation, c.recurrent,
                            head_scale=1.0)
        self.carry_size = c.hidden_size if c.recurrent else 0
        lr = optax.linear_schedule(c.lr, 0.0, max(num_updates * c.grad_steps, 1)) if c.anneal_lr else c.lr
        self.optimizer = optax.chain(optax.clip_by_global_norm(c.max_grad_norm), optax.adam(lr))
        self.epsilon = ql.epsilon_schedule(c.eps_start, c.eps_finish,
                                           c.eps_decay * num_updates * self.steps_per_update)
        self.buffer = make_window_buffer(c.num_envs, c.buffer_size, self.window, c.batch_size,
                                         min_steps=math.ceil(c.learning_starts / c.num_envs))

    # ----- what the TD loss is taken on ------------------------------------------------------
    mixes = False  # VDN and QMIX learn a team value; IQL learns each agent's own

    def mix(self, mixer_params, q: jax.Array, state: jax.Array | None) -> jax.Array:
        """The team value from the agents' values: q [T, B, N] -> [T, B]."""
        raise NotImplementedError

    def team_values(self, params, target_params, q_taken, next_value, w: dict, n: int):
        """What the TD loss is taken on, from q_taken and next_value [T, B, N].
        Returns (prediction, bootstrap, reward [L, B, ...], weight [T, B, ...]).

        IQL: every agent's own TD problem on its own reward (or, with
        reward=team, on the team reward). Mixing algorithms:
        one TD problem on the team value and the team reward (the mean of the
        agents' rewards, the per-agent scale coplay reports); inactive agents
        enter the mix as zeros."""
        t = q_taken.shape[0]
        team_reward = jnp.mean(w["reward"], axis=-1)
        if not self.mixes:
            reward = w["reward"] if self.config.reward == "own" else jnp.broadcast_to(team_reward[..., None],
                                                                                       w["reward"].shape)
            return q_taken, next_value, reward, w["active"][:t]
        active = w["active"].astype(q_taken.dtype)
        state = w.get("global_state")
        prediction = self.mix(params["mixer"], q_taken * active[:t], None if state is None else state[:t])
        bootstrap = self.mix(target_params["mixer"], next_value * active[n:n + t],
                             None if state is None else state[n:n + t])
        return prediction, bootstrap, team_reward, jnp.any(w["active"][:t], axis=-1)

    def init_mixer(self, key: jax.Array, global_state: jax.Array) -> dict:
        return {}

    # ----- networks ----------------------------------------------------------------------------
    def initial_carry(self, batch: tuple[int, ...]) -> jax.Array:
        return jnp.zeros((*batch, self.num_agents, self.carry_size), jnp.float32)

    def q_values(self, agent_params, carry, obs, reset):
        """obs: [B, N, ...]; carry: [B, N, H]; reset: [B] -> (carry, Q [B, N, A])."""
        obs = obs.reshape(*obs.shape[:2], -1)
        return apply_agents(self.net, agent_params, carry, obs, reset, self.config.share_params)

    # ----- initialisation (one seed, outside vmap) ------------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        k_net, k_mix, k_env, k_state = jax.random.split(key, 4)
        env_state, ts = reset_envs(self.env, k_env, self.config.num_envs)
        obs = ts.obs[0].reshape(self.num_agents, -1)
        carry, reset = jnp.zeros((1, self.carry_size)), jnp.zeros((1,), bool)
        init_one = lambda k: self.net.init(k, carry, obs[:1], reset)  # noqa: E731
        if self.config.share_params:
            agent = init_one(k_net)
        else:
            agent = init_stacked(init_one, jax.random.split(k_net, self.num_agents))
        params = {"agent": agent, "mixer": self.init_mixer(k_mix, ts.global_state[:1])}
        first = jax.tree.map(lambda x: x[0], ts)
        example = self._item(first, jnp.zeros(self.num_agents, jnp.int32), first.reward, first.done,
                             self.initial_carry(()))
        return TrainState(
            params=params, target_params=params, opt_state=self.optimizer.init(params),
            buffer=self.buffer.init(example), env_state=env_state, ts=ts,
            carry=self.initial_carry((self.config.num_envs,)), key=k_state,
            updates=jnp.zeros((), jnp.int32), grad_steps=jnp.zeros((), jnp.int32),
        )

    def _item(self, ts: TimeStep, action, reward, done, carry) -> dict:
        """What one step stores in replay."""
        item = {"obs": ts.obs, "action_mask": ts.action_mask, "active": ts.active, "action": action,
                "reward": reward.astype(jnp.float32), "done": done, "reset": ts.done}
        if self.uses_state:
            item["global_state"] = ts.global_state
        if self.config.recurrent:
            item["carry"] = carry
        return item

    # ----- acting -----------------------------------------------------------------------------
    def policy(self) -> Policy:
        eps = self.config.eval_epsilon

        def act(params, obs, mask, key, carry, reset):
            carry, q = self.q_values(params, carry, obs, reset)
            return ql.epsilon_greedy(key, q, mask, eps), carry

        return Policy(act=act, initial_carry=self.initial_carry, env=self.env)

    def policy_params(self, state: TrainState) -> Any:
        return state.params["agent"]

    # ----- learning -----------------------------------------------------------------------------
    def _unroll(self, agent_params, w: dict) -> jax.Array:
        """Q-values [L - burn_in, B, N, A] for a window w ([L, B, ...])."""
        if not self.config.recurrent:
            length, b = w["obs"].shape[:2]
            obs = w["obs"].reshape(length * b, *w["obs"].shape[2:])
            carry, reset = self.initial_carry((length * b,)), jnp.zeros((length * b,), bool)
            _, q = self.q_values(agent_params, carry, obs, reset)
            return q.reshape(length, b, *q.shape[1:])

        def step(params):
            def body(carry, x):
                return self.q_values(params, carry, x["obs"], x["reset"])
            return body

        xs = {"obs": w["obs"], "reset": w["reset"]}
        carry = w["carry"][0]
        if self.burn_in:
            head = jax.tree.map(lambda x: x[:self.burn_in], xs)
            carry, _ = jax.lax.scan(step(jax.lax.stop_gradient(agent_params)), carry, head)
            carry = jax.lax.stop_gradient(carry)
            xs = jax.tree.map(lambda x: x[self.burn_in:], xs)
        _, q = jax.lax.scan(step(agent_params), carry, xs)
        return q

    def _loss(self, params, target_params, w: dict):
        c = self.config
        t, n = self.train_len, c.n_step
        q = self._unroll(params["agent"], w)
        q_target = self._unroll(target_params["agent"], w)
        w = {k: v[self.burn_in:] for k, v in w.items()}
        q_taken = ql.chosen(q[:t], w["action"][:t])                                          # [T, B, N]
        next_value = ql.bootstrap_value(q[n:n + t], q_target[n:n + t], w["action_mask"][n:n + t], c.double_q)
        prediction, bootstrap, reward, weight = self.team_values(params, target_params, q_taken, next_value, w, n)
        target = ql.n_step_targets(reward, w["done"], bootstrap, c.gamma, n)
        loss = ql.td_loss(prediction, target, weight, c.loss)
        return loss, {"q_taken": jnp.mean(q_taken), "q_target": jnp.mean(target)}

    def update(self, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        c = self.config
        key, k_roll, k_learn = jax.random.split(state.key, 3)
        epsilon = self.epsilon(state.updates * self.steps_per_update)

        def act(carry, ts, k):
            new_carry, q = self.q_values(state.params["agent"], carry, ts.obs, ts.done)
            return new_carry, ql.epsilon_greedy(k, q, ts.action_mask, epsilon), {"carry": carry}

        (env_state, ts, carry), traj = rollout(self.env, act, state.env_state, state.ts, state.carry, k_roll,
                                               c.rollout_len)
        buffer = add_rollout(self.buffer, state.buffer, self._items(traj))
        ready = self.buffer.can_sample(buffer)

        def grad_step(carry, k):
            params, target_params, opt_state, count = carry
            w = sample_windows(self.buffer, buffer, k)
            (loss, stats), grads = jax.value_and_grad(self._loss, has_aux=True)(params, target_params, w)
            updates, new_opt_state = self.optimizer.update(grads, opt_state, params)
            new_params = optax.apply_updates(params, updates)
            new_target = ql.update_target(new_params, target_params, count + 1, c.target_interval, c.tau)
            # Until the buffer holds learning_starts steps, the step is computed and discarded.
            keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ready, a, b), new, old)  # noqa: E731
            carry = (keep(new_params, params), keep(new_target, target_params), keep(new_opt_state, opt_state),
                     jnp.where(ready, count + 1, count))
            return carry, {"loss/td": loss, "grad_norm": optax.tree.norm(grads), **stats}

        (params, target_params, opt_state, count), stats = jax.lax.scan(
            grad_step, (state.params, state.target_params, state.opt_state, state.grad_steps),
            jax.random.split(k_learn, c.grad_steps))
        metrics = {k: v.mean() for k, v in stats.items()}
        metrics.update(episode_metrics(traj.info))
        metrics["epsilon"] = epsilon
        metrics["learning"] = ready.astype(jnp.float32)
        new_state = TrainState(params=params, target_params=target_params, opt_state=opt_state, buffer=buffer,
                               env_state=env_state, ts=ts, carry=carry, key=key, updates=state.updates + 1,
                               grad_steps=count)
        return new_state, metrics

    def _items(self, traj: Transition) -> dict:
        return self._item(traj.ts, traj.action, traj.reward, traj.done, traj.extras["carry"])


def steps_per_update(config: Config) -> int:
    return config.num_envs * config.rollout_len


def make_trainer(config: Config, env: Env, num_updates: int) -> Trainer:
    return Trainer(config, env, num_updates)
