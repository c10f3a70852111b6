"""coplay environments as PettingZoo environments, so that other libraries can train on them.

    pz = to_pettingzoo(coplay.make("spread"))               # a ParallelEnv
    pz = to_pettingzoo(coplay.make("connect_four"))         # an AECEnv: a turn-based game
    pz = to_pettingzoo(coplay.make("spread"), api="aec")    # either API for any environment

The coplay environment runs compiled (`jit` of its `reset` and `step`) and
holds its state on the host between calls; keys come from the seed given to
`reset(seed=...)` (or from fresh entropy the first time), so equal seeds and
equal actions give equal episodes.

Agents are named `<role>_<index>` (`agent_0`, `agent_1`, `row_0`, `column_1`), or
by their roles where those are already numbered (`player_0`, `player_1`).
Observations are NumPy arrays in a gymnasium `Box`; in turn-based games they are dicts
`{"observation": ..., "action_mask": int8 [A]}` as in PettingZoo's classic
games, and in every game with discrete actions `infos[agent]["action_mask"]`
holds the legal actions too, with the environment's per-agent `info` fields
(e.g. `illegal_action`, `win`). Rewards are floats (NumPy arrays `[K]` for
environments with K objectives). An action outside the legal ones follows the
coplay environment's own documented rule (a forfeit in coplay's games).

The parallel API steps every agent at once; agents that are not `active` in
the coplay environment (the player not to move) may be left out of the
actions. The AEC API selects the agents that are active one at a time in
index order and steps the coplay environment once all of them have acted, so
it is the natural API of turn-based games and also serves simultaneous ones.
Once an episode ends, every agent is terminated (or truncated at the time
limit) and leaves `agents`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jax
import numpy as np

from coplay.core import spaces as cs
from coplay.core.compile import jit
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.types import TimeStep
from coplay.interop.extras import require

APIS = ("auto", "parallel", "aec")
RENDER_MODES = ("ansi", "human", "rgb_array")


def agent_names(env: Env) -> list[str]:
    """The PettingZoo names of `env`'s agents: `<role>_<index>` (`agent_0`, `row_0`,
    `column_1`), or the role itself where it is already numbered (`player_0`)."""
    roles = list(env.spec.roles)
    if len(set(roles)) == len(roles) and all(re.fullmatch(r"[a-z]+_[0-9]+", r) for r in roles):
        return roles
    return [f"{role}_{i}" for i, role in enumerate(roles)]


def to_pettingzoo(env: Env, api: str = "auto", render_mode: str | None = None):
    """`env` as a PettingZoo environment: `api="parallel"`, `"aec"`, or `"auto"`
    (AEC for turn-based games, parallel otherwise)."""
    require("pettingzoo", "pettingzoo", "to_pettingzoo")
    if api not in APIS:
        raise ConfigError(f"to_pettingzoo api={api!r} is not one of {', '.join(APIS)}")
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ConfigError(f"render_mode={render_mode!r} is not one of {', '.join(RENDER_MODES)} (or None)")
    if api == "auto":
        api = "aec" if env.spec.turn_based else "parallel"
    parallel_cls, aec_cls = _classes()
    return (parallel_cls if api == "parallel" else aec_cls)(env, render_mode)


def _gym_space(space: cs.Space):
    gym = require("gymnasium", "pettingzoo", "to_pettingzoo")
    if isinstance(space, cs.Discrete):
        return gym.spaces.Discrete(space.n)
    if isinstance(space, cs.MultiDiscrete):
        return gym.spaces.MultiDiscrete(list(space.nvec), dtype=np.dtype(space.dtype))
    if isinstance(space, cs.Box):
        return gym.spaces.Box(low=space.low, high=space.high, shape=space.shape, dtype=np.dtype(space.dtype))
    raise ConfigError(f"to_pettingzoo: no gymnasium space for {space!r}")


class _Game:
    """The host side shared by both APIs: the compiled env, its state, keys, spaces and conversions."""

    def __init__(self, env: Env, render_mode: str | None):
        gym = require("gymnasium", "pettingzoo", "to_pettingzoo")
        self.env = env
        self.spec = env.spec
        self.names = agent_names(env)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.render_mode = render_mode
        self.masked_obs = self.spec.turn_based and self.spec.discrete_actions
        self._reset = jit(env.reset)
        self._step = jit(env.step)
        self._key: jax.Array | None = None
        self.state = None
        self._ts: TimeStep | None = None
        obs_space = _gym_space(self.spec.obs_space)
        if self.masked_obs:
            mask = gym.spaces.Box(0, 1, (self.spec.num_actions,), np.int8)
            obs_space = gym.spaces.Dict({"observation": obs_space, "action_mask": mask})
        # One object per agent, returned every time (PettingZoo seeds spaces through them).
        self.obs_spaces = {name: obs_space if i == 0 else _copy_space(obs_space)
                           for i, name in enumerate(self.names)}
        self.act_spaces = {name: _gym_space(self.spec.action_space) for name in self.names}
        self.obs_dtype = np.dtype(self.spec.obs_space.dtype)

    @property
    def started(self) -> bool:
        """Whether `reset` has run."""
        return self._ts is not None

    @property
    def ts(self) -> TimeStep:
        """The last TimeStep, on the host."""
        if self._ts is None:
            raise ConfigError(f"{self.spec.name}: no episode yet; call reset() first")
        return self._ts

    # ----- keys and dynamics ----------------------------------------------------------------------
    def next_key(self) -> jax.Array:
        if self._key is None:
            self._key = jax.random.PRNGKey(int(np.random.SeedSequence().generate_state(1)[0]))
        self._key, key = jax.random.split(self._key)
        return key

    def reset(self, seed: int | None) -> None:
        if seed is not None:
            self._key = jax.random.PRNGKey(int(seed))
        self.state, ts = self._reset(self.next_key())
        self._ts = jax.device_get(ts)

    def step(self, actions: np.ndarray) -> None:
        self.state, ts = self._step(self.state, actions, self.next_key())
        self._ts = jax.device_get(ts)

    def filler(self) -> np.ndarray:
        """Actions for agents that do not act: a legal one where there are masks, zeros otherwise."""
        if self.spec.discrete_actions:
            return np.argmax(np.asarray(self.ts.action_mask), axis=-1).astype(np.int32)
        return np.zeros(self.spec.action_shape, np.float32)

    def action(self, name: str, value: Any, store: np.ndarray) -> None:
        if name not in self.index:
            raise ConfigError(f"{self.spec.name}: no agent {name!r}; agents are {', '.join(self.names)}")
        i = self.index[name]
        if self.spec.discrete_actions:
            store[i] = int(np.asarray(value))
        else:
            store[i] = np.asarray(value, np.float32).reshape(store.shape[1:])

    # ----- what agents see ------------------------------------------------------------------------
    def observe(self, i: int):
        obs = np.asarray(self.ts.obs[i], self.obs_dtype)
        if self.masked_obs:
            return {"observation": obs, "action_mask": np.asarray(self.ts.action_mask[i], np.int8)}
        return obs

    def reward(self, i: int):
        r = np.asarray(self.ts.reward[i], np.float32)
        return float(r) if r.ndim == 0 else r

    def info(self, i: int) -> dict:
        out: dict[str, np.ndarray] = {}
        if self.spec.discrete_actions:
            out["action_mask"] = np.asarray(self.ts.action_mask[i], np.int8)
        n = self.spec.num_agents
        for k, value in self.ts.info.items():
            v = np.asarray(value)
            out[k] = v[i] if v.ndim >= 1 and v.shape[0] == n else v
        return out

    @property
    def done(self) -> bool:
        return bool(self.ts.done)

    @property
    def truncated(self) -> bool:
        return bool(self.ts.truncated)

    def active(self) -> list[int]:
        return [i for i in range(self.spec.num_agents) if bool(self.ts.active[i])]

    # ----- rendering --------------------------------------------------------------------------------
    def render(self):
        if self.render_mode is None:
            return None
        if self.render_mode in ("ansi", "human"):
            if self.spec.render_text is None:
                raise ConfigError(f"{self.spec.name} has no text rendering; render_mode=None or 'rgb_array'")
            text = self.spec.render_text(jax.device_get(self.state))
            if self.render_mode == "human":
                print(text)
                return None
            return text
        if self.spec.render_rgb is None:
            raise ConfigError(f"{self.spec.name} has no image rendering; render_mode=None or 'ansi'")
        return np.asarray(self.spec.render_rgb(jax.device_get(self.state)))


def _copy_space(space):
    import copy

    return copy.deepcopy(space)


@functools.cache
def _classes():
    """The two PettingZoo classes, defined once pettingzoo is importable."""
    from pettingzoo import AECEnv, ParallelEnv

    class _OnGame:
        """What both API classes share: one `_Game` holding the coplay environment, its
        agents' names and spaces."""

        metadata = {"render_modes": list(RENDER_MODES), "name": "coplay", "is_parallelizable": True}

        def _hold(self, env: Env, render_mode: str | None) -> None:
            self.game = _Game(env, render_mode)
            self.metadata = {**self.metadata, "name": env.spec.name}
            self.render_mode = render_mode
            self.possible_agents = list(self.game.names)
            self.agents: list[str] = []

        def observation_space(self, agent):
            return self.game.obs_spaces[agent]

        def action_space(self, agent):
            return self.game.act_spaces[agent]

        def reward_space(self, agent):
            """MOMAland's convention: a Box of the K objectives (shape `(K,)`); shape `()` for
            a scalar reward."""
            import gymnasium

            k = self.game.spec.reward_dim
            return gymnasium.spaces.Box(-np.inf, np.inf, (k,) if k > 1 else (), np.float32)

        def state(self) -> np.ndarray:
            return np.asarray(self.game.ts.global_state)

        def render(self):
            return self.game.render()

        def close(self):
            pass

        def __str__(self) -> str:
            return self.game.spec.name

    class CoplayParallelEnv(_OnGame, ParallelEnv):
        """A coplay environment under PettingZoo's parallel API (see `coplay.interop.pettingzoo`)."""

        def __init__(self, env: Env, render_mode: str | None = None):
            self._hold(env, render_mode)

        def reset(self, seed: int | None = None, options: dict | None = None):
            g = self.game
            g.reset(seed)
            self.agents = list(g.names)
            return ({a: g.observe(i) for i, a in enumerate(g.names)},
                    {a: g.info(i) for i, a in enumerate(g.names)})

        def step(self, actions: dict):
            g = self.game
            if not g.started or not self.agents:
                raise ConfigError(f"{g.spec.name}: step() before reset(), or after the episode ended; "
                                  "call reset() first")
            store = g.filler()
            for name, value in actions.items():
                if name not in self.agents:
                    raise ConfigError(f"{g.spec.name}: action for {name!r}, which is not playing; "
                                      f"agents now: {', '.join(self.agents)}")
                g.action(name, value, store)
            g.step(store)
            names = list(self.agents)
            ids = [g.index[a] for a in names]
            obs = {a: g.observe(i) for a, i in zip(names, ids)}
            rewards = {a: g.reward(i) for a, i in zip(names, ids)}
            trunc = g.done and g.truncated
            terminations = {a: g.done and not trunc for a in names}
            truncations = {a: trunc for a in names}
            infos = {a: g.info(i) for a, i in zip(names, ids)}
            if g.done:
                self.agents = []
            return obs, rewards, terminations, truncations, infos

    class CoplayAECEnv(_OnGame, AECEnv):
        """A coplay environment under PettingZoo's AEC API (see `coplay.interop.pettingzoo`)."""

        def __init__(self, env: Env, render_mode: str | None = None):
            AECEnv.__init__(self)
            self._hold(env, render_mode)

        def observe(self, agent):
            return self.game.observe(self.game.index[agent])

        def reset(self, seed: int | None = None, options: dict | None = None):
            g = self.game
            g.reset(seed)
            self.agents = list(g.names)
            self.rewards: dict[str, float | np.ndarray] = (
                dict.fromkeys(self.agents, 0.0) if g.spec.reward_dim == 1
                else {a: np.zeros(g.spec.reward_dim, np.float32) for a in self.agents})
            self._cumulative_rewards = {a: r * 0 if isinstance(r, np.ndarray) else 0.0
                                        for a, r in self.rewards.items()}
            self.terminations = dict.fromkeys(self.agents, False)
            self.truncations = dict.fromkeys(self.agents, False)
            self.infos = {a: g.info(i) for i, a in enumerate(g.names)}
            self._turn = self._movers()
            self._pending = g.filler()
            self.agent_selection = self._turn.pop(0)

        def _movers(self) -> list[str]:
            """Who acts in this step of the coplay environment, in index order."""
            active = self.game.active()
            return [self.game.names[i] for i in (active or range(self.game.spec.num_agents))]

        def step(self, action):
            agent = self.agent_selection
            if self.terminations[agent] or self.truncations[agent]:
                self._was_dead_step(action)
                return
            g = self.game
            if action is None:
                raise ConfigError(f"{g.spec.name}: action None for {agent!r}, which is still playing")
            g.action(agent, action, self._pending)
            self._cumulative_rewards[agent] = self._cumulative_rewards[agent] * 0
            self._clear_rewards()
            if self._turn:   # others act in this step too: wait for them
                self.agent_selection = self._turn.pop(0)
                return
            g.step(self._pending)
            for i, a in enumerate(g.names):
                self.rewards[a] = g.reward(i)
                self.infos[a] = g.info(i)
            if g.done:
                trunc = g.truncated
                for a in self.agents:
                    self.terminations[a], self.truncations[a] = not trunc, trunc
                order = list(self.agents)
                # Every agent now sees the end: the one after the last mover first.
                nxt = (order.index(agent) + 1) % len(order)
                self.agent_selection = order[nxt]
            else:
                self._turn = self._movers()
                self._pending = g.filler()
                self.agent_selection = self._turn.pop(0)
            self._accumulate_rewards()

        def _clear_rewards(self) -> None:
            for a, r in self.rewards.items():
                self.rewards[a] = r * 0 if isinstance(r, np.ndarray) else 0.0

    return CoplayParallelEnv, CoplayAECEnv
