"""The Q family's trainer: what IQL, VDN and QMIX share, written once.

Experience goes into a replay buffer inside the TrainState; each update acts
epsilon-greedily in `num_envs` environments for `rollout_len` steps, writes
them to the buffer and takes `grad_steps` gradient steps on windows sampled
from it, with a target network, double-Q bootstrap and n-step returns. Agents
are feed-forward or recurrent (a GRU over the observation history, trained on
windows with a stored starting state and an optional burn-in, as in R2D2); one
network shared by all agents (with a one-hot agent id) or one per agent.
Illegal actions are never chosen, neither when acting nor in the max of the
target.

What differs between the algorithms is the loss, what the TD error is taken
on, and each algorithm's file states it (`coplay.algos.iql`, `vdn`, `qmix`):
a subclass of `QLearner` implements `loss`, starting from `td_inputs`.

Three layers, so that learning from a dataset shares all but the replay:
`AgentLearner` (the agents' network, acting, gradient steps on windows; what
behaviour cloning needs), `QFamily` (TD inputs, n-step bootstrap, the target
network) and `QLearner` (acting in the environment, replay, exploration). The
offline trainers (`coplay.algos.common.offline`) sit on the first two.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import optax
from flax import struct

from coplay.algos.base import Capabilities, Health, Trainer, per_env
from coplay.algos.common import q_learning as ql
from coplay.algos.common.metrics import episode_metrics
from coplay.algos.common.q_learning import QConfig
from coplay.algos.common.replay import add_rollout, make_window_buffer, sample_windows
from coplay.algos.common.rollout import Transition, acting_env, reset_envs, rollout
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.core.types import TimeStep
from coplay.nets import init_stacked
from coplay.nets.agent import AgentNet, apply_agents


@struct.dataclass
class TrainState:
    params: dict            # {"agent": ..., "mixer": ...} (mixer only for QMIX)
    target_params: dict
    opt_state: Any
    key: jax.Array
    updates: jax.Array
    grad_steps: jax.Array   # gradient steps applied (counts toward target updates)
    # flashbax trajectory-buffer state: rows = environments, columns = time
    buffer: Any = per_env(lambda b: b.replace(experience=True, current_index=False, is_full=False))
    env_state: Any = per_env()
    ts: TimeStep = per_env()            # batched [E, ...]: what the next action is chosen from
    carry: jax.Array = per_env()        # agents' GRU state [E, N, H] (H = 0 when feed-forward)


QC = TypeVar("QC", bound=QConfig)
NC = TypeVar("NC", bound=ql.NetConfig)
LC = TypeVar("LC", bound=ql.QLearnConfig)


class AgentLearner(Trainer[NC]):
    """What every learner of the agents' network on sampled windows has, whether it
    acts (`QLearner`) or learns from a dataset (`coplay.algos.common.offline`): the
    network (its outputs are Q-values, or logits for behaviour cloning), the
    optimiser, acting greedily on legal actions, and gradient steps on a loss.
    A subclass gives `loss`."""

    capabilities = Capabilities(recurrent=True)
    loss_name = "loss/td"      # the metric the loss is logged as

    def __init__(self, config: NC, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        spec = env.spec
        c = config
        if c.burn_in and not c.recurrent:
            raise ConfigError(f"algo.burn_in={c.burn_in} needs algo.recurrent=true (a feed-forward agent has no "
                              "state to warm up)")
        self.train_len = c.seq_len or (ql.RECURRENT_SEQ_LEN if c.recurrent else 1)
        self.burn_in = c.burn_in
        self.window = self.burn_in + self.train_len + self.lookahead()
        self.env = self.wrap(env)
        self.num_agents = spec.num_agents
        self.num_actions = spec.num_actions
        self.net = AgentNet(spec.num_actions, c.hidden_size, c.num_layers, c.activation, c.recurrent,
                            head_scale=1.0)
        self.carry_size = c.hidden_size if c.recurrent else 0
        lr = optax.linear_schedule(c.lr, 0.0, max(num_updates * c.grad_steps, 1)) if c.anneal_lr else c.lr
        self.optimizer = optax.chain(optax.clip_by_global_norm(c.max_grad_norm), optax.adam(lr))

    def lookahead(self) -> int:
        """Steps a window reaches past its trained ones (a TD target's bootstrap)."""
        return 0

    def next_target(self, params: dict, target_params: dict, count: jax.Array) -> dict:
        """The target network after gradient step `count` (none to keep by default)."""
        return target_params

    def initial_target(self, params: dict) -> dict:
        """The target network at the start: none by default, a copy where one is kept."""
        return {}

    def wrap(self, env: Env) -> Env:
        """The environment as the trainer steps it (`rollout.acting_env`)."""
        return acting_env(env, self.config.share_params and self.config.agent_id)

    # ----- what the algorithm gives ---------------------------------------------------------
    @abc.abstractmethod
    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        """The loss of a sampled window w ([L, B, ...], burn-in included), and a dict
        of scalar statistics. `td_inputs` gives the agents' Q-values a TD loss starts from."""

    def init_mixer(self, key: jax.Array, global_state: jax.Array) -> Any:
        """Parameters of a mixing network (none by default); global_state: [1, ...]."""
        return {}

    # ----- networks ----------------------------------------------------------------------------
    def initial_carry(self, batch: tuple[int, ...]) -> jax.Array:
        return jnp.zeros((*batch, self.num_agents, self.carry_size), jnp.float32)

    def acting_q(self, q: jax.Array, obs: jax.Array) -> jax.Array:
        """`[B, N, A]`: the Q-values actions are chosen by, from `q_values`' (the same here;
        a trainer of several objectives scalarises its vectors)."""
        return q

    def q_values(self, agent_params, carry, obs, reset):
        """obs: [B, N, ...]; carry: [B, N, H]; reset: [B] -> (carry, Q [B, N, A])."""
        obs = obs.reshape(*obs.shape[:2], -1)
        return apply_agents(self.net, agent_params, carry, obs, reset, self.config.share_params)

    # ----- initialisation (one seed, outside vmap) ------------------------------------------
    def init_params(self, k_net: jax.Array, k_mix: jax.Array, ts: TimeStep) -> dict:
        """`{"agent", "mixer"}` for observations and global state shaped like `ts`'s ([E, N, ...])."""
        obs = ts.obs[0].reshape(self.num_agents, -1)
        carry, reset = jnp.zeros((1, self.carry_size)), jnp.zeros((1,), bool)
        init_one = lambda k: self.net.init(k, carry, obs[:1], reset)  # noqa: E731
        if self.config.share_params:
            agent = init_one(k_net)
        else:
            agent = init_stacked(init_one, jax.random.split(k_net, self.num_agents))
        return {"agent": agent, "mixer": self.init_mixer(k_mix, ts.global_state[:1])}

    # ----- acting -----------------------------------------------------------------------------
    def policy(self) -> Policy:
        eps = self.config.eval_epsilon

        def act(params, obs, mask, key, carry, reset):
            carry, q = self.q_values(params, carry, obs, reset)
            return ql.epsilon_greedy(key, self.acting_q(q, obs), mask, eps), carry

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

    def learn(self, params: dict, target_params: dict, opt_state: Any, count: jax.Array,
              sample: Callable[[jax.Array], dict], keys: jax.Array, ready: jax.Array | bool = True):
        """One gradient step on `loss` per key, each on a window `sample(key)`, with the
        target network moved every `target_interval` steps. While not `ready` (a replay
        buffer short of `learning_starts`) each step is computed and discarded.
        Returns ((params, target_params, opt_state, count), statistics [steps])."""

        def grad_step(carry, k):
            params, target_params, opt_state, count = carry
            w = sample(k)
            (loss, stats), grads = jax.value_and_grad(self.loss, has_aux=True)(params, target_params, w)
            updates, new_opt_state = self.optimizer.update(grads, opt_state, params)
            new_params = optax.apply_updates(params, updates)
            new_target = self.next_target(new_params, target_params, count + 1)
            keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ready, a, b), new, old)  # noqa: E731
            carry = (keep(new_params, params), keep(new_target, target_params), keep(new_opt_state, opt_state),
                     jnp.where(ready, count + 1, count))
            return carry, {self.loss_name: loss, "grad_norm": optax.tree.norm(grads), **stats}

        return jax.lax.scan(grad_step, (params, target_params, opt_state, count), keys)


class QFamily(AgentLearner[LC]):
    """What every Q-value learner has, online or offline: TD inputs from a window,
    with n-step bootstrap and a target network. A subclass gives `loss`."""

    def health(self) -> Health:
        """A TD loss that does not grow 10,000-fold."""
        return Health(steady=("loss/td",))

    def lookahead(self) -> int:
        return self.config.n_step

    def initial_target(self, params: dict) -> dict:
        return params

    def next_target(self, params: dict, target_params: dict, count: jax.Array) -> dict:
        return ql.update_target(params, target_params, count, self.config.target_interval, self.config.tau)

    def td_inputs(self, params: dict, target_params: dict, w: dict[str, jax.Array]):
        """From a window w ([L, B, ...]): each agent's Q of the action taken, q_taken
        [T, B, N], and its bootstrap value n steps later, next_value [T, B, N]
        (double Q or the target's max over legal actions: `q_learning.bootstrap_value`),
        with the window less its burn-in ([L - burn_in, B, ...])."""
        _, q_taken, next_value, w = self.td_parts(params, target_params, w)
        return q_taken, next_value, w

    def td_parts(self, params: dict, target_params: dict, w: dict[str, jax.Array]):
        """`td_inputs`, led by the agents' Q-values of every action, q [T, B, N, A]
        (what a conservative penalty reads)."""
        c = self.config
        t, n = self.train_len, c.n_step
        q = self._unroll(params["agent"], w)
        q_target = self._unroll(target_params["agent"], w)
        w = {k: v[self.burn_in:] for k, v in w.items()}
        q_taken = ql.chosen(q[:t], w["action"][:t])
        next_value = self.bootstrap(q[n:n + t], q_target[n:n + t], w["action_mask"][n:n + t])
        return q[:t], q_taken, next_value, w

    def bootstrap(self, q_online: jax.Array, q_target: jax.Array, mask: jax.Array) -> jax.Array:
        """A next state's value from its Q-values [..., A] (online and target network's):
        the greedy policy's (`q_learning.bootstrap_value`)."""
        return ql.bootstrap_value(q_online, q_target, mask, self.config.double_q)


class QLearner(QFamily[QC]):
    """The Q family's trainer for one seed; `update` is pure and the experiment
    layer vmaps it over seeds. A subclass is an algorithm: it gives `loss`, and
    where it has a mixer, `init_mixer` and the replay fields the mixer reads."""

    config_class = QConfig

    def __init__(self, config: QC, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        c = config
        total = num_updates * c.steps_per_update
        if c.learning_starts >= total:
            raise ConfigError(f"algo.learning_starts={c.learning_starts} is not below the run's {total} environment "
                              "steps per seed, so nothing would be learned; lower it or raise total_steps")
        self.epsilon = ql.epsilon_schedule(c.eps_start, c.eps_finish,
                                           c.eps_decay * num_updates * self.steps_per_update)
        self.buffer = make_window_buffer(c.num_envs, c.buffer_size, self.window, c.batch_size,
                                         min_steps=math.ceil(c.learning_starts / c.num_envs))

    def replay_item(self, ts: TimeStep, action: jax.Array, reward: jax.Array, done: jax.Array,
                    carry: jax.Array) -> dict[str, jax.Array]:
        """What one step stores in replay (a mixer that reads the state adds `global_state`)."""
        item = {"obs": ts.obs, "action_mask": ts.action_mask, "active": ts.active, "action": action,
                "reward": reward.astype(jnp.float32), "done": done, "reset": ts.done}
        if self.config.recurrent:
            item["carry"] = carry
        return item

    def init(self, key: jax.Array) -> TrainState:
        k_net, k_mix, k_env, k_state = jax.random.split(key, 4)
        env_state, ts = reset_envs(self.env, k_env, self.config.num_envs)
        params = self.init_params(k_net, k_mix, ts)
        first = jax.tree.map(lambda x: x[0], ts)
        example = self.replay_item(first, jnp.zeros(self.num_agents, jnp.int32), first.reward, first.done,
                                   self.initial_carry(()))
        return TrainState(
            params=params, target_params=self.initial_target(params), opt_state=self.optimizer.init(params),
            buffer=self.buffer.init(example), env_state=env_state, ts=ts,
            carry=self.initial_carry((self.config.num_envs,)), key=k_state,
            updates=jnp.zeros((), jnp.int32), grad_steps=jnp.zeros((), jnp.int32),
        )

    def update(self, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        c = self.config
        key, k_roll, k_learn = jax.random.split(state.key, 3)
        epsilon = self.epsilon(state.updates * self.steps_per_update)

        def act(carry, ts, k):
            new_carry, q = self.q_values(state.params["agent"], carry, ts.obs, ts.done)
            return new_carry, ql.epsilon_greedy(k, self.acting_q(q, ts.obs), ts.action_mask, epsilon), {"carry": carry}

        (env_state, ts, carry), traj = rollout(self.env, act, state.env_state, state.ts, state.carry, k_roll,
                                               c.rollout_len)
        buffer = add_rollout(self.buffer, state.buffer, self._items(traj))
        ready = self.buffer.can_sample(buffer)
        (params, target_params, opt_state, count), stats = self.learn(
            state.params, state.target_params, state.opt_state, state.grad_steps,
            lambda k: sample_windows(self.buffer, buffer, k), jax.random.split(k_learn, c.grad_steps), ready)
        metrics = {k: v.mean() for k, v in stats.items()}
        metrics.update(episode_metrics(traj.info))
        metrics["epsilon"] = epsilon
        metrics["learning"] = ready.astype(jnp.float32)
        new_state = TrainState(params=params, target_params=target_params, opt_state=opt_state, buffer=buffer,
                               env_state=env_state, ts=ts, carry=carry, key=key, updates=state.updates + 1,
                               grad_steps=count)
        return new_state, metrics

    def _items(self, traj: Transition) -> dict:
        return self.replay_item(traj.ts, traj.action, traj.reward, traj.done, traj.extras["carry"])

