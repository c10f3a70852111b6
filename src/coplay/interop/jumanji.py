"""Jumanji's multi-agent environments as compiled coplay environments: `jumanji:<name>`.

    env = coplay.make("jumanji:RobotWarehouse", scenario="tiny-2ag")
    env = coplay.make("jumanji:LevelBasedForaging", scenario="8x8-2p-2f-coop")
    env = coplay.make("jumanji:Connector", grid_size=6, num_agents=3)
    env = coplay.make("jumanji:Cleaner", num_rows=6, num_cols=6, num_agents=2)
    coplay train algo=mappo env=jumanji:RobotWarehouse env.scenario=small-4ag env.time_limit=200

Names. `<name>` is the environment's class name in Jumanji (`RobotWarehouse`,
`LevelBasedForaging`, `Connector`, `Cleaner`, `MMST`, `SearchAndRescue`: the table
`ADAPTED`), which is also the name in `spec.name`; Jumanji's registered id of the same
environment (`RobotWarehouse-v0`, `Connector-v3`, ...: `jumanji.registered_environments()`)
is accepted as another spelling of it. Jumanji's other environments are single-agent (Snake,
Tetris, ...) or not adapted (MultiCVRP); building one says why (the table `NOT_ADAPTED`).
Jumanji (`pip install coplay[jumanji]`, written for 1.1) is imported when an environment is
built or the names are listed, not when this module is.

Arguments. An environment's keyword arguments are the fields of its Jumanji generator, the
time limit and the environment's own settings (`PARAMETERS`, with Jumanji's defaults; also
`ENVS.parameters("jumanji:<name>")`), e.g. `num_agents=2, shelf_rows=1` or, on the
command line, `env.num_agents=2`. Names and types are checked before anything is built.
`scenario=` names a standard size:

    RobotWarehouse      <size>-<n>ag[-easy|-hard], rware's names: size tiny (1 shelf row, 3 shelf
                        columns), small (2, 3), medium (2, 5) or large (3, 5), columns 8 high;
                        n agents; a request queue of n shelves (-easy: 2n, -hard: n/2);
                        sensor_range 1. E.g. tiny-2ag, small-4ag, large-8ag-hard. (Jumanji's
                        default warehouse is small-4ag-easy.)
    LevelBasedForaging  [<s>s-]<g>x<g>-<p>p-<f>f[-coop], lb-foraging's names: a g x g grid, p
                        agents, f food items, field of view s (default: the whole grid),
                        -coop: force_coop. E.g. 8x8-2p-2f-coop, 2s-10x10-3p-3f, 15x15-4p-5f.

A scenario sets those fields; a field also given with a value other than its default
overrides the scenario's (`scenario="tiny-2ag", sensor_range=2`).

The library's environment runs unchanged inside coplay's compiled loop: `reset(key)` is
Jumanji's `reset(key)`, `step` its `step(state, actions)`. Jumanji draws a step's randomness
(RobotWarehouse's new requests, MMST's tie breaks, SearchAndRescue's targets) from the key it
keeps in its state, set by `reset`; the key given to coplay's `step` is not used. Jumanji's
`step` does not restart an ended episode (only its AutoResetWrapper does); coplay's
`AutoReset` does. How Jumanji's observations and time steps meet coplay's contract (N agents):

    obs           [N, *shape] float32, each agent's own view:
                  RobotWarehouse      agents_view[i] (Jumanji's own per-agent vector)
                  LevelBasedForaging  agents_view[i]: a vector, or with grid_observation=True
                                      the [3, 2 fov + 1, 2 fov + 1] grid, kept as a grid
                  Connector           the grid [G, G] as agent i sees it: Jumanji's encoding
                                      (0 empty, 1 + 3k path, 2 + 3k head, 3 + 3k target of
                                      agent k) with agents renumbered from i: k -> (k - i) mod N,
                                      so every agent sees itself as agent 0 (Jumanji's own
                                      grid is agent 0's view)
                  Cleaner             the grid flattened row by row (0 dirty, 1 clean, 2 wall),
                                      then the agent's (row, col), then the other agents'
                                      in the order i+1, ..., N-1, 0, ..., i-1: R*C + 2N values
                  MMST                node_types as agent i sees them (Jumanji's relabelling,
                                      which it computes for agent 0, computed for agent i: its
                                      own nodes 1, agent i+k's 2k+1, nodes connected by agent
                                      i+k 2k, utility nodes -1), then adj_matrix flattened,
                                      then the agents' positions in the order i, i+1, ..., i-1
                  SearchAndRescue     searcher_views[i] flattened (channel by channel), then
                                      targets_remaining, then the agent's own position (x, y)
                                      over env_size
                  Jumanji's step_count is left out of every view; it is in global_state.
                  `spec.obs_space` bounds are true bounds (Jumanji's spec where it has them).
    global_state  [N * prod(shape) + 1]: every agent's view above, flattened, in agent order,
                  then the fraction of the time limit played (step_count / time_limit)
    action        [N] int, A = 5 (RobotWarehouse, Connector), 6 (LevelBasedForaging), 4 (Cleaner),
                  num_nodes (MMST), Jumanji's numbering; SearchAndRescue: [N, 2] float in [-1, 1],
                  rotation and acceleration, which Jumanji clips. An action outside 0..A-1 is clipped into
                  it; it, and an action the mask forbids, are counted in
                  info["invalid_actions"]; Jumanji then applies its own rule to a forbidden
                  action: RobotWarehouse and Connector play no-op, LevelBasedForaging's agent
                  stays (or loads nothing), Cleaner ENDS the episode (Jumanji's rule), MMST's
                  agent stays, with Jumanji's -1 penalty. SearchAndRescue: a NaN entry counts
                  as invalid and is replaced by 0.
    action_mask   [N, A] Jumanji's observation.action_mask ([N, 0] in SearchAndRescue). Where a row
                  has no legal action
                  (MMST: a finished agent, or one whose neighbours are all taken) action 0 is
                  marked legal: every choice of such an agent leaves it where it is. The other
                  environments always have one (RobotWarehouse, LevelBasedForaging and
                  Connector: no-op, 0; Cleaner, which has no no-op: the open cells of its mazes
                  are connected).
    reward        [N] float32: Jumanji's per-agent rewards (LevelBasedForaging, Connector,
                  SearchAndRescue); RobotWarehouse's, Cleaner's and MMST's reward is one team
                  reward, given to every agent.
    done          Jumanji's step_type is LAST
    truncated     done because the step count reached time_limit while the game had not ended
                  itself: RobotWarehouse without a collision on that step, LevelBasedForaging
                  with food left, Connector with an agent neither connected nor blocked, Cleaner
                  with dirty tiles left and no forbidden move, MMST with an agent unfinished,
                  SearchAndRescue with a target unfound. (LevelBasedForaging and Connector say so
                  themselves, LAST with discount 1; RobotWarehouse, Cleaner, MMST and
                  SearchAndRescue end at their time limit with discount 0, which coplay reports
                  as truncation.)
    active        all True, except: Connector, an agent connected to its target or blocked
                  (no move left; Jumanji's per-agent discount 0), and MMST, an agent that has
                  connected its nodes (Jumanji's finished_agents); all False once done.
    max_steps     time_limit, a true bound in every environment
    teams         all 0 (cooperative); roles agent_0, agent_1, ...
    info          invalid_actions [N] bool, and per environment (counts of the step, so that
                  EpisodeStats' sums are the episode's; Jumanji's own episode metrics, its
                  `extras`, on the step that ends the episode, 0 before):
                  RobotWarehouse      deliveries [] int32 requested shelves delivered (its team
                                      reward: +1 a delivery); collision [] bool the step
                                      ended the episode with two agents in one cell
                  LevelBasedForaging  food_eaten [] int32; percent_eaten [] (extras)
                  Connector           connections [] int32 agents that connected;
                                      num_connections, ratio_connections, total_path_length
                  Cleaner             tiles_cleaned [] int32; num_dirty_tiles, ratio_dirty_tiles
                  MMST                num_connections, ratio_connections
                  SearchAndRescue     targets_found [] int32 newly found targets
"""

from __future__ import annotations

import importlib.metadata
import math
import re
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.config import coerce_value
from coplay.core.env import Env
from coplay.core.errors import ConfigError, did_you_mean, unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, Discrete, Space
from coplay.core.types import EnvSpec, TimeStep
from coplay.interop.extras import require, require_release

SUPPORTED = (1, 1)          # jumanji 1.1.x
SUPPORTED_TEXT = ">=1.1,<1.2"

# The environments `jumanji:<name>` builds: Jumanji's class name -> its registered id in 1.1.
ADAPTED = {
    "RobotWarehouse": "RobotWarehouse-v0",
    "LevelBasedForaging": "LevelBasedForaging-v0",
    "Connector": "Connector-v3",
    "Cleaner": "Cleaner-v0",
    "MMST": "MMST-v0",
    "SearchAndRescue": "SearchAndRescue-v0",
}

_SINGLE = ("a single-agent environment (one action and one reward a step, no agents); jumanji:<name> "
           "adapts Jumanji's multi-agent environments: " + ", ".join(ADAPTED))

# Jumanji 1.1's other registered environments, by class name, and why they are not built.
NOT_ADAPTED = {
    **{name: _SINGLE for name in (
        "Game2048", "GraphColoring", "Minesweeper", "RubiksCube", "Sudoku", "SlidingTilePuzzle",
        "BinPack", "FlatPack", "JobShop", "Knapsack", "Tetris",
        "CVRP", "TSP", "Maze", "Snake", "Sokoban", "PacMan")},
    "MultiCVRP": "a routing problem whose vehicles act together and share one reward, each observing a copy "
                 "of the whole problem; not adapted (jumanji:<name> adapts " + ", ".join(ADAPTED) + ")",
}

# rware's warehouse sizes: name -> (shelf_rows, shelf_columns); shelf columns are 8 high.
RWARE_SIZES = {"tiny": (1, 3), "small": (2, 3), "medium": (2, 5), "large": (3, 5)}
RWARE_QUEUE = {"": 1.0, "-easy": 2.0, "-hard": 0.5}          # request queue size per agent
RWARE_EXAMPLES = ("tiny-2ag", "tiny-4ag", "small-4ag", "medium-4ag", "medium-6ag", "large-4ag", "large-8ag",
                  "tiny-4ag-easy", "small-4ag-easy", "large-8ag-hard")
LBF_EXAMPLES = ("8x8-2p-2f-coop", "2s-8x8-2p-2f-coop", "10x10-3p-3f", "2s-10x10-3p-3f", "15x15-3p-5f",
                "15x15-4p-3f", "15x15-4p-5f")
CONNECTOR_REWARDS = ("dense", "shared_dense", "sparse", "shared_sparse")


# --- jumanji, its version, the names ------------------------------------------------------------

_CACHE: dict[str, Any] = {}


def _installed_version() -> str:
    return importlib.metadata.version("jumanji")


def check_version(version: str) -> None:
    """Refuse a Jumanji release the adapter was not written for."""
    require_release("jumanji", version, SUPPORTED, SUPPORTED_TEXT, "coplay's jumanji:<name> adapter", "jumanji")


def _import():
    """jumanji, imported and version-checked once."""
    if "jumanji" not in _CACHE:
        module = require("jumanji", "jumanji", "Jumanji's environments")
        check_version(_installed_version())
        _CACHE["jumanji"] = module
    return _CACHE["jumanji"]


def _registered() -> list[str]:
    return sorted(_import().registered_environments())


def _class_of(name: str) -> str | None:
    """The class name that `name` (a class name or a registered id) means, or None."""
    if name in ADAPTED or name in NOT_ADAPTED:
        return name
    if name in _registered():
        base = re.sub(r"-v\d+$", "", name)
        known = [c for c in (*ADAPTED, *NOT_ADAPTED) if base == c or base.startswith(c + "-")]
        return max(known, key=len) if known else None
    return None


def jumanji_envs() -> list[str]:
    """The names `jumanji:<name>` builds: the adapted class names and their registered ids."""
    registered = set(_registered())
    return [*ADAPTED, *(i for i in ADAPTED.values() if i in registered)]


def _choices() -> list[str]:
    """Every name `jumanji:<name>` knows: those it builds, and Jumanji's others (building one says why)."""
    adapted = set(jumanji_envs())
    return [*jumanji_envs(), *NOT_ADAPTED, *(i for i in _registered() if i not in adapted)]


def _adapted(name: str) -> str:
    """The adapted class `name` means; ConfigError for Jumanji's other environments."""
    cls = _class_of(name)
    if cls in ADAPTED:
        return cls
    if cls is not None:
        raise ConfigError(f"jumanji:{name} is not adapted: {cls} is {NOT_ADAPTED[cls]}")
    raise unknown_name("Jumanji environment", name, _choices())


def parameters(name: str) -> dict[str, Any]:
    """The keyword arguments of `jumanji:<name>` and their defaults (Jumanji's)."""
    _import()
    return dict(CLASSES[_adapted(name)].PARAMETERS)


# --- the adapter ----------------------------------------------------------------------------------

@struct.dataclass
class JumanjiState:
    env: Any             # Jumanji's state
    mask: jax.Array      # [N, A] bool the legal actions of the last time step
    t: jax.Array         # [] int32 steps played in this episode
    over: jax.Array      # [] bool the episode has ended


def _rotations(n: int) -> np.ndarray:
    """[N, N] row i: i, i+1, ..., N-1, 0, ..., i-1."""
    return (np.arange(n)[:, None] + np.arange(n)[None, :]) % n


def _count(x: jax.Array) -> jax.Array:
    return jnp.sum(x).astype(jnp.int32)


class JumanjiEnv(Env):
    """A Jumanji multi-agent environment under coplay's contract (see the module docstring).
    Subclasses, one per environment, say how its observation, masks, ends and statistics read."""

    NAME: ClassVar[str] = ""
    PARAMETERS: ClassVar[dict[str, Any]] = {}
    SCENARIO_FIELDS: ClassVar[tuple[str, ...]] = ()
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}   # parameters that name one of a few settings
    EXTRAS: ClassVar[tuple[str, ...]] = ()          # Jumanji's extras reported on the last step
    TEAM_REWARD: ClassVar[bool] = False              # Jumanji's reward is one scalar for the team

    def __init__(self, **kwargs: Any):
        _import()
        self.params = self._arguments(kwargs)
        try:
            self.lib = self._build(self.params)
        except (AssertionError, ValueError, TypeError, KeyError) as e:
            raise ConfigError(f"jumanji:{self.NAME} rejected its arguments {kwargs}: {e or type(e).__name__}") from e
        self.n = n = int(self.lib.num_agents)
        self.time_limit = int(self.lib.time_limit)

        def first(key):
            lib_state, lib_ts = self.lib.reset(key)
            return self._views(lib_ts.observation, lib_state), self._lib_mask(lib_ts.observation, lib_state)

        views, mask = jax.eval_shape(first, jax.random.PRNGKey(0))
        self.obs_shape = tuple(views.shape[1:])
        self.num_choices = int(mask.shape[1])
        low, high = self._bounds()
        action_space: Space = Discrete(self.num_choices) if self.num_choices else Box(-1.0, 1.0, (2,))
        self.spec = EnvSpec(
            name=f"jumanji:{self.NAME}",
            num_agents=n,
            obs_space=Box(low, high, self.obs_shape),
            action_space=action_space,
            global_state_space=Box(min(low, 0.0), max(high, 1.0), (n * math.prod(self.obs_shape) + 1,)),
            max_steps=self.time_limit,
            teams=(0,) * n,
            roles=tuple(f"agent_{i}" for i in range(n)),
        )

    # --- arguments --------------------------------------------------------------------------------

    @classmethod
    def _arguments(cls, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Every parameter's value: `kwargs` checked against PARAMETERS, the scenario applied."""
        params = cls.PARAMETERS
        out = dict(params)
        for key, value in kwargs.items():
            if key not in params:
                raise unknown_name(f"argument of environment 'jumanji:{cls.NAME}':", key, params)
            default = params[key]
            where = f"jumanji:{cls.NAME} {key}"
            if default is not None:
                out[key] = coerce_value(where, value, type(default))
            elif value is None:
                out[key] = None
            elif key == "scenario":
                if not isinstance(value, str):
                    raise ConfigError(f"{where} must be a scenario name, got {value!r}")
                out[key] = value
            else:                                   # an int whose default depends on others
                out[key] = coerce_value(where, value, int)
        for key, value in out.items():
            if isinstance(value, int) and not isinstance(value, bool) and value < 1:
                raise ConfigError(f"jumanji:{cls.NAME} {key}={value} is out of range; it must be >= 1")
        for key, valid in cls.CHOICES.items():
            if out[key] not in valid:
                raise unknown_name(f"{key} of jumanji:{cls.NAME}:", out[key], valid)
        if out.get("scenario") is not None:
            scenario = cls._scenario(out["scenario"])
            for key in cls.SCENARIO_FIELDS:
                if out[key] == params[key]:
                    out[key] = scenario[key]
        return out

    @classmethod
    def _scenario(cls, name: str) -> dict[str, Any]:
        raise ConfigError(f"jumanji:{cls.NAME} has no scenarios")  # pragma: no cover - only where declared

    # --- what each environment says ------------------------------------------------------------------

    def _build(self, p: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _views(self, obs: Any, lib_state: Any) -> jax.Array:
        """[N, *shape] float32 every agent's own view."""
        raise NotImplementedError

    def _bounds(self) -> tuple[float, float]:
        raise NotImplementedError

    def _lib_mask(self, obs: Any, lib_state: Any) -> jax.Array:
        return obs.action_mask.astype(bool)

    def _ended(self, before: Any, after: Any, actions: jax.Array) -> jax.Array:
        """[] bool: the game itself ended the episode on the step `before` -> `after`."""
        raise NotImplementedError

    def _agents_done(self, lib_state: Any, mask: jax.Array) -> jax.Array:
        """[N] bool agents that are finished while the episode goes on."""
        return jnp.zeros(self.n, bool)

    def _step_info(self, before: Any, after: Any, reward: jax.Array, ended: jax.Array) -> dict[str, jax.Array]:
        """The step's own counts (zero when `before` is `after`, at reset)."""
        return {}

    # --- the contract --------------------------------------------------------------------------------

    def _mask(self, obs: Any, lib_state: Any) -> jax.Array:
        mask = self._lib_mask(obs, lib_state)
        if not self.num_choices:
            return mask
        empty = ~mask.any(axis=-1, keepdims=True)
        return mask | (empty & (jnp.arange(self.num_choices) == 0))

    def _timestep(self, state: JumanjiState, lib_ts: Any, reward: jax.Array, done: jax.Array,
                  truncated: jax.Array, info: dict[str, jax.Array]) -> TimeStep:
        views = self._views(lib_ts.observation, state.env)
        active = ~self._agents_done(state.env, self._lib_mask(lib_ts.observation, state.env)) & ~state.over
        progress = (state.t.astype(jnp.float32) / self.time_limit)[None]
        return TimeStep(
            obs=views, reward=reward, done=done, truncated=truncated, active=active,
            action_mask=state.mask, global_state=jnp.concatenate([views.reshape(-1), progress]), info=info,
        )

    def _info(self, before: Any, after: Any, lib_ts: Any, reward: jax.Array, ended: jax.Array, done: jax.Array,
              invalid: jax.Array) -> dict[str, jax.Array]:
        info = {"invalid_actions": invalid, **self._step_info(before, after, reward, ended)}
        extras = lib_ts.extras or {}
        for key in self.EXTRAS:
            value = jnp.asarray(extras[key])
            dtype = jnp.int32 if jnp.issubdtype(value.dtype, jnp.integer) else jnp.float32
            info[key] = jnp.where(done, value, 0).astype(dtype)
        return info

    def _reward(self, lib_reward: jax.Array) -> jax.Array:
        r = jnp.asarray(lib_reward, jnp.float32)
        return jnp.broadcast_to(r.reshape(()), (self.n,)) if self.TEAM_REWARD else r.reshape(self.n)

    def _reset(self, key: jax.Array) -> tuple[JumanjiState, TimeStep]:
        lib_state, lib_ts = self.lib.reset(key)
        no = jnp.zeros((), bool)
        state = JumanjiState(env=lib_state, mask=self._mask(lib_ts.observation, lib_state),
                             t=jnp.zeros((), jnp.int32), over=no)
        reward = jnp.zeros(self.n, jnp.float32)
        info = self._info(lib_state, lib_state, lib_ts, reward, no, no, jnp.zeros(self.n, bool))
        return state, self._timestep(state, lib_ts, reward, no, no, info)

    def _actions(self, actions: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
        if not self.num_choices:                    # SearchAndRescue's steering
            a = jnp.asarray(actions, jnp.float32)
            nan = jnp.isnan(a)
            return jnp.where(nan, 0.0, a), nan.any(axis=-1)
        a = actions.astype(jnp.int32)
        clipped = jnp.clip(a, 0, self.num_choices - 1)
        allowed = jnp.take_along_axis(mask, clipped[:, None], axis=1)[:, 0]
        return clipped, (a != clipped) | ~allowed

    def _step(self, state: JumanjiState, actions: jax.Array, key: jax.Array) -> tuple[JumanjiState, TimeStep]:
        acts, invalid = self._actions(actions, state.mask)
        lib_state, lib_ts = self.lib.step(state.env, acts)
        done = lib_ts.last()
        ended = self._ended(state.env, lib_state, acts) & done
        new = JumanjiState(env=lib_state, mask=self._mask(lib_ts.observation, lib_state), t=state.t + 1,
                           over=state.over | done)
        reward = self._reward(lib_ts.reward)
        info = self._info(state.env, lib_state, lib_ts, reward, ended, done, invalid & ~state.over)
        return new, self._timestep(new, lib_ts, reward, done, done & ~ended, info)


# --- the environments -------------------------------------------------------------------------------

class RobotWarehouse(JumanjiEnv):
    NAME = "RobotWarehouse"
    PARAMETERS: ClassVar[dict[str, Any]] = {
        "scenario": None, "shelf_rows": 2, "shelf_columns": 3, "column_height": 8, "num_agents": 4,
        "sensor_range": 1, "request_queue_size": 8, "time_limit": 500,
    }
    SCENARIO_FIELDS = ("shelf_rows", "shelf_columns", "column_height", "num_agents", "sensor_range",
                       "request_queue_size")
    TEAM_REWARD = True

    @classmethod
    def _scenario(cls, name: str) -> dict[str, Any]:
        m = re.fullmatch(r"(tiny|small|medium|large)-(\d+)ag(-easy|-hard)?", name)
        queue = int(int(m.group(2)) * RWARE_QUEUE[m.group(3) or ""]) if m else 0
        if m is None or int(m.group(2)) < 1 or queue < 1:
            raise ConfigError(
                f"unknown RobotWarehouse scenario {name!r}{did_you_mean(name, RWARE_EXAMPLES)}: a scenario is "
                f"<size>-<n>ag[-easy|-hard], size one of {', '.join(RWARE_SIZES)}, n >= 1 agents (-hard: n >= 2); "
                f"e.g. {', '.join(RWARE_EXAMPLES)}")
        rows, columns = RWARE_SIZES[m.group(1)]
        return {"shelf_rows": rows, "shelf_columns": columns, "column_height": 8, "num_agents": int(m.group(2)),
                "sensor_range": 1, "request_queue_size": queue}

    def _build(self, p: dict[str, Any]) -> Any:
        from jumanji import environments
        from jumanji.environments.routing.robot_warehouse.generator import RandomGenerator

        generator = RandomGenerator(shelf_rows=p["shelf_rows"], shelf_columns=p["shelf_columns"],
                                    column_height=p["column_height"], num_agents=p["num_agents"],
                                    sensor_range=p["sensor_range"], request_queue_size=p["request_queue_size"])
        if int(generator.not_in_queue_size) < 1:
            raise ValueError(f"request_queue_size={p['request_queue_size']} leaves no shelf out of the queue: "
                             f"the warehouse has {len(generator.shelf_ids)} shelves")
        return environments.RobotWarehouse(generator=generator, time_limit=p["time_limit"])

    def _views(self, obs: Any, lib_state: Any) -> jax.Array:
        return obs.agents_view.astype(jnp.float32)

    def _bounds(self) -> tuple[float, float]:
        # positions (row, column) on the grid; every other feature is 0 or 1
        return 0.0, float(max(1, max(self.lib.grid_size) - 1))

    def _collision(self, lib_state: Any) -> jax.Array:
        from jumanji.environments.routing.robot_warehouse.utils import is_collision
        hits = jax.vmap(lambda agent, i: is_collision(lib_state.grid, agent, i))(lib_state.agents, jnp.arange(self.n))
        return jnp.any(hits)

    def _ended(self, before: Any, after: Any, actions: jax.Array) -> jax.Array:
        return self._collision(after)

    def _step_info(self, before: Any, after: Any, reward: jax.Array, ended: jax.Array) -> dict[str, jax.Array]:
        # Jumanji's team reward is +1 for each requested shelf delivered on the step
        return {"deliveries": jnp.round(reward[0]).astype(jnp.int32), "collision": ended}


class LevelBasedForaging(JumanjiEnv):
    NAME = "LevelBasedForaging"
    PARAMETERS: ClassVar[dict[str, Any]] = {
        "scenario": None, "grid_size": 8, "fov": None, "num_agents": 2, "num_food": 2, "max_agent_level": 2,
        "force_coop": True, "time_limit": 100, "grid_observation": False, "normalize_reward": True,
        "penalty": 0.0,
    }
    SCENARIO_FIELDS = ("grid_size", "fov", "num_agents", "num_food", "force_coop")
    EXTRAS = ("percent_eaten",)

    @classmethod
    def _scenario(cls, name: str) -> dict[str, Any]:
        m = re.fullmatch(r"(?:(\d+)s-)?(\d+)x(\d+)-(\d+)p-(\d+)f(-coop)?", name)
        if m is None or m.group(2) != m.group(3):
            raise ConfigError(
                f"unknown LevelBasedForaging scenario {name!r}{did_you_mean(name, LBF_EXAMPLES)}: a scenario is "
                f"[<s>s-]<g>x<g>-<p>p-<f>f[-coop] (field of view s, a square g x g grid, p agents, f food items), "
                f"e.g. {', '.join(LBF_EXAMPLES)}")
        return {"grid_size": int(m.group(2)), "fov": int(m.group(1)) if m.group(1) else None,
                "num_agents": int(m.group(4)), "num_food": int(m.group(5)), "force_coop": bool(m.group(6))}

    def _build(self, p: dict[str, Any]) -> Any:
        from jumanji import environments
        from jumanji.environments.routing.lbf.generator import RandomGenerator

        fov = p["grid_size"] if p["fov"] is None else p["fov"]
        generator = RandomGenerator(grid_size=p["grid_size"], num_agents=p["num_agents"], num_food=p["num_food"],
                                    fov=fov, max_agent_level=p["max_agent_level"], force_coop=p["force_coop"])
        return environments.LevelBasedForaging(
            generator=generator, time_limit=p["time_limit"], grid_observation=p["grid_observation"],
            normalize_reward=p["normalize_reward"], penalty=p["penalty"])

    def _views(self, obs: Any, lib_state: Any) -> jax.Array:
        return obs.agents_view.astype(jnp.float32)

    def _bounds(self) -> tuple[float, float]:
        spec = self.lib.observation_spec.agents_view
        return float(np.min(spec.minimum)), float(np.max(spec.maximum))

    def _ended(self, before: Any, after: Any, actions: jax.Array) -> jax.Array:
        return jnp.all(after.food_items.eaten)

    def _step_info(self, before: Any, after: Any, reward: jax.Array, ended: jax.Array) -> dict[str, jax.Array]:
        return {"food_eaten": _count(after.food_items.eaten) - _count(before.food_items.eaten)}


class Connector(JumanjiEnv):
    NAME = "Connector"
    PARAMETERS: ClassVar[dict[str, Any]] = {"grid_size": 10, "num_agents": 10, "time_limit": 50, "reward": "dense"}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"reward": CONNECTOR_REWARDS}
    EXTRAS = ("num_connections", "ratio_connections", "total_path_length")

    def _build(self, p: dict[str, Any]) -> Any:
        from jumanji import environments
        from jumanji.environments.routing.connector import reward as rewards
        from jumanji.environments.routing.connector.generator import RandomWalkGenerator

        reward_fn = {"dense": rewards.DenseRewardFn, "shared_dense": rewards.SharedDenseRewardFn,
                     "sparse": rewards.SparseRewardFn, "shared_sparse": rewards.SharedSparseRewardFn}[p["reward"]]()
        generator = RandomWalkGenerator(grid_size=p["grid_size"], num_agents=p["num_agents"])
        return environments.Connector(generator=generator, reward_fn=reward_fn, time_limit=p["time_limit"])

    def _views(self, obs: Any, lib_state: Any) -> jax.Array:
        grid = obs.grid[None]                                   # [1, G, G]
        me = jnp.arange(self.n)[:, None, None]
        owner, kind = (grid - 1) // 3, (grid - 1) % 3
        seen = jnp.where(grid > 0, 1 + 3 * ((owner - me) % self.n) + kind, 0)
        return seen.astype(jnp.float32)

    def _bounds(self) -> tuple[float, float]:
        return 0.0, float(3 * self.n)

    def _agents_done(self, lib_state: Any, mask: jax.Array) -> jax.Array:
        from jumanji.environments.routing.connector.utils import connected_or_blocked
        return jax.vmap(connected_or_blocked)(lib_state.agents, mask)

    def _ended(self, before: Any, after: Any, actions: jax.Array) -> jax.Array:
        return jnp.all(self._agents_done(after, after.action_mask))

    def _step_info(self, before: Any, after: Any, reward: jax.Array, ended: jax.Array) -> dict[str, jax.Array]:
        return {"connections": _count(after.agents.connected) - _count(before.agents.connected)}


class Cleaner(JumanjiEnv):
    NAME = "Cleaner"
    PARAMETERS: ClassVar[dict[str, Any]] = {"num_rows": 10, "num_cols": 10, "num_agents": 3, "time_limit": None,
                                            "penalty_per_timestep": 0.5}
    EXTRAS = ("num_dirty_tiles", "ratio_dirty_tiles")
    TEAM_REWARD = True

    def _build(self, p: dict[str, Any]) -> Any:
        from jumanji import environments
        from jumanji.environments.routing.cleaner.generator import RandomGenerator

        generator = RandomGenerator(num_rows=p["num_rows"], num_cols=p["num_cols"], num_agents=p["num_agents"])
        return environments.Cleaner(generator=generator, time_limit=p["time_limit"],
                                    penalty_per_timestep=p["penalty_per_timestep"])

    def _views(self, obs: Any, lib_state: Any) -> jax.Array:
        grid = jnp.broadcast_to(obs.grid.reshape(-1), (self.n, obs.grid.size))
        locations = obs.agents_locations[_rotations(self.n)].reshape(self.n, 2 * self.n)
        return jnp.concatenate([grid, locations], axis=1).astype(jnp.float32)

    def _bounds(self) -> tuple[float, float]:
        return 0.0, float(max(2, self.lib.num_rows - 1, self.lib.num_cols - 1))

    def _ended(self, before: Any, after: Any, actions: jax.Array) -> jax.Array:
        from jumanji.environments.routing.cleaner.constants import DIRTY
        forbidden = ~before.action_mask[jnp.arange(self.n), actions]
        return jnp.any(forbidden) | ~jnp.any(after.grid == DIRTY)

    def _step_info(self, before: Any, after: Any, reward: jax.Array, ended: jax.Array) -> dict[str, jax.Array]:
        return {"tiles_cleaned": _count(before.grid != after.grid)}


class MMST(JumanjiEnv):
    NAME = "MMST"
    PARAMETERS: ClassVar[dict[str, Any]] = {"num_nodes": 36, "num_edges": 72, "max_degree": 5, "num_agents": 3,
                                            "num_nodes_per_agent": 4, "time_limit": 70}
    EXTRAS = ("num_connections", "ratio_connections")
    TEAM_REWARD = True

    def _build(self, p: dict[str, Any]) -> Any:
        from jumanji import environments
        from jumanji.environments.routing.mmst.generator import SplitRandomGenerator

        generator = SplitRandomGenerator(num_nodes=p["num_nodes"], num_edges=p["num_edges"],
                                         max_degree=p["max_degree"], num_agents=p["num_agents"],
                                         num_nodes_per_agent=p["num_nodes_per_agent"], max_step=p["time_limit"])
        return environments.MMST(generator=generator, time_limit=p["time_limit"])

    def _node_types(self, lib_state: Any) -> jax.Array:
        """[N, num_nodes] node types as each agent sees them: Jumanji's relabelling of
        `_state_to_observation`, done there for agent 0, here for every agent."""
        from jumanji.environments.routing.mmst.constants import UTILITY_NODE
        n = self.n
        me = jnp.arange(n)[:, None]
        types = lib_state.node_types[None, :]
        utility = types == UTILITY_NODE
        seen = (((types - me) % n) * 2 + 1) * ~utility - utility
        for agent in range(n):
            connected = lib_state.connected_nodes_index[agent][None, :] != UTILITY_NODE
            seen = seen * ~connected + 2 * ((agent - me) % n) * connected
        return seen

    def _views(self, obs: Any, lib_state: Any) -> jax.Array:
        n = self.n
        adjacency = jnp.broadcast_to(obs.adj_matrix.reshape(-1), (n, obs.adj_matrix.size))
        positions = obs.positions[_rotations(n)]
        return jnp.concatenate([self._node_types(lib_state), adjacency, positions], axis=1).astype(jnp.float32)

    def _bounds(self) -> tuple[float, float]:
        return -1.0, float(max(2 * self.n - 1, self.lib.num_nodes - 1, 1))

    def _agents_done(self, lib_state: Any, mask: jax.Array) -> jax.Array:
        return lib_state.finished_agents

    def _ended(self, before: Any, after: Any, actions: jax.Array) -> jax.Array:
        return jnp.all(after.finished_agents)


class SearchAndRescue(JumanjiEnv):
    NAME = "SearchAndRescue"
    PARAMETERS: ClassVar[dict[str, Any]] = {
        "num_searchers": 2, "num_targets": 40, "env_size": 1.0, "target_contact_range": 0.02,
        "searcher_max_rotate": 0.25, "searcher_max_accelerate": 0.005, "searcher_min_speed": 0.005,
        "searcher_max_speed": 0.02, "num_vision": 128, "searcher_vision_range": 0.4, "target_vision_range": 0.1,
        "view_angle": 0.4, "time_limit": 400,
    }

    def _build(self, p: dict[str, Any]) -> Any:
        from jumanji import environments
        from jumanji.environments.swarms.search_and_rescue.generator import RandomGenerator
        from jumanji.environments.swarms.search_and_rescue.observations import AgentAndTargetObservationFn

        observation = AgentAndTargetObservationFn(
            num_vision=p["num_vision"], searcher_vision_range=p["searcher_vision_range"],
            target_vision_range=p["target_vision_range"], view_angle=p["view_angle"],
            agent_radius=p["target_contact_range"], env_size=p["env_size"])
        generator = RandomGenerator(num_searchers=p["num_searchers"], num_targets=p["num_targets"],
                                    env_size=p["env_size"])
        return environments.SearchAndRescue(
            target_contact_range=p["target_contact_range"], searcher_max_rotate=p["searcher_max_rotate"],
            searcher_max_accelerate=p["searcher_max_accelerate"], searcher_min_speed=p["searcher_min_speed"],
            searcher_max_speed=p["searcher_max_speed"], time_limit=p["time_limit"], generator=generator,
            observation=observation)

    def _lib_mask(self, obs: Any, lib_state: Any) -> jax.Array:
        return jnp.zeros((obs.positions.shape[0], 0), bool)

    def _views(self, obs: Any, lib_state: Any) -> jax.Array:
        n = obs.positions.shape[0]
        remaining = jnp.broadcast_to(jnp.asarray(obs.targets_remaining, jnp.float32), (n, 1))
        return jnp.concatenate([obs.searcher_views.reshape(n, -1), remaining, obs.positions], axis=1
                               ).astype(jnp.float32)

    def _bounds(self) -> tuple[float, float]:
        return -1.0, 1.0

    def _ended(self, before: Any, after: Any, actions: jax.Array) -> jax.Array:
        return jnp.all(after.targets.found)

    def _step_info(self, before: Any, after: Any, reward: jax.Array, ended: jax.Array) -> dict[str, jax.Array]:
        return {"targets_found": _count(after.targets.found) - _count(before.targets.found)}


CLASSES: dict[str, type[JumanjiEnv]] = {
    c.NAME: c for c in (RobotWarehouse, LevelBasedForaging, Connector, Cleaner, MMST, SearchAndRescue)}
assert set(CLASSES) == set(ADAPTED)


# --- registration -----------------------------------------------------------------------------------

def make_jumanji(name: str, **kwargs: Any) -> JumanjiEnv:
    """`jumanji:<name>`: Jumanji's multi-agent environment `name` (its class name or registered
    id), its generator's fields, time limit and settings as keywords (`PARAMETERS`)."""
    _import()
    return CLASSES[_adapted(name)](**kwargs)


ENVS.register_prefix(
    "jumanji", make_jumanji, kind="benchmarks", choices=_choices, parameters=parameters,
    description="Jumanji's multi-agent environments compiled under coplay's contract: jumanji:RobotWarehouse "
                "env.scenario=tiny-2ag, jumanji:LevelBasedForaging env.scenario=8x8-2p-2f-coop, jumanji:Connector, "
                "jumanji:Cleaner, jumanji:MMST, jumanji:SearchAndRescue (needs `pip install coplay[jumanji]`).",
)

__all__ = ["ADAPTED", "CLASSES", "NOT_ADAPTED", "JumanjiEnv", "JumanjiState", "check_version", "jumanji_envs",
           "make_jumanji", "parameters"]
