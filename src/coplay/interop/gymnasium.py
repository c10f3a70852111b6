"""Gymnasium, both ways: a single-agent Gymnasium environment as a one-agent
coplay environment, and a one-agent coplay environment as a Gymnasium one.

    env = coplay.make("gym:CartPole-v1")                     # gymnasium.make under the hood
    env = from_gymnasium(lambda: MyEnv(size=8))              # any gymnasium.Env, or a function building one
    coplay train algo=ippo env=gym:CartPole-v1
    gym_env = to_gymnasium(coplay.make("spread", n_agents=1))

`from_gymnasium` steps the environment on the host (see `coplay.interop.host`):
one copy per parallel environment and seed, all stepped by one callback per
step, while acting and learning stay compiled. The agent is `agent_0`; its
spaces map as described in `coplay.interop.layout` (Box or Discrete
observations; Discrete or 1-d Box actions; `info["action_mask"]` where the
environment gives one). An environment with a vector reward and a
`reward_space` (MO-Gymnasium's convention) gets `reward_dim` K and rewards
`[1, K]`. An episode ends at `terminated` or `truncated`, or at `max_steps`
(default: the registered `max_episode_steps`, else 1000), counted as a
truncation.

`to_gymnasium` compiles the coplay environment's `reset` and `step` and keeps
its state on the host; equal seeds and equal actions give equal episodes. Its
observation is the agent's own, `info["action_mask"]` holds the legal actions
for discrete actions, and `terminated`/`truncated` follow the episode's
`done` and `truncated`. Environments with more than one agent are refused:
`coplay.interop.to_pettingzoo` serves those.
"""

from __future__ import annotations

import copy
import difflib
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.interop.extras import require
from coplay.interop.host import HostCopy, HostEnv, HostEnvError, HostStep
from coplay.interop.layout import AgentLayout, host_env, objectives

AGENT = "agent_0"
DEFAULT_MAX_STEPS = 1000


def _gym():
    return require("gymnasium", "pettingzoo", "coplay's Gymnasium bridge")


class _GymCopy(HostCopy):
    """One Gymnasium environment in coplay's layout (one agent)."""

    def __init__(self, env: Any, layout: AgentLayout, reward_dim: int):
        self.env, self.layout, self.reward_dim = env, layout, reward_dim
        self.t = 0

    def _host_step(self, obs: Any, info: dict, reward: Any, done: bool, truncated: bool) -> HostStep:
        o, m, active, _ = self.layout.step_arrays({AGENT: obs}, {}, {AGENT: info}, [AGENT], {}, self.t)
        r = self.layout.reward(AGENT, reward, self.t)
        want = (1,) if self.reward_dim == 1 else (1, self.reward_dim)
        if done:
            active[:] = False
        return HostStep(obs=o, reward=r.reshape(want), done=done, truncated=truncated, active=active,
                        action_mask=m, global_state=o.reshape(-1))

    def _returned(self, call: str, out: Any, size: int) -> tuple:
        """`out`, the `size`-tuple that Gymnasium's API returns from `call`, or a clear refusal."""
        if isinstance(out, tuple) and len(out) == size:
            return out
        got = f"a {len(out)}-tuple" if isinstance(out, tuple) else f"a {type(out).__name__}"
        raise HostEnvError(
            f"{self.layout.name}: {call}() returned {got} at step {self.t}; Gymnasium's API returns "
            + ("(observation, info)" if call == "reset" else "(observation, reward, terminated, truncated, info)")
            + ". An environment written for the old Gym API (reset returning the observation alone, step "
              "returning 4 values) needs a compatibility wrapper first, e.g. shimmy's GymV21CompatibilityV0")

    def reset(self, seed: int) -> HostStep:
        self.t = 0
        obs, info = self._returned("reset", self.env.reset(seed=seed), 2)
        return self._host_step(obs, info, np.zeros(self.reward_dim), False, False)

    def step(self, actions: np.ndarray) -> HostStep:
        out = self.env.step(self.layout.action(0, actions[0], self.t))
        obs, reward, terminated, truncated, info = self._returned("step", out, 5)
        self.t += 1
        done = bool(terminated or truncated)
        return self._host_step(obs, info, reward, done, done and not terminated)

    def close(self) -> None:
        self.env.close()


def from_gymnasium(env_or_factory: Any, *, name: str | None = None, max_steps: int | None = None,
                   max_copies: int = 4096, workers: int = 0, worker_backend: str = "process",
                   out_of_bounds: str = "refuse") -> HostEnv:
    """A single-agent `gymnasium.Env` (or a function building one) as a one-agent
    coplay environment stepped on the host. Instances are copied with
    `copy.deepcopy` for each parallel environment; a function is called.
    `workers` > 0 steps the copies in that many worker processes (or Ray actors
    with `worker_backend="ray"`); see `coplay.interop.host`. `out_of_bounds="clip"`
    clips observations that leave their Box instead of refusing them (see
    `coplay.interop.layout`)."""
    gym = _gym()
    if isinstance(env_or_factory, gym.Env):
        template = env_or_factory
        factory: Callable[[], Any] = lambda: copy.deepcopy(template)  # noqa: E731
    elif callable(env_or_factory):
        factory = env_or_factory
    else:
        raise ConfigError(f"from_gymnasium needs a gymnasium.Env or a function that builds one, "
                          f"got {type(env_or_factory).__name__}")
    probe = factory()
    if not isinstance(probe, gym.Env):
        raise ConfigError(f"from_gymnasium needs a gymnasium.Env or a function that builds one; the function "
                          f"returned {type(probe).__name__}")
    spec_id = getattr(getattr(probe, "spec", None), "id", None)
    name = name or f"gym:{spec_id or type(probe.unwrapped).__name__}"
    reward_dim = objectives(getattr(probe.unwrapped, "reward_space", None), name)
    layout = AgentLayout(name, [AGENT], [probe.observation_space], [probe.action_space], feature="from_gymnasium",
                         out_of_bounds=out_of_bounds, reward_dim=reward_dim)
    if max_steps is None:
        limit = getattr(getattr(probe, "spec", None), "max_episode_steps", None)
        max_steps = int(limit) if limit else DEFAULT_MAX_STEPS
    probe.close()
    return host_env(lambda: _GymCopy(factory(), layout, reward_dim), layout, name=name, max_steps=max_steps,
                    max_copies=max_copies, workers=workers, worker_backend=worker_backend, reward_dim=reward_dim)


# -- the `gym:` registry prefix -------------------------------------------------
def _spec(env_id: str):
    gym = _gym()
    try:
        return gym.spec(env_id)
    except gym.error.Error as e:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ConfigError(f"gym:{env_id}: not a registered Gymnasium environment ({e}){hint} "
                          f"(import the package that registers it first)") from None


_OWN = {"max_steps": None, "max_copies": 4096, "workers": 0, "worker_backend": "process", "out_of_bounds": "refuse"}


def env_parameters(env_id: str) -> dict[str, Any]:
    """`gym:<id>` takes the environment's registered keyword arguments and coplay's own."""
    return {**dict(_spec(env_id).kwargs), **_OWN}


def make_gymnasium(env_id: str, **kwargs: Any) -> HostEnv:
    """`gym:<id>`: `gymnasium.make(id, **kwargs)` as a one-agent coplay environment."""
    spec = _spec(env_id)
    own = {k: kwargs.pop(k, v) for k, v in _OWN.items()}
    max_steps = own["max_steps"] if own["max_steps"] is not None else spec.max_episode_steps
    return from_gymnasium(lambda: _gym().make(env_id, **kwargs), name=f"gym:{env_id}", max_steps=max_steps,
                          max_copies=own["max_copies"], workers=own["workers"],
                          worker_backend=own["worker_backend"], out_of_bounds=own["out_of_bounds"])


ENVS.register_prefix(
    "gym", make_gymnasium, kind="host", parameters=env_parameters,
    choices=lambda: sorted(_gym().registry),
    description="Any single-agent Gymnasium environment by id, e.g. gym:CartPole-v1; stepped on the host "
                "(needs `pip install coplay[pettingzoo]`).",
)


# -- coplay -> Gymnasium ---------------------------------------------------------
def to_gymnasium(env: Env, render_mode: str | None = None):
    """A one-agent coplay environment as a `gymnasium.Env`."""
    _gym()
    if env.spec.num_agents != 1:
        raise ConfigError(f"to_gymnasium takes one-agent environments; {env.spec.name} has "
                          f"{env.spec.num_agents} agents (use coplay.interop.to_pettingzoo for those)")
    return _gym_class()(env, render_mode)


@functools.cache
def _gym_class():
    _gym()  # raises the install hint where gymnasium is missing
    from gymnasium import Env as GymEnv

    from coplay.interop.pettingzoo import RENDER_MODES, _Game

    class CoplayGymEnv(GymEnv):
        """A one-agent coplay environment under Gymnasium's API (see `coplay.interop.gymnasium`)."""

        metadata = {"render_modes": list(RENDER_MODES)}

        def __init__(self, env: Env, render_mode: str | None = None):
            self.game = _Game(env, render_mode)
            self.render_mode = render_mode
            self.observation_space = self.game.obs_spaces[self.game.names[0]]
            self.action_space = self.game.act_spaces[self.game.names[0]]
            self._over = True

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            super().reset(seed=seed)
            self.game.reset(seed)
            self._over = False
            return self.game.observe(0), self.game.info(0)

        def step(self, action):
            g = self.game
            if self._over:
                raise ConfigError(f"{g.spec.name}: step() before reset(), or after the episode ended; "
                                  "call reset() first")
            store = g.filler()
            g.action(g.names[0], action, store)
            g.step(store)
            self._over = g.done
            truncated = g.done and g.truncated
            return g.observe(0), g.reward(0), g.done and not truncated, truncated, g.info(0)

        def render(self):
            return self.game.render()

    return CoplayGymEnv


__all__ = ["from_gymnasium", "make_gymnasium", "to_gymnasium"]
