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
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.algos.base import TrainerConfig
from coplay.algos.common import q_learning as ql
from coplay.algos.common.mixing import MIXERS, Mixer, MixerConfig
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.offline.dataset import Dataset, dataset_stats, load
from coplay.wrappers.agent_id import agent_id_view


def alpha_param(default: float = 1.0) -> Any:
    """The `cql_alpha` field of the conservative trainers."""
    return param(default, "weight of the conservative penalty (0 = no penalty)", min=0.0)


@dataclass(frozen=True)
class OfflineConfig(TrainerConfig):
    """What every offline trainer has: the dataset, and gradient steps per update."""

    step_unit: ClassVar[str] = "gradient steps"

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


@dataclass(frozen=True)
class OfflineNetConfig(OfflineConfig, ql.NetConfig):
    """An offline learner of the agents' network (behaviour cloning): the dataset's
    fields and the network's."""

    batch_size: int = param(128, "windows sampled per gradient step", min=1)


@dataclass(frozen=True)
class OfflineQConfig(OfflineConfig, ql.QLearnConfig):
    """An offline Q-value learner's fields: the dataset's, and learning Q-values'."""

    def reward_multiplier(self, data: Dataset) -> float:
        """`algo.reward_scale`, over the range of the dataset's episode returns with
        `algo.reward_norm=returns`."""
        if self.reward_norm == "none":
            return self.reward_scale
        returns = np.asarray(dataset_stats(data)["returns"])
        spread = float(np.max(returns) - np.min(returns)) if returns.size else 0.0
        if spread <= 0:
            raise ConfigError(f"algo.reward_norm=returns: every episode of the dataset at {self.dataset} returns the "
                              f"same ({float(returns.flat[0]) if returns.size else 'no episodes'}), so there is no "
                              "range to divide by; use algo.reward_norm=none")
        return self.reward_scale / spread

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
    rewards multiplied by `reward_scale`, each agent's observation in the environment's
    shape `obs_shape` (a dataset stores them flattened, OG-MARL's layout; an image is
    given back its shape, as the agents' networks read it when they act)."""

    def __init__(self, data: Dataset, length: int, agent_id: bool, reward_scale: float = 1.0,
                 obs_shape: tuple[int, ...] | None = None):
        e = data.experience
        obs = np.asarray(e["observations"][0], np.float32)                                 # [T, N, O]
        steps, n = obs.shape[:2]
        if obs_shape is not None:
            obs = obs.reshape(steps, n, *obs_shape)                                         # [T, N, *obs_shape]
        if steps < length:
            raise ConfigError(f"the dataset has {steps} steps, fewer than one window of {length} (the trained "
                              "steps, burn-in and n-step bootstrap); record more episodes")
        end = (np.maximum(e["terminals"][0], e["truncations"][0]).max(-1) > 0)             # [T]
        legals = np.asarray(e["infos"]["legals"][0], bool)
        active = np.asarray(e["infos"]["active"][0], bool) if "active" in e["infos"] else np.ones((steps, n), bool)
        arrays = {
            "obs": agent_id_view(obs, obs.shape[2:]) if agent_id else obs,      # as `AgentID` shows them
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
    if tuple(found["observations"]) == (spec.num_agents, *spec.obs_space.shape):   # stored in their shape
        found["observations"] = (spec.num_agents, obs_size)
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


@dataclass(frozen=True)
class OfflineTeamConfig(MixerConfig, OfflineQConfig):
    """An offline learner of a team value: the mixer and its fields."""

    mixer: Mixer = param("qmix", "how the agents' values make the team's: QMIX's monotonic mixer on the global "
                               "state, or VDN's sum", choices=MIXERS)


@struct.dataclass
class OfflineState:
    """An offline learner's state: no environment, no replay."""

    params: dict
    target_params: dict
    opt_state: Any
    key: jax.Array
    updates: jax.Array
    grad_steps: jax.Array


class DatasetWindows:
    """The data source of an offline trainer (`coplay.algos.common.q_trainer.QLoop`): the
    run's dataset, read and checked when the trainer is built, and each update's
    `grad_steps` gradient steps on windows drawn from it. A Q-learner's rewards are
    multiplied as its config says (`OfflineQConfig.reward_multiplier`)."""

    def __init__(self, config: Any, env: Env, window: int, initial_carry: Any):
        self.config, self.window, self.initial_carry = config, window, initial_carry
        self.dataset = read_dataset(config, env)
        scale = config.reward_multiplier(self.dataset) if isinstance(config, OfflineQConfig) else 1.0
        self.windows = Windows(self.dataset, window, config.share_params and config.agent_id, scale,
                               tuple(env.spec.obs_space.shape))

    def sample(self, key: jax.Array) -> dict[str, jax.Array]:
        """`batch_size` windows `[L, B, ...]` (a recurrent agent's start from a zero state),
        with a random key per position, `key` [L, 2], for a loss that draws actions."""
        k_at, k_loss = jax.random.split(key)
        w = self.windows.sample(k_at, self.config.batch_size)
        w["key"] = jax.random.split(k_loss, self.window)
        if self.config.recurrent:
            w["carry"] = self.initial_carry((self.window, self.config.batch_size))
        return w

    def init(self, loop: Any, key: jax.Array) -> OfflineState:
        k_net, k_mix, k_env, k_state = jax.random.split(key, 4)
        _, ts = loop.env.reset(k_env)
        params = loop.init_params(k_net, k_mix, jax.tree.map(lambda x: x[None], ts))
        return OfflineState(params=params, target_params=loop.initial_target(params),
                            opt_state=loop.optimizer.init(params), key=k_state,
                            updates=jnp.zeros((), jnp.int32), grad_steps=jnp.zeros((), jnp.int32))

    def update(self, loop: Any, state: OfflineState) -> tuple[OfflineState, dict[str, jax.Array]]:
        key, k_learn = jax.random.split(state.key)
        (params, target_params, opt_state, count), stats = loop.learn(
            state.params, state.target_params, state.opt_state, state.grad_steps, self.sample,
            jax.random.split(k_learn, self.config.grad_steps))
        return (OfflineState(params=params, target_params=target_params, opt_state=opt_state, key=key,
                             updates=state.updates + 1, grad_steps=count),
                {k: v.mean() for k, v in stats.items()})
