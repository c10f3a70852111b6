"""The algorithm contract: what every algorithm gives the layers above it.

An algorithm is a subclass of `Trainer`, registered by name in
`coplay.algos.ALGOS` with its config class and its `Capabilities`. The
experiment layer uses exactly the members below and nothing else:

    trainer = Algo(config, env, num_updates)      # validates; nothing compiles
    state = trainer.init(key)                     # one seed's TrainState (never under vmap)
    state, metrics = trainer.update(state)        # one pure, compiled iteration
    trainer.policy(), trainer.policy_params(state)
    trainer.evaluator(episodes)                   # evaluate(params, key) -> dict of [episodes']
    trainer.num_envs, trainer.steps_per_update, trainer.return_convention
    trainer.preferences, trainer.front(results)   # several objectives: the weights, the front

`update` collects experience and learns; it returns the new state and a dict
of scalar metrics. The experiment layer `vmap`s it over seeds and
`lax.scan`s it over a chunk of iterations, so the TrainState (a flax struct)
must hold everything a run needs: parameters, optimiser state, environment
states, RNG keys, replay, counters. Fields that hold one entry per parallel
environment are declared with `per_env()`, so the scale layer can split them
over devices without guessing from shapes (`env_axis_mask`).

Configs are frozen dataclasses of `param()` fields; the families share bases
(`TrainerConfig` and `RolloutConfig` here, `PPOConfig` in `algos/common/ppo.py`,
`QLearnConfig` and `QConfig` in `algos/common/q_learning.py`, `OfflineConfig` in
`algos/common/offline.py`), and `config.steps_per_update` is known before any
trainer is built.

Policies act through one interface so any trained policy, scripted bot or
search agent can be dropped into the same evaluation:

    carry = policy.initial_carry(batch_shape)
    action, carry = policy.act(params, obs, mask, key, carry, reset)

obs: [B, N, *obs_shape], mask: [B, N, A], reset: [B] (episode starts) ->
action: [B, N]. Feed-forward policies ignore `carry` and `reset`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import jax
import numpy as np
from flax import struct

from coplay.core.config import check, param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box, Discrete, MultiDiscrete
from coplay.core.types import EnvSpec

PER_AGENT_RETURN = "episode return averaged over agents (per-agent), undiscounted"

# Evaluation: `evaluate(params, key) -> dict of [episodes'] arrays` ("return" among them).
Evaluator = Callable[[Any, jax.Array], dict[str, jax.Array]]


@dataclass(frozen=True)
class Policy:
    act: Callable[..., tuple[jax.Array, Any]]
    initial_carry: Callable[[tuple[int, ...]], Any]
    env: Env  # the (wrapped) environment whose observations the policy expects
    # What the policy reads where it is not `env`'s observation: `observe(state [B], ts [B])
    # -> [B, N, ...]` from the environment's state (a text policy playing the game under
    # its text environment reads the views written from the game's state). Games between
    # policies (`algos.common.matches`) honour it.
    observe: Callable[[Any, Any], jax.Array] | None = None


# ----- TrainState fields with a per-environment axis --------------------------------------------

_ENV_AXIS = "env_axis"


def per_env(select: Callable[[Any], Any] | None = None) -> Any:
    """A TrainState field whose leaves have the parallel environments on their
    leading axis (`[E, ...]` per seed): environment states, time steps, recurrent
    carries, per-game bookkeeping. `select(value)`, where given, returns a pytree
    prefix of bools marking which parts of the field have that axis (a replay
    buffer's storage does, its write index does not)."""
    return struct.field(pytree_node=True, metadata={_ENV_AXIS: select or True})


def env_axis_mask(state: Any) -> Any:
    """A pytree prefix of `state` with a bool per part: True where the leaves have a
    per-environment axis (declared by `per_env`), False elsewhere."""
    if not dataclasses.is_dataclass(state) or isinstance(state, type):
        return False
    marks = {}
    for f in dataclasses.fields(state):
        mark = f.metadata.get(_ENV_AXIS, False)
        marks[f.name] = mark(getattr(state, f.name)) if callable(mark) else bool(mark)
    return dataclasses.replace(state, **marks)


# ----- capabilities ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capabilities:
    """What an algorithm can train on; `problems(spec)` says why an environment is refused."""

    discrete_actions: bool = True
    continuous_actions: bool = False
    utterances: bool = False           # actions are utterances: token ids (a text environment's MultiDiscrete)
    needs_global_state: bool = False   # its critic or mixer reads `global_state`
    recurrent: bool = False            # offers recurrent (GRU) agents
    simultaneous: bool = True          # trains on games where every agent acts at every step
    turn_based: bool = False           # trains on games where one agent moves at a time
    rivals: bool = False               # needs rivals: agents on different teams, or a turn-based game
    min_agents: int = 1
    vector_reward: bool = False        # learns from K > 1 objectives without scalarising them
    needs_vector_reward: bool = False  # learns only from K > 1 objectives (a multi-objective trainer)

    def problems(self, spec: EnvSpec) -> list[str]:
        out = []
        space = spec.action_space
        needs = " or ".join(kind for kind, able in (("discrete", self.discrete_actions),
                                                    ("continuous", self.continuous_actions),
                                                    ("utterances (a text environment, text:...)", self.utterances))
                            if able)
        if not isinstance(space, (Discrete, Box, MultiDiscrete)):
            out.append(f"actions {space} are neither Discrete, Box nor utterances (MultiDiscrete)")
        elif isinstance(space, Discrete) and not self.discrete_actions:
            out.append(f"actions are discrete ({space}) and it needs {needs} actions")
        elif isinstance(space, Box) and not self.continuous_actions:
            out.append(f"actions are continuous ({space}) and it needs {needs} actions")
        elif isinstance(space, MultiDiscrete) and not self.utterances:
            out.append(f"actions are utterances (token ids, {space}) and it needs {needs} actions")
        if spec.num_agents < self.min_agents:
            out.append(f"it has {spec.num_agents} agent(s) and it needs at least {self.min_agents}")
        if spec.turn_based and spec.num_agents > 1 and not self.turn_based:
            out.append("it is turn-based (one agent moves at a time)")
        if not spec.turn_based and not self.simultaneous:
            out.append("its agents act simultaneously and it needs a turn-based game")
        if self.rivals and not spec.turn_based and len(set(spec.teams)) < 2:
            out.append("all its agents are on one team, and it needs rivals")
        if spec.reward_dim == 1 and self.needs_vector_reward:
            out.append("it has one objective and it needs several (a vector reward, reward_dim >= 2)")
        if spec.reward_dim != 1 and not self.vector_reward:
            out.append(f"it has {spec.reward_dim} objectives and it needs a scalar reward (scalarise it first: "
                       "coplay.wrappers.Scalarise, linear or chebyshev)")
        return out


def check_env_support(spec: EnvSpec, algo: str, capabilities: Capabilities) -> None:
    """Refuse an environment the algorithm cannot train on, naming the registered
    algorithms that can."""
    problems = capabilities.problems(spec)
    if not problems:
        return
    from coplay.algos import ALGOS  # the registry imports the algorithm modules

    able = [name for name, entry in ALGOS.items() if not entry.capabilities.problems(spec)]
    raise ConfigError(
        f"algorithm {algo!r} cannot train on environment {spec.name!r}: {'; '.join(problems)}. "
        f"Algorithms that can: {', '.join(able) or 'none registered'}")


# ----- health --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    """What a healthy run of an algorithm keeps to, by the measures its users watch.
    The experiment layer warns (in the run's log and in summary.json) when a run
    leaves it; stopping stays reserved for non-finite values.

    `ranges`: metric -> (low, high, why): every update's value stays within.
    `steady`: losses whose per-seed chunk mean must not grow `growth`-fold above
    the smallest chunk mean the run has had."""

    ranges: Mapping[str, tuple[float, float, str]] = dataclasses.field(default_factory=dict)
    steady: tuple[str, ...] = ()
    growth: float = 1e4


# ----- configs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainerConfig:
    """What every trainer's config tells the runner: how many steps one update counts
    (environment steps for trainers that act; gradient steps for offline learners)."""

    @property
    def steps_per_update(self) -> int:
        raise NotImplementedError

    def update_steps(self, spec: EnvSpec) -> int:
        """Steps per seed in one update on the environment `spec`: the same on every
        environment, except for families whose rollout length is read from the
        environment (whole episodes)."""
        return self.steps_per_update


@dataclass(frozen=True)
class RolloutConfig(TrainerConfig):
    """What every trainer that collects experience from parallel environments has."""

    num_envs: int = param(64, "parallel environments per seed", min=1)
    rollout_len: int = param(25, "steps per environment between updates", min=1)

    @property
    def steps_per_update(self) -> int:
        """Environment steps per seed in one update."""
        return self.num_envs * self.rollout_len


# ----- the trainer -------------------------------------------------------------------------------------


C = TypeVar("C", bound=TrainerConfig)


class Trainer(abc.ABC, Generic[C]):
    """Base class of every algorithm; one instance trains one seed (the experiment
    layer `vmap`s `update` over seeds). Subclasses set the class attributes and
    implement the four abstract methods."""

    name: ClassVar[str]                          # the registry name, used in messages
    config_class: ClassVar[type[TrainerConfig]]  # its config dataclass
    capabilities: ClassVar[Capabilities]
    return_convention: ClassVar[str] = PER_AGENT_RETURN   # what eval/return means, for summary.json

    config: C
    env: Env            # the (wrapped) environment that `update` steps and the policy acts on

    def __init__(self, config: C, env: Env, num_updates: int):
        if not isinstance(config, self.config_class):
            cls = self.config_class
            raise ConfigError(f"{self.name} needs a {cls.__module__}.{cls.__qualname__}, got {type(config).__name__}")
        check(config, "algo.")
        check_env_support(env.spec, self.name, self.capabilities)
        self.config = config
        self.num_updates = num_updates
        self.spec = env.spec

    @property
    def num_envs(self) -> int:
        """Parallel environments per seed (the axis `per_env` fields split over; 1 for a
        trainer that steps no environment)."""
        return int(getattr(self.config, "num_envs", 1))

    @property
    def steps_per_update(self) -> int:
        """Steps per seed in one update (environment steps; gradient steps offline)."""
        return int(self.config.update_steps(self.spec))

    @abc.abstractmethod
    def init(self, key: jax.Array) -> Any:
        """One seed's TrainState. Called outside `vmap` (see `coplay.nets.init`)."""

    @abc.abstractmethod
    def update(self, state: Any) -> tuple[Any, dict[str, jax.Array]]:
        """One pure iteration: collect experience, learn. Returns (state, scalar metrics)."""

    @abc.abstractmethod
    def policy(self) -> Policy:
        """The policy that acts for the trained agents."""

    @abc.abstractmethod
    def policy_params(self, state: Any) -> Any:
        """The part of a TrainState that `policy().act` takes as `params`."""

    def zero_policy_params(self) -> Any:
        """`policy_params` with every weight zero (uniform over the legal actions, for
        discrete actions), built from shapes alone: nothing is initialised or compiled."""
        shapes = jax.eval_shape(lambda k: self.policy_params(self.init(k)), jax.random.PRNGKey(0))
        return jax.tree.map(lambda s: jax.numpy.zeros(s.shape, s.dtype), shapes)

    def health(self) -> Health:
        """What a healthy run of this algorithm keeps to (default: nothing watched)."""
        return Health()

    # A trainer of several objectives trains P policies per seed, one per preference
    # `preferences[p]` ([P, K]), and `front` reads their vector returns from an evaluation.
    preferences: np.ndarray | None = None

    def front(self, results: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """`[S, P, K]`: from evaluation results (name -> `[S, episodes]`), the mean vector
        return of each seed's P policies; None for a trainer of one objective."""
        return None

    def after_evaluation(self, state: Any, front: np.ndarray) -> Any:
        """Every seed's state (`[S, ...]`) after an evaluation whose fronts were `front`:
        unchanged by default; a trainer that chooses its preferences as it goes (the
        weight sweep's optimistic linear support) moves them here, on the host."""
        return state

    def weights_of(self, state: Any) -> np.ndarray | None:
        """`[S, P, K]`: each seed's preferences now, where the trainer changes them."""
        return None

    def evaluator(self, episodes: int) -> Evaluator:
        """`evaluate(params, key) -> dict of [episodes] arrays`: by default, `episodes`
        episodes of the policy in every seat (`algos.common.evaluation`)."""
        from coplay.algos.common.evaluation import make_evaluator

        return make_evaluator(self.policy(), episodes)
