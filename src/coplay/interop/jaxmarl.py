"""JaxMARL's environments as compiled coplay environments: `jaxmarl:<name>`.

    env = coplay.make("jaxmarl:HeuristicEnemySMAX", scenario="3m")     # SMAX against JaxMARL's heuristic enemy
    env = coplay.make("jaxmarl:overcooked", layout="cramped_room")
    env = coplay.make("jaxmarl:MPE_simple_spread_v3")
    coplay train algo=mappo env=jaxmarl:HeuristicEnemySMAX env.scenario=2s3z

`<name>` is JaxMARL's registered id (`jaxmarl.registered_envs`); its constructor's
arguments are the environment's arguments (`env.FIELD=...`), checked against the
constructor's signature before anything is built. Two take names instead of the
objects JaxMARL's constructors take: SMAX's `scenario` is a map name of
`jaxmarl.environments.smax.MAP_NAME_TO_SCENARIO` (`3m`, `2s3z`, `5m_vs_6m`,
`smacv2_5_units`, ...), Overcooked's `layout` a layout name (`cramped_room`,
`asymm_advantages`, `coord_ring`, `forced_coord`, `counter_circuit`). JaxMARL
(`pip install coplay[jaxmarl]`, written for 0.2) is imported when an environment
is built, not when this module is.

The library's environment runs unchanged inside coplay's compiled loop (no host
callback): `reset` is JaxMARL's `reset`, `step` its `step_env` on the same key,
state and actions. How its dictionaries keyed by agent name meet coplay's arrays:

    agents        the library's `env.agents`, in its order; `spec.roles` names them
    obs           [N, *shape] float32. Where every agent's observation has one shape it
                  is kept (Overcooked's and STORM's grids stay [H, W, C]); where shapes
                  differ (MPE's adversaries and good agents, the crypto game's eve),
                  each agent's observation is flattened and zeros are appended up to
                  the longest. `spec.obs_space` bounds include the padding's 0.
    action        [N] int: an agent with fewer actions than the largest space has the
                  extra ones masked out; an action outside the agent's own range is
                  clipped into it and counted in info["invalid_actions"], as is an
                  action the mask forbids (the library then applies it by its own
                  rules: SMAX ignores an attack on a unit out of range).
                  Continuous action spaces: [N, d] float, padded to the largest d.
    action_mask   the library's available actions where it has them (SMAX's
                  `get_avail_actions`, Hanabi's `get_legal_moves`); else every action
                  of the agent's own space
    active        False for an agent the library reports done while the episode goes
                  on (a dead SMAX unit), and, in Hanabi, for every player but the one
                  to move; False for every agent once the episode is over
    global_state  SMAX: the library's `world_state`; every other environment: the
                  agents' observations as above, flattened and concatenated in agent
                  order (JaxMARL's own MAPPO does the same for MPE and Overcooked)
    reward        [N] float32, the library's per-agent rewards
    done          the library's dones["__all__"], or the episode reached max_steps
    max_steps     the library's episode length: its max_steps (MPE and SMAX play one step
                  more, max_steps + 1, and so does coplay, so returns compare with
                  JaxMARL's), STORM's and the coin game's inner steps times outer steps
    truncated     the episode ended by its time limit rather than by the game: MPE,
                  Overcooked, STORM and the coin game always end by their length;
                  SMAX when neither team was wiped out; Hanabi and the switch riddle
                  only at coplay's max_steps (Hanabi's is a bound no game reaches)
    info          invalid_actions [N] bool; the library's per-step info converted to
                  arrays ([N] for per-agent values); SMAX: win [N] bool on the step
                  that ends the battle with every enemy dead and an ally alive;
                  Overcooked: soups [N] (soups delivered on this step, its shared
                  reward over 20) and shaped_reward [N]

Auto-reset. JaxMARL's `step` restarts an ended episode inside the same call; the
adapter calls `step_env`, which does not, and coplay's `AutoReset` starts the next
episode, so an episode's last observation is kept. STORM and the coin game also
restart their inner game inside `step_env` when its last step is played, which
replaces that step's observation with the next game's and zeroes its rewards;
for the step that ends the episode the adapter lets the library play the step
without that restart (it hides the step count from the library for that one
call), so the last observation and rewards are the game's. Before that step the
two are equal, observation for observation (tests/test_jaxmarl_envs.py).
Multi-agent MuJoCo (MABrax: `ant_4x2`, `hopper_3x1`, ...; `pip install coplay[mabrax]`)
is built with brax's own auto-reset off, and its episode wrapper's truncation flag
is `truncated`.
"""

from __future__ import annotations

import builtins
import importlib.metadata
import inspect
import math
import sys
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError, MissingExtraError, unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.interop.extras import require, require_release

SUPPORTED = (0, 2)          # jaxmarl 0.2.x
SUPPORTED_TEXT = ">=0.2,<0.3"

# JaxMARL's registered id -> the class `jaxmarl.make` builds (jaxmarl.environments.<name>).
CLASSES = {
    "MPE_simple_v3": "SimpleMPE",
    "MPE_simple_tag_v3": "SimpleTagMPE",
    "MPE_simple_world_comm_v3": "SimpleWorldCommMPE",
    "MPE_simple_spread_v3": "SimpleSpreadMPE",
    "MPE_simple_crypto_v3": "SimpleCryptoMPE",
    "MPE_simple_speaker_listener_v4": "SimpleSpeakerListenerMPE",
    "MPE_simple_push_v3": "SimplePushMPE",
    "MPE_simple_adversary_v3": "SimpleAdversaryMPE",
    "MPE_simple_reference_v3": "SimpleReferenceMPE",
    "MPE_simple_facmac_v1": "SimpleFacmacMPE",
    "MPE_simple_facmac_3a_v1": "SimpleFacmacMPE3a",
    "MPE_simple_facmac_6a_v1": "SimpleFacmacMPE6a",
    "MPE_simple_facmac_9a_v1": "SimpleFacmacMPE9a",
    "switch_riddle": "SwitchRiddle",
    "SMAX": "SMAX",
    "HeuristicEnemySMAX": "HeuristicEnemySMAX",
    "storm": "InTheGrid",
    "storm_2p": "InTheGrid_2p",
    "storm_np": "InTheMatrix",
    "hanabi": "Hanabi",
    "overcooked": "Overcooked",
    "overcooked_v2": "OvercookedV2",
    "coin_game": "CoinGame",
    "jaxnav": "JaxNav",
    # multi-agent MuJoCo (MABrax), with brax installed (pip install coplay[mabrax])
    "ant_4x2": "Ant",
    "halfcheetah_6x1": "HalfCheetah",
    "hopper_3x1": "Hopper",
    "humanoid_9|8": "Humanoid",
    "walker2d_2x3": "Walker2d",
}
MABRAX = ("ant_4x2", "halfcheetah_6x1", "hopper_3x1", "humanoid_9|8", "walker2d_2x3")

# Registered ids the adapter does not build, and why.
NOT_ADAPTED = {
    "LearnedPolicyEnemySMAX": "its enemy is a trained policy and its parameters, given as Python objects; "
                              "use HeuristicEnemySMAX, or SMAX with both teams learning",
    **{f"JaxRobotarium_{t}": "needs the jaxrobotarium package, which is not on PyPI"
       for t in ("navigation", "discovery", "material_transport", "warehouse", "arctic_transport",
                 "foraging", "rware", "predator_prey")},
}

# Constructor arguments that take the library's objects (agent lists, spaces, colours), not settings.
OBJECT_ARGUMENTS = ("agents", "action_spaces", "observation_spaces", "landmarks", "colour", "color_map",
                    "env_name", "agent_obs_mapping", "agent_action_mapping",
                    "auto_reset")   # MABrax: coplay's AutoReset restarts episodes, never brax's own

SMAX_NAMES = ("SMAX", "HeuristicEnemySMAX")
STORM_NAMES = ("storm", "storm_2p", "storm_np")
INNER_GAMES = (*STORM_NAMES, "coin_game")           # restart an inner game inside step_env
TIME_LIMITED = (*INNER_GAMES, "overcooked", "overcooked_v2", "jaxnav")   # end only by length
OVERCOOKED_DELIVERY = 20.0                           # Overcooked's reward for one soup


def _import():
    """jaxmarl, imported quietly (it prints a line about optional submodules), version-checked."""
    if "jaxmarl" not in _CACHE:
        # jaxmarl's import prints, and something it imports rebinds sys.stdout to the process's
        # own; both are undone here, so that a caller's captured stdout stays captured.
        streams, real_print = (sys.stdout, sys.stderr), builtins.print
        builtins.print = _quiet
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                module = require("jaxmarl", "jaxmarl", "JaxMARL's environments")
        finally:
            builtins.print = real_print
            sys.stdout, sys.stderr = streams
        version = importlib.metadata.version("jaxmarl")
        check_version(version)
        _CACHE["jaxmarl"] = module
    return _CACHE["jaxmarl"]


_CACHE: dict[str, Any] = {}
_ARRAY_ARGUMENTS: set[tuple[str, str]] = set()   # (name, argument) whose library default is an array


def _quiet(*args: Any, **kwargs: Any) -> None:
    """`print` while jaxmarl imports: nothing."""


def check_version(version: str) -> None:
    """Refuse a JaxMARL release the adapter was not written for."""
    require_release("jaxmarl", version, SUPPORTED, SUPPORTED_TEXT, "coplay's jaxmarl:<name> adapter", "jaxmarl")


def jaxmarl_envs() -> list[str]:
    """The ids `jaxmarl:<name>` accepts: JaxMARL's registered ids that the adapter builds."""
    registered = _import().registered_envs
    return [n for n in registered if n in CLASSES]


def _cls(name: str):
    import jaxmarl.environments as envs
    if name in MABRAX and not envs.MABRAX_AVAILABLE:
        raise MissingExtraError(f"jaxmarl:{name} (multi-agent MuJoCo) needs brax, which is not installed: "
                                "pip install coplay[mabrax]")
    return getattr(envs, CLASSES[name])


def parameters(name: str) -> dict[str, Any]:
    """The constructor's keyword arguments of `jaxmarl:<name>` and their defaults, as
    `env.FIELD=...` takes them (SMAX's scenario and Overcooked's layout by name)."""
    _import()
    _not_adapted(name)
    cls = _cls(name)
    params: dict[str, Any] = {}
    # the class's own arguments, then those its **kwargs pass on (to a base class's
    # constructor; HeuristicEnemySMAX's to SMAX's)
    if not isinstance(cls, type):             # the FACMAC variants are functions
        chain: list[Any] = [cls]
    else:
        chain = [vars(c)["__init__"] for c in cls.__mro__
                 if "__init__" in vars(c) and c.__module__.startswith("jaxmarl")]
    if name == "HeuristicEnemySMAX":
        chain = [vars(cls)["__init__"], vars(_cls("SMAX"))["__init__"]]
    for c in chain:
        sig = inspect.signature(c).parameters.values()
        for p in sig:
            if p.name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            default = None if p.default is inspect.Parameter.empty else p.default
            if isinstance(default, (jax.Array, np.ndarray)):
                default = np.asarray(default).tolist()   # a list in the run's config; an array again when built
                _ARRAY_ARGUMENTS.add((name, p.name))
            params.setdefault(p.name, default)
        if not any(p.kind == p.VAR_KEYWORD for p in sig):
            break
    for internal in OBJECT_ARGUMENTS:
        params.pop(internal, None)
    if name in SMAX_NAMES:
        params["scenario"] = None
    if name == "overcooked":
        params["layout"] = "cramped_room"
    for arg in ("action_type", "observation_type") if name in SMAX_NAMES else ():
        params.pop(arg, None)      # continuous SMAX actions and the conic observation: not adapted
    return params


def _scenarios() -> dict[str, Any]:
    from jaxmarl.environments.smax import smax_env
    return smax_env.MAP_NAME_TO_SCENARIO


def _layouts() -> dict[str, Any]:
    from jaxmarl.environments.overcooked.layouts import overcooked_layouts
    return overcooked_layouts


def _library_kwargs(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` as the library's constructor takes them: only those that differ from the
    defaults (a subclass may fix an argument of its base itself: MPE's spread sets dim_c,
    FACMAC num_agents and its action type), names resolved, lists as arrays."""
    defaults = parameters(name)
    out = {k: v for k, v in kwargs.items() if k not in defaults or not _same(v, defaults[k])}
    if name in SMAX_NAMES and out.get("scenario") is not None:
        maps = _scenarios()
        if out["scenario"] not in maps:
            raise unknown_name(f"SMAX scenario (map) of jaxmarl:{name}:", out["scenario"], sorted(maps))
        out["scenario"] = maps[out["scenario"]]
    if name == "overcooked":
        layouts = _layouts()
        layout = out.get("layout", "cramped_room")
        if not isinstance(layout, str) or layout not in layouts:
            raise unknown_name(f"Overcooked layout of jaxmarl:{name}:", layout, sorted(layouts))
        out["layout"] = layouts[layout]
    if name in MABRAX:
        out["auto_reset"] = False
    for key, value in list(out.items()):
        if (name, key) in _ARRAY_ARGUMENTS and isinstance(value, (list, tuple)):
            out[key] = jnp.asarray(value)
    return out


def _same(value: Any, default: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(value), np.asarray(default))) if isinstance(default, list) \
            else bool(value == default) and type(value) is type(default)
    except (TypeError, ValueError):
        return False


def _hanabi_bound(lib) -> int:
    """A bound on a Hanabi game's moves: every play or discard uses one of the deck's cards,
    and every hint an information token, of which there are the initial ones plus one per
    discard and one per completed colour."""
    return 2 * int(lib.deck_size) + int(lib.max_info_tokens) + int(lib.num_colors)


@struct.dataclass
class JaxMARLState:
    env: Any             # the library's state
    t: jax.Array         # [] int32 steps played in this episode
    over: jax.Array      # [] bool the episode has ended
    mask: jax.Array      # [N, A] bool the legal actions of `env`, as the last time step showed them


class JaxMARLEnv(Env):
    """A JaxMARL environment under coplay's contract (see the module docstring)."""

    def __init__(self, env_id: str, **kwargs: Any):
        _import()
        _not_adapted(env_id)
        if env_id not in CLASSES:
            raise unknown_name("JaxMARL environment", env_id, sorted(CLASSES))
        self.env_id = env_id
        lib_kwargs = _library_kwargs(env_id, kwargs)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                self.lib = _cls(env_id)(**lib_kwargs)
        except (AssertionError, ValueError, TypeError, KeyError) as e:
            raise ConfigError(f"jaxmarl:{env_id} rejected its arguments {kwargs}: {e or type(e).__name__}") from e
        lib = self.lib
        self.agents = [a for a in lib.agents]
        n = self.n = len(self.agents)

        # shapes from the library's own reset, traced (nothing runs)
        obs, _ = jax.eval_shape(lib.reset, jax.random.PRNGKey(0))
        views = jax.eval_shape(lambda k: [self._agent_obs(lib.reset(k)[0], i) for i in range(n)],
                               jax.random.PRNGKey(0))
        shapes = [tuple(v.shape) for v in views]
        self.same_shape = len(set(shapes)) == 1
        self.obs_shape = shapes[0] if self.same_shape else (max(math.prod(s) for s in shapes),)
        self.obs_sizes = [math.prod(s) for s in shapes]
        self.has_world_state = isinstance(obs, dict) and "world_state" in obs

        spaces = [lib.action_space(a) for a in self.agents]
        self.discrete = all(hasattr(s, "n") or hasattr(s, "num_categories") for s in spaces)
        if self.discrete:
            self.num_choices = [int(getattr(s, "n", None) or s.num_categories) for s in spaces]
            action_space: Any = Discrete(max(self.num_choices))
        else:
            if any(hasattr(s, "n") for s in spaces):
                raise ConfigError(f"jaxmarl:{env_id} mixes discrete and continuous action spaces")
            dims = [int(math.prod(s.shape)) for s in spaces]
            self.action_dims = dims
            low = min(float(np.min(s.low)) for s in spaces)
            high = max(float(np.max(s.high)) for s in spaces)
            action_space = Box(low, high, (max(dims),))
        self._mask_fn = self._find_mask()
        self._info_shapes: dict[str, Any] | None = None

        lows, highs = [], []
        for a in self.agents:
            s = lib.observation_space(a)
            parts = s.values() if isinstance(s, dict) else [s]        # STORM: a view and an inventory
            lows.append(min(float(np.min(getattr(p, "low", -np.inf))) for p in parts))
            highs.append(max(float(np.max(getattr(p, "high", np.inf))) for p in parts))
        low, high = min(lows), max(highs)
        if not self.same_shape:
            low, high = min(low, 0.0), max(high, 0.0)
        if self.has_world_state:
            state_space = Box(-np.inf, np.inf, tuple(obs["world_state"].shape))
        else:
            state_space = Box(low, high, (n * math.prod(self.obs_shape),))

        self.max_steps = self._max_steps()
        self.spec = EnvSpec(
            name=f"jaxmarl:{env_id}",
            num_agents=n,
            obs_space=Box(low, high, self.obs_shape),
            action_space=action_space,
            global_state_space=state_space,
            max_steps=self.max_steps,
            teams=self._teams(),
            roles=tuple(str(a) for a in self.agents),
            turn_based=env_id == "hanabi",
        )

    # --- facts about the library's environment -----------------------------------------------

    def _agent_obs(self, obs: Any, i: int) -> Any:
        """Agent i's observation. STORM's grids carry the agent's inventory apart from its
        view; the inventory is appended to the view as constant channels."""
        if self.env_id == "storm_np":
            return obs[i]                                        # one array, agents first
        if self.env_id == "storm":
            view, extra = obs["observations"][i], obs["inventory"][:, i]
        elif self.env_id == "storm_2p":
            view, extra = obs[i]["observation"], obs[i]["inventory"]
        else:
            return obs[self.agents[i]]
        planes = jnp.broadcast_to(jnp.asarray(extra, view.dtype), (*view.shape[:-1], extra.shape[0]))
        return jnp.concatenate([view, planes], axis=-1)

    def _max_steps(self) -> int:
        lib = self.lib
        if self.env_id == "hanabi":
            return _hanabi_bound(lib)
        if self.env_id in INNER_GAMES:
            return int(lib.num_inner_steps) * int(lib.num_outer_steps)
        if self.env_id in MABRAX:      # brax's episode counts physics steps, action_repeat per step
            return math.ceil(int(lib.episode_length) / int(lib.action_repeat))
        steps = getattr(lib, "max_steps", None)
        if steps is None:
            raise ConfigError(f"jaxmarl:{self.env_id} states no episode length (max_steps)")
        # MPE and SMAX end the step on which the count of steps already played reaches
        # max_steps: their episodes are max_steps + 1 steps long, which coplay keeps.
        longer = self.env_id.startswith("MPE_") or self.env_id in SMAX_NAMES
        return int(steps) + int(longer)

    def _teams(self) -> tuple[int, ...]:
        names = [str(a) for a in self.agents]
        if self.env_id == "SMAX":
            return tuple(0 if a.startswith("ally") else 1 for a in names)
        if self.env_id in INNER_GAMES:
            return tuple(range(self.n))               # every player for itself
        if self.env_id == "MPE_simple_crypto_v3":
            return tuple(1 if a.startswith("eve") else 0 for a in names)
        if self.env_id.startswith("MPE_") and "facmac" not in self.env_id:
            return tuple(1 if a.startswith("adversary") else 0 for a in names)
        return (0,) * self.n

    def _find_mask(self) -> Callable[[Any], Any] | None:
        if self.env_id == "hanabi":
            return self.lib.get_legal_moves
        if self.env_id in SMAX_NAMES:
            return self.lib.get_avail_actions
        return None

    # --- conversions -----------------------------------------------------------------------------

    def _stack_obs(self, obs: Any) -> jax.Array:
        views = [jnp.asarray(self._agent_obs(obs, i), jnp.float32) for i in range(self.n)]
        if self.same_shape:
            return jnp.stack(views)
        size = self.obs_shape[0]
        return jnp.stack([jnp.pad(v.reshape(-1), (0, size - v.size)) for v in views])

    def _per_agent(self, values: Any, dtype=jnp.float32) -> jax.Array | None:
        """[N] from the library's per-agent values (a dict keyed by agent name, a tuple, or an
        array with agents first); None where a dict does not name every agent."""
        if isinstance(values, dict):
            keys = [a if a in values else f"agent_{a}" for a in self.agents]
            if not all(k in values for k in keys):
                return None
            return jnp.stack([jnp.asarray(values[k], dtype).reshape(()) for k in keys])
        if isinstance(values, (tuple, list)):
            values = jnp.stack([jnp.asarray(v) for v in values])
        return jnp.asarray(values, dtype).reshape(self.n)

    def _mask(self, lib_state: Any) -> jax.Array:
        if not self.discrete:
            return jnp.zeros((self.n, 0), bool)
        width = self.spec.num_actions
        own = jnp.array([[j < c for j in range(width)] for c in self.num_choices], bool)
        if self._mask_fn is None:
            return own
        avail = self._mask_fn(lib_state)
        rows = [jnp.pad(jnp.asarray(avail[a]).astype(bool), (0, width - c))
                for a, c in zip(self.agents, self.num_choices)]
        return jnp.stack(rows) & own

    def _active(self, lib_state: Any, dones: dict | None, over: jax.Array) -> jax.Array:
        if self.env_id == "hanabi":
            seat = jnp.argmax(lib_state.cur_player_idx)
            mover = lib_state.seat_order[seat]
            active = jnp.arange(self.n) == mover
        else:
            agent_done = None if dones is None else self._per_agent(dones, bool)
            active = jnp.ones(self.n, bool) if agent_done is None else ~agent_done
        return active & ~over

    def _global_state(self, obs: Any, views: jax.Array) -> jax.Array:
        if self.has_world_state:
            return jnp.asarray(obs["world_state"], jnp.float32)
        return views.reshape(-1)

    def _info(self, info: dict, reward: jax.Array, lib_state: Any, done: jax.Array,
              invalid: jax.Array) -> dict[str, jax.Array]:
        out: dict[str, jax.Array] = {"invalid_actions": invalid}
        def add(key: str, value: Any) -> None:
            per_agent = self._per_agent(value) if isinstance(value, dict) else None
            if per_agent is not None:
                out[key] = per_agent
            elif isinstance(value, dict):            # brax's metrics: one entry each
                for k, v in value.items():
                    add(f"{key}/{k}", v)
            else:
                out[key] = jnp.asarray(value)

        for key, value in info.items():
            if key != "discount":                     # STORM's constant 0, not a fact of the step
                add(key, value)
        if self.env_id in SMAX_NAMES:
            out["win"] = done & self._smax_win(lib_state)
        if self.env_id == "overcooked":
            out["soups"] = reward / OVERCOOKED_DELIVERY
        return out

    def _smax_win(self, lib_state: Any) -> jax.Array:
        """[N] bool: the agent's team wiped the other out and has a unit alive."""
        s = lib_state.state if self.env_id == "HeuristicEnemySMAX" else lib_state
        k = self.lib.num_allies
        allies_dead = ~jnp.any(s.unit_alive[:k])
        enemies_dead = ~jnp.any(s.unit_alive[k:])
        ally_win, enemy_win = enemies_dead & ~allies_dead, allies_dead & ~enemies_dead
        return jnp.array([ally_win if t == 0 else enemy_win for t in self.spec.teams])

    def _terminated(self, lib_state: Any, lib_done: jax.Array, reward: jax.Array) -> jax.Array:
        """The game itself ended the episode (not its length)."""
        if self.env_id in TIME_LIMITED or self.env_id.startswith("MPE_"):
            return jnp.zeros((), bool)
        if self.env_id in SMAX_NAMES:
            s = lib_state.state if self.env_id == "HeuristicEnemySMAX" else lib_state
            k = self.lib.num_allies
            return ~jnp.any(s.unit_alive[:k]) | ~jnp.any(s.unit_alive[k:])
        if self.env_id == "switch_riddle":
            return lib_done & jnp.any(reward != 0)    # an agent spoke: the game's end
        if self.env_id in MABRAX:                      # brax's episode wrapper marks its time limit
            return lib_done & ~(jnp.asarray(lib_state.info["truncation"]) > 0)
        return lib_done

    # --- the contract ---------------------------------------------------------------------------

    def _reset(self, key: jax.Array) -> tuple[JaxMARLState, TimeStep]:
        state, ts = self._first(key)
        return state, ts.replace(info=self._zero_info())  # type: ignore[attr-defined]

    def _first(self, key: jax.Array) -> tuple[JaxMARLState, TimeStep]:
        """The first state and time step, with no info (whose keys come from a step)."""
        obs, lib_state = self.lib.reset(key)
        views = self._stack_obs(obs)
        mask = self._mask(lib_state)
        state = JaxMARLState(env=lib_state, t=jnp.zeros((), jnp.int32), over=jnp.zeros((), bool), mask=mask)
        no = jnp.zeros((), bool)
        ts = TimeStep(
            obs=views, reward=jnp.zeros(self.n, jnp.float32), done=no, truncated=no,
            active=self._active(lib_state, None, no), action_mask=mask,
            global_state=self._global_state(obs, views), info={},
        )
        return state, ts

    def _zero_info(self) -> dict[str, jax.Array]:
        """The info of a step, all zeros: what the first time step shows."""
        if self._info_shapes is None:
            def probe(key):
                state, _ = self._first(key)
                acts = jnp.zeros(self.spec.action_shape, self.spec.action_space.dtype)
                return self._step(state, acts, key)[1].info
            self._info_shapes = jax.eval_shape(probe, jax.random.PRNGKey(0))
        return {k: jnp.zeros(s.shape, s.dtype) for k, s in self._info_shapes.items()}

    def _actions(self, actions: jax.Array, mask: jax.Array) -> tuple[dict, jax.Array]:
        if self.discrete:
            a = actions.astype(jnp.int32)
            limit = jnp.array(self.num_choices, jnp.int32)
            clipped = jnp.clip(a, 0, limit - 1)
            allowed = jnp.take_along_axis(mask, clipped[:, None], axis=1)[:, 0]
            invalid = (a != clipped) | ~allowed
            return {ag: clipped[i] for i, ag in enumerate(self.agents)}, invalid
        acts = {ag: actions[i, :d] for i, (ag, d) in enumerate(zip(self.agents, self.action_dims))}
        return acts, jnp.zeros(self.n, bool)

    def _step(self, state: JaxMARLState, actions: jax.Array, key: jax.Array) -> tuple[JaxMARLState, TimeStep]:
        lib_state = state.env
        last = state.t + 1 >= self.max_steps
        if self.env_id in INNER_GAMES:
            # the episode's last step: the library would restart its inner game in this call
            lib_state = lib_state.replace(step=jnp.where(last, -1, lib_state.step).astype(lib_state.step.dtype))
        acts, invalid = self._actions(actions, state.mask)      # the mask the agents were shown
        obs, new_lib, rewards, dones, info = self.lib.step_env(key, lib_state, acts)
        if self.env_id in INNER_GAMES:
            steps = jnp.where(last, self.lib.num_inner_steps, new_lib.step).astype(new_lib.step.dtype)
            new_lib = new_lib.replace(step=steps)
        reward = self._per_agent(rewards)
        assert reward is not None, f"jaxmarl:{self.env_id}: rewards {list(rewards)} do not name every agent"
        lib_done = jnp.asarray(dones["__all__"], bool)
        done = lib_done | last
        terminated = self._terminated(new_lib, lib_done, reward)
        views = self._stack_obs(obs)
        over = state.over | done
        mask = self._mask(new_lib)
        new_state = JaxMARLState(env=new_lib, t=state.t + 1, over=over, mask=mask)
        ts = TimeStep(
            obs=views, reward=reward, done=done, truncated=done & ~terminated,
            active=self._active(new_lib, dones, over), action_mask=mask,
            global_state=self._global_state(obs, views),
            info=self._info(info, reward, new_lib, done, invalid & ~state.over),
        )
        return new_state, ts


# --- registration ---------------------------------------------------------------------------------

def make_jaxmarl(name: str, **kwargs: Any) -> JaxMARLEnv:
    """`jaxmarl:<name>`: JaxMARL's registered environment `name`, its constructor's
    arguments as keywords (SMAX's scenario and Overcooked's layout by name)."""
    return JaxMARLEnv(name, **kwargs)


def _choices() -> list[str]:
    """The adapted ids, and the registered ones that are not (building one says why)."""
    return [*jaxmarl_envs(), *(n for n in _import().registered_envs if n in NOT_ADAPTED)]


def _not_adapted(name: str) -> None:
    if name in NOT_ADAPTED:
        raise ConfigError(f"jaxmarl:{name} is not adapted: {NOT_ADAPTED[name]}")


ENVS.register_prefix(
    "jaxmarl", make_jaxmarl, kind="benchmarks", choices=_choices, parameters=parameters,
    description="JaxMARL's environments compiled under coplay's contract, e.g. jaxmarl:HeuristicEnemySMAX "
                "env.scenario=3m, jaxmarl:overcooked env.layout=cramped_room, jaxmarl:MPE_simple_spread_v3, "
                "jaxmarl:hanabi (needs `pip install coplay[jaxmarl]`).",
)

__all__ = ["CLASSES", "NOT_ADAPTED", "JaxMARLEnv", "check_version", "jaxmarl_envs", "make_jaxmarl", "parameters"]
