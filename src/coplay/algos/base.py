"""The algorithm contract: what every algorithm gives the layers above it.

An algorithm is a subclass of `Trainer` (compiled) or `HostTrainer` (on the
host), registered by name in `coplay.algos.ALGOS` with its config class, its
`Capabilities` and the engine that runs it. The compiled engine uses exactly
the members below of a `Trainer` and nothing else (`HostTrainer`'s doc lists
the host form):

    trainer = Algo(config, env, num_updates)      # validates; nothing compiles
    state = trainer.init(key)                     # one seed's TrainState (never under vmap)
    state, metrics = trainer.update(state)        # one pure, compiled iteration
    trainer.policy(), trainer.policy_params(state)
    trainer.evaluator(episodes)                   # evaluate(params, key) -> dict of [episodes']
    trainer.num_envs, trainer.steps_per_update, trainer.return_convention
    trainer.fronts                                # several objectives: its `Fronts`, else None

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

The policy a trainer plays is a `coplay.core.policy.Policy`: the agent half of
the core contract, shared by trainers, bots, search agents and language models.
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

from coplay.algos.common.evaluation import make_evaluator
from coplay.algos.registry import check_env_support
from coplay.core.config import check, param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Evaluator, Policy
from coplay.core.spaces import Box, Discrete, MultiDiscrete, Text
from coplay.core.types import EnvSpec

PER_AGENT_RETURN = "episode return averaged over agents (per-agent), undiscounted"

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
    image_obs: bool = True             # takes observations that are not flat vectors (images or grids [H, W, C])
    free_text: bool = False            # plays games in free text on the host (Text spaces: env=textarena:<id>)

    def problems(self, spec: EnvSpec) -> list[str]:
        out = []
        space = spec.action_space
        needs = " or ".join(kind for kind, able in (("discrete", self.discrete_actions),
                                                    ("continuous", self.continuous_actions),
                                                    ("utterances (a text environment, text:...)", self.utterances))
                            if able)
        if isinstance(space, Text):
            if not self.free_text:
                out.append("its moves are free text, played on the host (a TextArena game)")
            return out
        if not isinstance(space, (Discrete, Box, MultiDiscrete)):
            out.append(f"actions {space} are neither Discrete, Box nor utterances (MultiDiscrete)")
        elif isinstance(space, Discrete) and not self.discrete_actions:
            out.append(f"actions are discrete ({space}) and it needs {needs} actions")
        elif isinstance(space, Box) and not self.continuous_actions:
            out.append(f"actions are continuous ({space}) and it needs {needs} actions")
        elif isinstance(space, MultiDiscrete) and not self.utterances:
            out.append(f"actions are utterances (token ids, {space}) and it needs {needs} actions")
        shape = tuple(spec.obs_space.shape)
        if len(shape) > 1 and not self.image_obs:
            out.append(f"its observations are images or grids of shape {shape} per agent and it needs flat "
                       "observations (vectors)")
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
            weights = ":".join([f"{1 / spec.reward_dim:.2g}"] * spec.reward_dim)
            out.append(f"it has {spec.reward_dim} objectives and it needs a scalar reward (scalarise it: "
                       f"scalarise=linear preference={weights}, or scalarise=chebyshev with utopia=...; "
                       "in Python, coplay.wrappers.Scalarise)")
        return out


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


# ----- several objectives --------------------------------------------------------------------------


@dataclass(frozen=True)
class Fronts:
    """What a trainer of several objectives tells the loop (`Trainer.fronts`): it trains P
    policies per seed, one per preference, and the loop scores the front they make.

    `preferences [P, K]`: the weights the policies start with. `read(results)`: from
    evaluation results (name -> `[S, episodes]`), each seed's P mean vector returns
    `[S, P, K]`. `move(state, front)`, where the trainer chooses its weights as it goes
    (the weight sweep's optimistic linear support): every seed's state `[S, ...]` after
    an evaluation whose fronts were `front`, on the host. `weights(state)`, likewise:
    each seed's weights now, `[S, P, K]`."""

    preferences: np.ndarray
    read: Callable[[Mapping[str, np.ndarray]], np.ndarray]
    move: Callable[[Any, np.ndarray], Any] | None = None
    weights: Callable[[Any], np.ndarray] | None = None


# ----- configs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainerConfig:
    """What every trainer's config tells the runner: how many steps one update counts
    (environment steps for trainers that act; gradient steps for offline learners)."""

    step_unit: ClassVar[str] = "environment steps"   # what total_steps counts, in words
    # Environment name -> {field: value}: what a run of this algorithm starts from on an
    # environment where its defaults are known not to learn (a field the user sets keeps
    # the user's value); `coplay train` prints what it applied.
    recommended: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

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


class Learner(abc.ABC, Generic[C]):
    """What both engines' learners share: the registry's class attributes, the config
    checked on construction, and how many steps one update counts."""

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
        """Parallel environments (or episodes of one update) per seed (the axis `per_env`
        fields split over; 1 for a trainer that steps no environment)."""
        return int(getattr(self.config, "num_envs", 1))

    @property
    def steps_per_update(self) -> int:
        """Steps per seed in one update (environment steps; gradient steps offline)."""
        return int(self.config.update_steps(self.spec))

    def health(self) -> Health:
        """What a healthy run of this algorithm keeps to (default: nothing watched)."""
        return Health()


class Trainer(Learner[C]):
    """Base class of every compiled algorithm; one instance trains one seed (the
    experiment layer `vmap`s `update` over seeds). Subclasses set the class
    attributes and implement the four abstract methods."""

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

    # A trainer of several objectives says how its fronts are read (`Fronts`); None for one objective.
    fronts: Fronts | None = None

    def evaluator(self, episodes: int) -> Evaluator:
        """`evaluate(params, key) -> dict of [episodes] arrays`: by default, `episodes`
        episodes of the policy in every seat (`algos.common.evaluation`)."""
        return make_evaluator(self.policy(), episodes)


class HostTrainer(Learner[C]):
    """Base class of a learner that runs on the host (a pretrained language model in
    PyTorch): the contract of `Trainer` in host form. One instance holds every seed of
    a run, and the host engine (`coplay.experiment.host`) drives it:

        learner = Algo(config, env, num_updates, seeds=S, seed=run_seed)   # validates, loads
        metrics = learner.update(seed, number)       # seed `seed`'s update number `number`
        results = learner.evaluate(seed, number, episodes)   # name -> [episodes]
        learner.state() / learner.load_state(state)  # named arrays: the whole truth of a run
        learner.policy(), learner.policy_params()    # the policy it plays, params [S] (the seeds)
        learner.samples()                            # the last evaluation's transcripts, as lines

    Everything random is drawn from (run seed, seed, number), so that a run resumed
    from `state()` repeats an uninterrupted one exactly."""

    def __init__(self, config: C, env: Env, num_updates: int, *, seeds: int, seed: int):
        super().__init__(config, env, num_updates)
        self.seeds, self.run_seed = seeds, seed

    @abc.abstractmethod
    def update(self, seed: int, number: int) -> dict[str, float]:
        """Seed `seed`'s update number `number`: collect experience, learn. Returns scalar metrics."""

    @abc.abstractmethod
    def evaluate(self, seed: int, number: int, episodes: int) -> dict[str, np.ndarray]:
        """Seed `seed`'s evaluation with the random streams of `number`: name -> `[episodes]`
        ("return" among them)."""

    @abc.abstractmethod
    def state(self) -> dict[str, np.ndarray]:
        """Every seed's learnt state as named arrays (written by `coplay.experiment.checkpoint`)."""

    @abc.abstractmethod
    def load_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore what `state()` returned."""

    @abc.abstractmethod
    def policy(self) -> Policy:
        """The policy that acts for the trained agents; its params are a seed's index."""

    def policy_params(self) -> np.ndarray:
        """`[S]`: each seed's parameters, as `policy().act` takes them (the seeds' indices)."""
        return np.arange(self.seeds)

    def samples(self) -> list[list[str]]:
        """The last evaluation's first episodes as lines of text (none by default)."""
        return []
