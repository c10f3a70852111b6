"""Learning from a dataset instead of from acting: what every offline trainer shares.

An offline trainer steps no environment while it learns. Its config names a
dataset (`algo.dataset=<dir>/<name>.vlt/<quality>`, written by `coplay record`
or by OG-MARL), which is read, checked against the environment of the run and
turned into `Windows` before anything compiles; each update takes `grad_steps`
gradient steps on windows drawn uniformly from it, and the run counts gradient
steps where an online run counts environment steps (`total_steps`,
`chunk_steps`, the `env_steps` column of metrics.csv). Evaluation plays the
trained policy in the environment, as for every run, so an offline result is
scored the same way as an online one.

A window is what the Q family's replay gives (`[L, B, ...]`: obs, action,
reward, done, reset, action_mask, active, global_state), read from the stream
of episodes: positions t .. t + L - 1 for a start t drawn uniformly, episode
ends marked by `done` so that no target reaches across them. A recurrent agent
starts each window from a zero state (warmed by `burn_in` steps).

A Q-learner's rewards may be rescaled as they are read (`algo.reward_scale`,
after `algo.reward_norm=returns` divides them by the range of the dataset's
episode returns): CQL's penalty does not scale with the rewards, so their size
decides how much the data's returns, beside the penalty, shape the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.algos.base import TrainerConfig
from coplay.algos.common import q_learning as ql
from coplay.algos.common.mixing import MIXERS, MixerConfig, Mixing
from coplay.algos.common.q_trainer import AgentLearner, QFamily
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.nets import distributions
from coplay.offline.dataset import Dataset, dataset_stats, load
from coplay.wrappers.agent_id import with_agent_id


def alpha_param(default: float = 1.0) -> Any:
    """The `cql_alpha` field of the conservative trainers."""
    return param(default, "weight of the conservative penalty (0 = no penalty)", min=0.0)


@dataclass(frozen=True)
class OfflineConfig(TrainerConfig):
    """What every offline trainer has: the dataset, and gradient steps per update."""

    dataset: str = param("", "the dataset to learn from: <dir>/<name>.vlt/<quality> (coplay record, or an OG-MARL "
                             "vault)")
    grad_steps: int = param(100, "gradient steps per update (the run's total_steps counts gradient steps)", min=1)
    acting: str = param("greedy", "how the trained agents play: the legal action of the network's largest output, "
                                  "or a draw from the softmax of its outputs over the legal actions (bc, maicq: the "
                                  "learned policy, as the data's policy drew; the Q-learners: exp Q, the Boltzmann "
                                  "policy that CQL's log-sum-exp penalty holds near the data's actions)",
                        choices=("greedy", "sample"))

    @property
    def steps_per_update(self) -> int:
        """Gradient steps per seed in one update."""
        return self.grad_steps


class PolicyActing(AgentLearner[Any]):
    """An offline trainer's agents play greedily on their network's outputs or, with
    `algo.acting=sample`, draw from the softmax of them (illegal actions never): a
    policy's logits (bc, maicq) or Q-values (the Boltzmann policy exp Q, the one
    CQL's log-sum-exp penalty, log sum_a exp Q(o, a) - Q(o, a_data), pulls towards
    the data's actions)."""

    def __init__(self, config: Any, env: Env, num_updates: int):
        if config.acting == "sample" and getattr(config, "eval_epsilon", 0.0) > 0:
            raise ConfigError(f"algo.eval_epsilon={config.eval_epsilon} is for algo.acting=greedy: with "
                              "algo.acting=sample the agents already draw their actions (set one of them)")
        super().__init__(config, env, num_updates)

    def policy(self) -> Policy:
        if self.config.acting == "greedy":
            return super().policy()

        def act(params, obs, mask, key, carry, reset):
            carry, out = self.q_values(params, carry, obs, reset)
            return distributions.sample(key, distributions.masked_logits(self.acting_q(out, obs), mask)), carry

        return Policy(act=act, initial_carry=self.initial_carry, env=self.env)


@dataclass(frozen=True)
class OfflineNetConfig(OfflineConfig, ql.NetConfig):
    """An offline learner of the agents' network (behaviour cloning): the dataset's
    fields and the network's."""

    batch_size: int = param(128, "windows sampled per gradient step", min=1)


@dataclass(frozen=True)
class OfflineQConfig(OfflineConfig, ql.QLearnConfig):
    """An offline Q-value learner's fields: the dataset's, and learning Q-values'."""

    batch_size: int = param(128, "windows sampled per gradient step", min=1)
    target_interval: int = param(200, "gradient steps between target-network updates", min=1)
    reward_scale: float = param(1.0, "multiply the dataset's rewards by this before learning. CQL's penalty and "
                                     "the Boltzmann policy exp Q do not scale with the rewards: a larger scale weighs "
                                     "the data's returns more beside the penalty (CORL's reward_scale)",
                                min=0.0, min_exclusive=True)
    reward_norm: str = param("none", "returns: first divide the rewards by the range of the dataset's episode "
                                     "returns (max - min, as IQL does), so that one reward_scale suits environments "
                                     "of any reward size; none: as recorded", choices=("none", "returns"))
    backup: str = param("max", "a next state's value in the TD target: max (the greedy policy's: the best legal "
                               "action's, double Q as double_q says) or acting (the value of the policy the agents "
                               "play by: with acting=sample the expectation under softmax(Q), expected SARSA; with "
                               "acting=greedy the same as max)", choices=("max", "acting"))


class Windows:
    """A dataset as arrays ready for sampling windows of `length` steps inside `jit`, its
    rewards multiplied by `reward_scale`."""

    def __init__(self, data: Dataset, length: int, agent_id: bool, reward_scale: float = 1.0):
        e = data.experience
        obs = np.asarray(e["observations"][0], np.float32)                                 # [T, N, O]
        steps, n = obs.shape[:2]
        if steps < length:
            raise ConfigError(f"the dataset has {steps} steps, fewer than one window of {length} (the trained "
                              "steps, burn-in and n-step bootstrap); record more episodes")
        end = (np.maximum(e["terminals"][0], e["truncations"][0]).max(-1) > 0)             # [T]
        legals = np.asarray(e["infos"]["legals"][0], bool)
        active = np.asarray(e["infos"]["active"][0], bool) if "active" in e["infos"] else np.ones((steps, n), bool)
        arrays = {
            "obs": with_agent_id(obs) if agent_id else obs,
            "action": np.asarray(e["actions"][0], np.int32),
            "reward": np.asarray(e["rewards"][0], np.float32) * np.float32(reward_scale),
            "done": end,
            "reset": np.concatenate([[True], end[:-1]]),
            "action_mask": legals,
            "active": active,
            "global_state": np.asarray(e["infos"]["state"][0], np.float32).reshape(steps, -1),
        }
        self.arrays = {k: jnp.asarray(v) for k, v in arrays.items()}
        self.length = length
        self.starts = steps - length + 1

    def sample(self, key: jax.Array, batch: int) -> dict[str, jax.Array]:
        """`batch` windows `[L, B, ...]` starting at uniformly drawn steps."""
        start = jax.random.randint(key, (batch,), 0, self.starts)
        at = start[None, :] + jnp.arange(self.length)[:, None]                               # [L, B]
        return {k: v[at] for k, v in self.arrays.items()}


def check_shapes(data: Dataset, env: Env, where: str) -> None:
    """Refuse a dataset whose arrays do not fit `env` (what a vault without coplay's
    description of its environment, such as OG-MARL's, is checked by)."""
    spec = env.spec
    e = data.experience
    obs_size = int(np.prod(spec.obs_space.shape))
    expected = {"observations": (spec.num_agents, obs_size), "infos.legals": (spec.num_agents, spec.num_actions),
                "actions": (spec.num_agents,)}
    found = {"observations": e["observations"].shape[2:], "infos.legals": e["infos"]["legals"].shape[2:],
             "actions": e["actions"].shape[2:]}
    wrong = [f"{k} per step {tuple(found[k])} where {spec.name!r} has {v}" for k, v in expected.items()
             if tuple(found[k]) != v]
    if wrong:
        raise ConfigError(f"the dataset at {where} does not fit environment {spec.name!r}: {'; '.join(wrong)}")


def read_dataset(config: OfflineConfig, env: Env) -> Dataset:
    """The run's dataset, refused if it was made for another environment or does not fit it."""
    if not config.dataset:
        raise ConfigError("algo.dataset is not set: an offline trainer learns from a dataset, "
                          "algo.dataset=<dir>/<name>.vlt/<quality> (write one with `coplay record`)")
    data = load(config.dataset, env=env)
    check_shapes(data, env, config.dataset)
    return data


@struct.dataclass
class OfflineState:
    params: dict
    target_params: dict
    opt_state: Any
    key: jax.Array
    updates: jax.Array
    grad_steps: jax.Array


NC = TypeVar("NC", bound=OfflineNetConfig)
OC = TypeVar("OC", bound=OfflineQConfig)


class Offline(AgentLearner[Any]):
    """An `AgentLearner` that learns from the run's dataset (`algo.dataset`): it is read
    and checked when the trainer is built, and each update takes `grad_steps` gradient
    steps on windows of it. Put it first among the bases of an offline trainer."""

    def __init__(self, config: Any, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        self.dataset = read_dataset(config, env)
        self.windows = Windows(self.dataset, self.window, config.share_params and config.agent_id,
                               self.reward_multiplier())

    def reward_multiplier(self) -> float:
        """What the dataset's rewards are multiplied by before learning (1: as recorded)."""
        return 1.0

    def sample(self, key: jax.Array) -> dict[str, jax.Array]:
        """`batch_size` windows `[L, B, ...]` (a recurrent agent's start from a zero state),
        with a random key per position, `key` [L, 2], for a loss that draws actions."""
        k_at, k_loss = jax.random.split(key)
        w = self.windows.sample(k_at, self.config.batch_size)
        w["key"] = jax.random.split(k_loss, self.window)
        if self.config.recurrent:
            w["carry"] = self.initial_carry((self.window, self.config.batch_size))
        return w

    def init(self, key: jax.Array) -> OfflineState:
        k_net, k_mix, k_env, k_state = jax.random.split(key, 4)
        _, ts = self.env.reset(k_env)
        params = self.init_params(k_net, k_mix, jax.tree.map(lambda x: x[None], ts))
        return OfflineState(params=params, target_params=self.initial_target(params),
                            opt_state=self.optimizer.init(params), key=k_state,
                            updates=jnp.zeros((), jnp.int32), grad_steps=jnp.zeros((), jnp.int32))

    def update(self, state: OfflineState) -> tuple[OfflineState, dict[str, jax.Array]]:
        key, k_learn = jax.random.split(state.key)
        (params, target_params, opt_state, count), stats = self.learn(
            state.params, state.target_params, state.opt_state, state.grad_steps, self.sample,
            jax.random.split(k_learn, self.config.grad_steps))
        return (OfflineState(params=params, target_params=target_params, opt_state=opt_state, key=key,
                             updates=state.updates + 1, grad_steps=count),
                {k: v.mean() for k, v in stats.items()})


class OfflineQLearner(Offline, PolicyActing, QFamily[OC]):
    """The Q family learning from a dataset: the same networks, TD inputs and gradient
    steps as `QLearner`, on windows of the dataset instead of replay. A subclass is an
    algorithm: it gives `loss` (a TD loss and its conservative penalty)."""

    config_class = OfflineQConfig
    loss_name = "loss"         # the TD loss and the penalty together (each also logged alone)

    def reward_multiplier(self) -> float:
        """`algo.reward_scale`, over the range of the dataset's episode returns with
        `algo.reward_norm=returns`."""
        c = self.config
        if c.reward_norm == "none":
            return c.reward_scale
        returns = np.asarray(dataset_stats(self.dataset)["returns"])
        spread = float(np.max(returns) - np.min(returns)) if returns.size else 0.0
        if spread <= 0:
            raise ConfigError(f"algo.reward_norm=returns: every episode of the dataset at {c.dataset} returns the "
                              f"same ({float(returns.flat[0]) if returns.size else 'no episodes'}), so there is no "
                              "range to divide by; use algo.reward_norm=none")
        return c.reward_scale / spread

    def bootstrap(self, q_online: jax.Array, q_target: jax.Array, mask: jax.Array) -> jax.Array:
        """With `algo.backup=acting` and `algo.acting=sample`, the next state's value under
        the Boltzmann policy the agents draw from (`q_learning.expected_value`); else the
        greedy policy's."""
        if self.config.backup == "acting" and self.config.acting == "sample":
            return ql.expected_value(q_online, q_target, mask)
        return super().bootstrap(q_online, q_target, mask)

    def independent_parts(self, params: dict, target_params: dict, w: dict[str, jax.Array]):
        """Independent learners' TD loss: (q [T, B, N, A], td loss, targets [T, B, N], w)."""
        c = self.config
        q, q_taken, next_value, w = self.td_parts(params, target_params, w)
        td, target = ql.independent_td_loss(q_taken, next_value, w, c.gamma, c.n_step, c.loss,
                                            getattr(c, "reward", "own"))
        return q, td, target, w


@dataclass(frozen=True)
class OfflineTeamConfig(MixerConfig, OfflineQConfig):
    """An offline learner of a team value: the mixer and its fields."""

    mixer: str = param("qmix", "how the agents' values make the team's: QMIX's monotonic mixer on the global "
                               "state, or VDN's sum", choices=MIXERS)


TC = TypeVar("TC", bound=OfflineTeamConfig)


class OfflineTeamLearner(OfflineQLearner[TC]):
    """An offline learner of a team value Q_tot = mix(Q_1, ..., Q_N; s) (VDN or QMIX),
    with one TD problem on the team reward (`q_learning.team_td_loss`)."""

    def __init__(self, config: TC, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        self.mixing = Mixing(config.mixer, self.num_agents, config)

    def init_mixer(self, key: jax.Array, global_state: jax.Array) -> Any:
        return self.mixing.init(key, global_state)

    def team_parts(self, params: dict, target_params: dict, w: dict[str, jax.Array]):
        """(q [T, B, N, A], td loss, targets [T, B], Q_tot of the data's joint action
        [T, B], the mix, w) of a window."""
        c = self.config
        q, q_taken, next_value, w = self.td_parts(params, target_params, w)
        mix = self.mixing.mix(params["mixer"])
        td, target = ql.team_td_loss(q_taken, next_value, w, mix, self.mixing.mix(target_params["mixer"]),
                                     c.gamma, c.n_step, c.loss)
        t = q.shape[0]
        q_tot = mix(q_taken * w["active"][:t], w["global_state"][:t])
        return q, td, target, q_tot, mix, w
