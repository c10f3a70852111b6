"""The Q loop: what IQL, VDN, QMIX and the offline learners share, written once.

One trainer, `QLoop`, composed of three parts that its config and its algorithm
choose; an algorithm is a config and a loss:

    a data source   `Replay` (a `QConfig`: act epsilon-greedily in `num_envs`
                    environments for `rollout_len` steps, write them to a replay
                    buffer in the TrainState) or `DatasetWindows` (an `OfflineConfig`:
                    windows of the run's dataset, `coplay.algos.common.offline`)
    an acting rule  the legal action of the largest output (epsilon-greedy with
                    `eval_epsilon`), or with `algo.acting=sample` a draw from the
                    softmax of the outputs over the legal actions
    a loss          `QLoop.loss`, from the window's TD inputs (`td_parts`,
                    `independent_parts`, `team_parts`): each algorithm's file states it

Each update takes `grad_steps` gradient steps on windows from the source. A
config that learns Q-values (`QLearnConfig`) adds a target network, double-Q
bootstrap and n-step returns; one that does not (behaviour cloning) trains the
same network's outputs as logits. Agents are feed-forward or recurrent (a GRU
over the observation history, trained on windows with a stored starting state
and an optional burn-in, as in R2D2); one network shared by all agents (with a
one-hot agent id) or one per agent. Illegal actions are never chosen, neither
when acting nor in the max of the target.

What an algorithm may declare besides its loss: a team value's mixer
(`mixer_kind`), networks beside the agents' (`extra_networks`, e.g. a policy or
a behaviour model, each shaped like the agents'), and which of them the trained
agents act with (`acting_network`).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import optax
from flax import struct

from coplay.algos.base import Capabilities, Health, Trainer, per_env
from coplay.algos.common import q_learning as ql
from coplay.algos.common.metrics import episode_metrics
from coplay.algos.common.mixing import Mixing
from coplay.algos.common.offline import DatasetWindows, OfflineConfig
from coplay.algos.common.q_learning import QConfig, QLearnConfig
from coplay.algos.common.replay import add_rollout, make_window_buffer, sample_windows
from coplay.algos.common.rollout import Transition, acting_env, reset_envs, rollout
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.core.types import TimeStep
from coplay.nets import distributions, init_stacked
from coplay.nets.agent import AgentNet, apply_agents, choose_torso


@struct.dataclass
class TrainState:
    """An acting Q-learner's state (`Replay`)."""

    params: dict            # {"agent": ..., "mixer": ..., and any extra networks}
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


class QLoop(Trainer[Any]):
    """The Q loop for one seed (see the module's doc); `update` is pure and the
    experiment layer vmaps it over seeds. A subclass is an algorithm: its name, its
    config and `loss`."""

    capabilities = Capabilities(recurrent=True)
    loss_name: ClassVar[str] = "loss/td"      # the metric the loss is logged as

    def __init__(self, config: Any, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        spec, c = env.spec, config
        if c.burn_in and not c.recurrent:
            raise ConfigError(f"algo.burn_in={c.burn_in} needs algo.recurrent=true (a feed-forward agent has no "
                              "state to warm up)")
        self.offline = isinstance(c, OfflineConfig)
        if self.offline and c.acting == "sample" and c.eval_epsilon > 0:
            raise ConfigError(f"algo.eval_epsilon={c.eval_epsilon} is for algo.acting=greedy: with "
                              "algo.acting=sample the agents already draw their actions (set one of them)")
        self.td = isinstance(c, QLearnConfig)     # Q-values with TD targets (else logits: behaviour cloning)
        self.train_len = c.seq_len or (ql.RECURRENT_SEQ_LEN if c.recurrent else 1)
        self.burn_in = c.burn_in
        self.window = self.burn_in + self.train_len + (c.n_step if self.td else 0)
        self.env = self.wrap(env)
        self.num_agents = spec.num_agents
        self.num_actions = spec.num_actions
        self.torso = choose_torso(c.torso, spec.obs_space.shape)     # refused before anything compiles
        self.net = AgentNet(self.net_outputs(spec.num_actions), c.hidden_size, c.num_layers, c.activation,
                            c.recurrent, head_scale=1.0, torso=self.torso)
        self.carry_size = c.hidden_size if c.recurrent else 0
        lr = optax.linear_schedule(c.lr, 0.0, max(num_updates * c.grad_steps, 1)) if c.anneal_lr else c.lr
        self.optimizer = optax.chain(optax.clip_by_global_norm(c.max_grad_norm),
                                      optax.radam(lr) if c.optimizer == "radam" else optax.adam(lr))
        kind = self.mixer_kind()
        self.mixing = None if kind is None else Mixing(kind, self.num_agents, c)
        self.source: Replay | DatasetWindows
        if self.offline:
            self.source = DatasetWindows(c, env, self.window, self.initial_carry)
        else:
            self.source = Replay(self, c, num_updates)

    # ----- what an algorithm declares --------------------------------------------------------
    @abc.abstractmethod
    def loss(self, params: dict, target_params: dict, w: dict[str, jax.Array]) -> tuple[jax.Array, dict]:
        """The loss of a sampled window w ([L, B, ...], burn-in included), and a dict
        of scalar statistics."""

    def mixer_kind(self) -> str | None:
        """The team value's mixer (`algos.common.mixing.MIXERS`); None for independent learners."""
        return None

    def extra_networks(self) -> tuple[str, ...]:
        """Networks shaped like the agents' beside them in `params` (a policy, a behaviour model)."""
        return ()

    acting_network: ClassVar[str] = "agent"     # the network the trained agents act with

    def net_outputs(self, num_actions: int) -> int:
        """Outputs of the agents' network per agent (its Q-values or logits)."""
        return num_actions

    def wrap(self, env: Env) -> Env:
        """The environment as the trainer steps it (`rollout.acting_env`)."""
        return acting_env(env, self.config.share_params and self.config.agent_id)

    # ----- networks ----------------------------------------------------------------------------
    def initial_carry(self, batch: tuple[int, ...]) -> jax.Array:
        return jnp.zeros((*batch, self.num_agents, self.carry_size), jnp.float32)

    def acting_q(self, q: jax.Array, obs: jax.Array) -> jax.Array:
        """`[B, N, A]`: the outputs actions are chosen by, from `q_values`' (the same here;
        a trainer of several objectives scalarises its vectors)."""
        return q

    def q_values(self, agent_params, carry, obs, reset):
        """obs: [B, N, ...] (each agent's observation in its shape; the MLP flattens it);
        carry: [B, N, H]; reset: [B] -> (carry, Q [B, N, A])."""
        return apply_agents(self.net, agent_params, carry, obs, reset, self.config.share_params)

    def init_mixer(self, key: jax.Array, global_state: jax.Array) -> Any:
        """The mixer's parameters (none without one); global_state: [1, ...]."""
        return {} if self.mixing is None else self.mixing.init(key, global_state)

    def init_params(self, k_net: jax.Array, k_mix: jax.Array, ts: TimeStep) -> dict:
        """`{"agent", "mixer", extra networks}` for observations and global state shaped
        like `ts`'s ([E, N, ...]); the i-th extra network from `fold_in(k_net, i + 1)`."""
        obs = ts.obs[0]     # [N, ...]: an image stays one
        carry, reset = jnp.zeros((1, self.carry_size)), jnp.zeros((1,), bool)

        def agents(key):
            init_one = lambda k: self.net.init(k, carry, obs[:1], reset)  # noqa: E731
            if self.config.share_params:
                return init_one(key)
            return init_stacked(init_one, jax.random.split(key, self.num_agents))

        params = {"agent": agents(k_net), "mixer": self.init_mixer(k_mix, ts.global_state[:1])}
        for i, name in enumerate(self.extra_networks()):
            params[name] = agents(jax.random.fold_in(k_net, i + 1))
        return params

    def initial_target(self, params: dict) -> dict:
        """The target network at the start: a copy of every network but the one the agents
        act with when that is not the agents' Q-network (none without TD)."""
        if not self.td:
            return {}
        return {k: v for k, v in params.items() if k == "agent" or k != self.acting_network}

    def unroll(self, agent_params, w: dict) -> jax.Array:
        """Outputs [L - burn_in, B, N, A] of a network for a window w ([L, B, ...])."""
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

    # ----- acting -----------------------------------------------------------------------------
    def policy(self) -> Policy:
        if self.offline and self.config.acting == "sample":
            def act(params, obs, mask, key, carry, reset):
                carry, out = self.q_values(params, carry, obs, reset)
                return distributions.sample(key, distributions.masked_logits(self.acting_q(out, obs), mask)), carry
        else:
            eps = self.config.eval_epsilon

            def act(params, obs, mask, key, carry, reset):
                carry, q = self.q_values(params, carry, obs, reset)
                return ql.epsilon_greedy(key, self.acting_q(q, obs), mask, eps), carry

        return Policy(act=act, initial_carry=self.initial_carry, env=self.env)

    def policy_params(self, state: Any) -> Any:
        return state.params[self.acting_network]

    def health(self) -> Health:
        """A TD loss that does not grow 10,000-fold."""
        return Health(steady=("loss/td",)) if self.td else Health()

    # ----- TD inputs ----------------------------------------------------------------------------
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
        t, n = self.train_len, self.config.n_step
        q = self.unroll(params["agent"], w)
        q_target = self.unroll(target_params["agent"], w)
        w = {k: v[self.burn_in:] for k, v in w.items()}
        q_taken = ql.chosen(q[:t], w["action"][:t])
        next_value = self.bootstrap(q[n:n + t], q_target[n:n + t], w["action_mask"][n:n + t])
        return q[:t], q_taken, next_value, w

    def bootstrap(self, q_online: jax.Array, q_target: jax.Array, mask: jax.Array) -> jax.Array:
        """A next state's value from its Q-values [..., A] (online and target network's): the
        greedy policy's (`q_learning.bootstrap_value`), or with `algo.backup=acting` and
        `algo.acting=sample` the Boltzmann policy's the agents draw from (expected SARSA)."""
        c = self.config
        if self.offline and c.backup == "acting" and c.acting == "sample":
            return ql.expected_value(q_online, q_target, mask)
        return ql.bootstrap_value(q_online, q_target, mask, c.double_q)

    def independent_parts(self, params: dict, target_params: dict, w: dict[str, jax.Array]):
        """Independent learners' TD loss: (q [T, B, N, A], td loss, targets [T, B, N], w)."""
        c = self.config
        q, q_taken, next_value, w = self.td_parts(params, target_params, w)
        td, target = ql.independent_td_loss(q_taken, next_value, w, c.gamma, c.n_step, c.loss,
                                            getattr(c, "reward", "own"))
        return q, td, target, w

    def team_parts(self, params: dict, target_params: dict, w: dict[str, jax.Array]):
        """A team value's TD loss through the mixer: (q [T, B, N, A], td loss, targets
        [T, B], Q_tot of the data's joint action [T, B], the mix, w) of a window."""
        assert self.mixing is not None, "a team value needs a mixer (mixer_kind)"
        c = self.config
        q, q_taken, next_value, w = self.td_parts(params, target_params, w)
        mix = self.mixing.mix(params["mixer"])
        td, target = ql.team_td_loss(q_taken, next_value, w, mix, self.mixing.mix(target_params["mixer"]),
                                     c.gamma, c.n_step, c.loss)
        t = q.shape[0]
        q_tot = mix(q_taken * w["active"][:t], w["global_state"][:t])
        return q, td, target, q_tot, mix, w

    # ----- learning -----------------------------------------------------------------------------
    def next_target(self, params: dict, target_params: dict, count: jax.Array) -> dict:
        if not self.td:
            return target_params
        c = self.config
        return ql.update_target(self.initial_target(params), target_params, count, c.target_interval, c.tau)

    def learn(self, params: dict, target_params: dict, opt_state: Any, count: jax.Array,
              sample: Callable[[jax.Array], dict], keys: jax.Array, ready: jax.Array | bool = True):
        """One gradient step on `loss` per key, each on a window `sample(key)`, with the
        target network moved every `target_interval` steps. While not `ready` (a replay
        buffer short of `learning_starts`) no step is taken and the statistics are NaN
        (the `learning` metric says which updates learned). `ready` decides a `lax.cond`:
        a run of one seed skips the steps; under `vmap` over seeds both branches are
        computed and each seed keeps its own.
        Returns ((params, target_params, opt_state, count), statistics [steps])."""

        def grad_step(carry, k):
            params, target_params, opt_state, count = carry
            w = sample(k)
            (loss, stats), grads = jax.value_and_grad(self.loss, has_aux=True)(params, target_params, w)
            updates, new_opt_state = self.optimizer.update(grads, opt_state, params)
            new_params = optax.apply_updates(params, updates)
            new_target = self.next_target(new_params, target_params, count + 1)
            carry = (new_params, new_target, new_opt_state, count + 1)
            return carry, {self.loss_name: loss, "grad_norm": optax.tree.norm(grads), **stats}

        def steps(carry):
            return jax.lax.scan(grad_step, carry, keys)

        carry = (params, target_params, opt_state, count)
        if ready is True:
            return steps(carry)
        shapes = jax.eval_shape(steps, carry)[1]

        def skip(carry):
            return carry, jax.tree.map(lambda s: jnp.full(s.shape, jnp.nan if jnp.issubdtype(s.dtype, jnp.floating)
                                                          else 0, s.dtype), shapes)

        return jax.lax.cond(ready, steps, skip, carry)

    def init(self, key: jax.Array) -> Any:
        return self.source.init(self, key)

    def update(self, state: Any) -> tuple[Any, dict[str, jax.Array]]:
        return self.source.update(self, state)


class Replay:
    """The data source of a Q-learner that acts (a `QConfig`): `num_envs` environments,
    an epsilon schedule over the run and a replay buffer of windows in the TrainState."""

    def __init__(self, loop: QLoop, config: QConfig, num_updates: int):
        c = config
        total = num_updates * c.steps_per_update
        if c.learning_starts >= total:
            raise ConfigError(f"algo.learning_starts={c.learning_starts} is not below the run's {total} environment "
                              "steps per seed, so nothing would be learned; lower it or raise total_steps")
        self.config = c
        self.global_state = loop.capabilities.needs_global_state    # what a mixer that reads the state needs
        self.epsilon = ql.epsilon_schedule(c.eps_start, c.eps_finish,
                                           c.eps_decay * num_updates * loop.steps_per_update)
        self.buffer = make_window_buffer(c.num_envs, c.buffer_size, loop.window, c.batch_size,
                                         min_steps=math.ceil(c.learning_starts / c.num_envs))

    def item(self, ts: TimeStep, action: jax.Array, reward: jax.Array, done: jax.Array,
             carry: jax.Array) -> dict[str, jax.Array]:
        """What one step stores in replay (the reward times `algo.reward_scale`)."""
        item = {"obs": ts.obs, "action_mask": ts.action_mask, "active": ts.active, "action": action,
                "reward": reward.astype(jnp.float32) * self.config.reward_scale, "done": done, "reset": ts.done}
        if self.config.recurrent:
            item["carry"] = carry
        if self.global_state:
            item["global_state"] = ts.global_state
        return item

    def init(self, loop: QLoop, key: jax.Array) -> TrainState:
        k_net, k_mix, k_env, k_state = jax.random.split(key, 4)
        env_state, ts = reset_envs(loop.env, k_env, self.config.num_envs)
        params = loop.init_params(k_net, k_mix, ts)
        first = jax.tree.map(lambda x: x[0], ts)
        example = self.item(first, jnp.zeros(loop.num_agents, jnp.int32), first.reward, first.done,
                            loop.initial_carry(()))
        return TrainState(
            params=params, target_params=loop.initial_target(params), opt_state=loop.optimizer.init(params),
            buffer=self.buffer.init(example), env_state=env_state, ts=ts,
            carry=loop.initial_carry((self.config.num_envs,)), key=k_state,
            updates=jnp.zeros((), jnp.int32), grad_steps=jnp.zeros((), jnp.int32),
        )

    def update(self, loop: QLoop, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        c = self.config
        key, k_roll, k_learn = jax.random.split(state.key, 3)
        epsilon = self.epsilon(state.updates * loop.steps_per_update)

        def act(carry, ts, k):
            new_carry, q = loop.q_values(state.params["agent"], carry, ts.obs, ts.done)
            return new_carry, ql.epsilon_greedy(k, loop.acting_q(q, ts.obs), ts.action_mask, epsilon), {"carry": carry}

        (env_state, ts, carry), traj = rollout(loop.env, act, state.env_state, state.ts, state.carry, k_roll,
                                               c.rollout_len)
        buffer = add_rollout(self.buffer, state.buffer, self._items(traj))
        ready = self.buffer.can_sample(buffer)
        (params, target_params, opt_state, count), stats = loop.learn(
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
        return self.item(traj.ts, traj.action, traj.reward, traj.done, traj.extras["carry"])
