"""PettingZoo environments as coplay environments: every coplay algorithm
trains on them with the same compiled acting and learning code.

    env = from_pettingzoo(simple_spread_v3.parallel_env)        # a function that builds one
    env = from_pettingzoo(tictactoe_v3.env())                   # or an instance (deep-copied)
    coplay train algo=mappo env=pettingzoo:mpe2.simple_spread_v3
    coplay train algo=selfplay_ppo env=pettingzoo:classic.tictactoe_v3

The environment steps on the host (see `coplay.interop.host`): one copy per
parallel environment and seed, all stepped by one callback per step.

Translation to the contract:

- Agents are `possible_agents` in order (N of them). An agent absent from
  `agents` is inactive: zero observation, reward 0, all actions legal. A
  `ParallelEnv` that leaves out a live agent's observation is refused.
- Observations are flattened to vectors of float32 and padded with zeros to
  the largest agent's size. A dict observation `{"observation", "action_mask"}`
  (PettingZoo's classic games) gives both; otherwise `infos[agent]["action_mask"]`
  is used where present, else every action is legal.
- Actions: all `Discrete` (padded to the largest `n`, the padding masked out)
  or all `Box` of one shape (clipped to the space's bounds on the host).
- A `ParallelEnv` is stepped with every live agent's action. An `AECEnv` is a
  turn-based environment: `active` is the selected agent, one coplay step is one
  agent's move, `step(None)` for agents that are done is done for you, and an
  agent's reward at each step is `rewards[agent]` after that step.
- `global_state` is `state()` where the environment implements it, else every
  agent's observation concatenated.
- An episode ends when no agent is left; it is `truncated` when agents left by
  truncation only, or when `max_steps` (default: the environment's
  `max_cycles` where it has one, else 1000) is reached first.

A PettingZoo environment that breaks its API raises `HostEnvError` naming the
agent and the step: an observation that does not fit its observation space
(shape, range, bounds, NaN; see `coplay.interop.layout` for `out_of_bounds`),
a NaN reward or one for an unknown agent, a live agent without an observation,
or an agent that leaves `agents` without being terminated or truncated. One
episode of random legal play is run when the environment is built, so such
errors show before anything is compiled.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.interop.extras import require
from coplay.interop.host import HostCopy, HostEnv, HostEnvError, HostStep
from coplay.interop.layout import AgentLayout, host_env, objectives

APIS = ("auto", "parallel", "aec")
DEFAULT_MAX_STEPS = 1000


def _vanished(name: str, before: list[str], after: list[str], term: dict, trunc: dict, step: int) -> None:
    for a in before:
        if a not in after and not (term.get(a) or trunc.get(a)):
            raise HostEnvError(f"{name}: agent {a!r} left `agents` at step {step} without being terminated or "
                               f"truncated (terminations[{a!r}]={term.get(a)}, truncations[{a!r}]={trunc.get(a)})")


class _ParallelCopy(HostCopy):
    def __init__(self, env: Any, layout: AgentLayout, state_fn: Callable[[Any, np.ndarray], np.ndarray]):
        self.env, self.layout, self.state_fn = env, layout, state_fn
        self.t = 0

    def _host_step(self, obs, infos, reward, done, truncated) -> HostStep:
        live = list(self.env.agents)
        for a in live:
            if a not in obs:
                raise HostEnvError(f"{self.layout.name}: agent {a!r} is in `agents` at step {self.t} but has no "
                                   f"observation (got observations for {sorted(obs)}); a ParallelEnv returns an "
                                   f"observation for every live agent")
        o, m, active, r = self.layout.step_arrays(obs, {}, infos or {}, live, reward, self.t)
        if done:
            active[:] = False
        gs = self.state_fn(self.env, o)
        return HostStep(obs=o, reward=r, done=done, truncated=truncated, active=active, action_mask=m,
                        global_state=gs)

    def reset(self, seed: int) -> HostStep:
        obs, infos = _reset(self.env, seed)
        self.t = 0
        return self._host_step(obs, infos, {}, False, False)

    def step(self, actions: np.ndarray) -> HostStep:
        before = list(self.env.agents)
        act = {a: self.layout.action(self.layout.index[a], actions[self.layout.index[a]], self.t) for a in before}
        obs, rew, term, trunc, infos = self.env.step(act)
        self.t += 1
        _vanished(self.layout.name, before, list(self.env.agents), term, trunc, self.t)
        done = not self.env.agents
        truncated = done and any(trunc.get(a, False) for a in before) and not any(term.get(a, False) for a in before)
        return self._host_step(obs, infos, rew, done, truncated)

    def close(self) -> None:
        self.env.close()


class _AECCopy(HostCopy):
    def __init__(self, env: Any, layout: AgentLayout, state_fn: Callable[[Any, np.ndarray], np.ndarray]):
        self.env, self.layout, self.state_fn = env, layout, state_fn
        self.t = 0

    def _retire_done(self, reward: np.ndarray, ended: dict) -> None:
        """Step `None` for selected agents that are done (PettingZoo's protocol)."""
        env = self.env
        while env.agents and (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            a = env.agent_selection
            ended[a] = "terminated" if env.terminations[a] else "truncated"
            before = list(env.agents)
            env.step(None)
            self._collect(reward)
            _vanished(self.layout.name, [b for b in before if b != a], list(env.agents),
                      env.terminations, env.truncations, self.t)

    def _collect(self, reward: np.ndarray) -> None:
        for a, v in self.env.rewards.items():
            reward[self.layout.rewarded(a, self.t)] += self.layout.reward(a, v, self.t)

    def _host_step(self, reward: np.ndarray, done: bool, truncated: bool) -> HostStep:
        env, lay = self.env, self.layout
        n = len(lay.agents)
        o = np.zeros((n, lay.obs_dim), np.float32)
        m = np.ones((n, lay.num_actions), bool)
        active = np.zeros(n, bool)
        for a in env.agents:
            i = lay.index[a]
            o[i], inner = lay.observation(a, env.observe(a), self.t)
            m[i] = lay.legal(a, inner, env.infos.get(a), self.t)
        if env.agents:
            active[lay.index[env.agent_selection]] = True
        return HostStep(obs=o, reward=reward, done=done, truncated=truncated, active=active, action_mask=m,
                        global_state=self.state_fn(env, o))

    def reset(self, seed: int) -> HostStep:
        _reset(self.env, seed)
        self.t = 0
        reward = np.zeros(self.layout.reward_shape, np.float32)
        self._retire_done(reward, {})
        return self._host_step(reward, not self.env.agents, False)

    def step(self, actions: np.ndarray) -> HostStep:
        env = self.env
        agent = env.agent_selection
        before = list(env.agents)
        env.step(self.layout.action(self.layout.index[agent], actions[self.layout.index[agent]], self.t))
        self.t += 1
        _vanished(self.layout.name, before, list(env.agents), env.terminations, env.truncations, self.t)
        reward = np.zeros(self.layout.reward_shape, np.float32)
        self._collect(reward)
        ended: dict[str, str] = {}
        self._retire_done(reward, ended)
        done = not env.agents
        truncated = done and bool(ended) and all(v == "truncated" for v in ended.values())
        return self._host_step(reward, done, truncated)

    def close(self) -> None:
        self.env.close()


def _reset(env: Any, seed: int) -> Any:
    """`env.reset(seed=seed)`; an environment that seeds NumPy's legacy generator
    (`np.random.seed`, as MOMAland's do), which takes 32 bits only, gets the seed's
    low 32 bits."""
    try:
        return env.reset(seed=seed)
    except ValueError as e:
        if "2**32" not in str(e):
            raise
        return env.reset(seed=seed & 0xFFFFFFFF)


def _state_fn(probe: Any) -> Callable[[Any, np.ndarray], np.ndarray]:
    try:
        s = np.asarray(probe.state(), np.float32)
    except (NotImplementedError, AttributeError):
        return lambda env, obs: obs.reshape(-1)
    shape = s.shape

    def state(env: Any, obs: np.ndarray) -> np.ndarray:
        # Once every agent is done the state is never acted on, and some environments cannot
        # give one then (MOMAland's beach gives an empty array, its multiwalker raises): zeros.
        if not env.agents:
            return np.zeros(shape, np.float32)
        return np.asarray(env.state(), np.float32).reshape(shape)

    return state


def _is_parallel(env: Any) -> bool:
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if isinstance(env, ParallelEnv):
        return True
    if isinstance(env, AECEnv):
        return False
    raise ConfigError(f"from_pettingzoo needs a PettingZoo ParallelEnv or AECEnv (or a function that builds one), "
                      f"got {type(env).__name__}")


def from_pettingzoo(env_or_factory: Any, *, name: str | None = None, max_steps: int | None = None,
                    max_copies: int = 4096, workers: int = 0, worker_backend: str = "process",
                    out_of_bounds: str = "refuse") -> HostEnv:
    """A PettingZoo `ParallelEnv` or `AECEnv` (or a function building one) as a
    coplay environment stepped on the host. Instances are copied with
    `copy.deepcopy` for each parallel environment; a function is called.
    `workers` > 0 steps the copies in that many worker processes (or Ray actors
    with `worker_backend="ray"`); see `coplay.interop.host`. `out_of_bounds="clip"`
    clips observations that leave their Box instead of refusing them (see
    `coplay.interop.layout`)."""
    require("pettingzoo", "pettingzoo", "from_pettingzoo")
    if callable(env_or_factory) and not hasattr(env_or_factory, "possible_agents"):
        factory = env_or_factory
    else:
        template = env_or_factory
        factory = lambda: copy.deepcopy(template)  # noqa: E731
    probe = factory()
    parallel = _is_parallel(probe)
    name = name or f"pettingzoo:{getattr(probe, 'metadata', {}).get('name', type(probe).__name__)}"
    agents = list(probe.possible_agents)
    layout = AgentLayout(name, agents, [probe.observation_space(a) for a in agents],
                         [probe.action_space(a) for a in agents], out_of_bounds=out_of_bounds,
                         reward_dim=_objectives(probe, agents, name))
    if max_steps is None:
        cycles = getattr(probe.unwrapped, "max_cycles", None)
        max_steps = int(cycles) * (1 if parallel else len(layout.agents)) if cycles else DEFAULT_MAX_STEPS
    probe.reset(seed=0)
    state_fn = _state_fn(probe)
    probe.close()
    cls = _ParallelCopy if parallel else _AECCopy
    return host_env(lambda: cls(factory(), layout, state_fn), layout, name=name, max_steps=max_steps,
                    max_copies=max_copies, workers=workers, worker_backend=worker_backend, turn_based=not parallel,
                    reward_dim=layout.reward_dim)


def _objectives(probe: Any, agents: list[str], name: str) -> int:
    """MOMAland's vector rewards: `reward_space(agent)`, a Box of K objectives, the same K
    for every agent; 1 for an environment without reward spaces."""
    space = getattr(probe, "reward_space", None)
    if space is None:
        return 1
    per_agent = {a: objectives(space(a) if callable(space) else space, name) for a in agents}
    if len(set(per_agent.values())) != 1:
        raise HostEnvError(f"{name}: the agents' reward spaces have different numbers of objectives ({per_agent}); "
                           "coplay needs one K for all")
    return per_agent[agents[0]]


# -- the `pettingzoo:` registry prefix ------------------------------------------
def _module(path: str):
    require("pettingzoo", "pettingzoo", f"pettingzoo:{path}")
    errors = []
    for candidate in (path, f"pettingzoo.{path}"):
        try:
            return importlib.import_module(candidate)
        except ImportError as e:
            errors.append(f"{candidate}: {e}")
    raise ConfigError(f"pettingzoo:{path}: no such module ({'; '.join(errors)}); name a module that has env() "
                      f"or parallel_env(), e.g. pettingzoo:mpe2.simple_spread_v3 or pettingzoo:classic.tictactoe_v3")


_OWN = {"api": "auto", "max_steps": None, "max_copies": 4096, "workers": 0, "worker_backend": "process",
        "out_of_bounds": "refuse"}


def env_parameters(path: str) -> dict[str, Any]:
    """`pettingzoo:<module>` takes the module's environment arguments and coplay's own."""
    module = _module(path)
    ctor = getattr(module, "raw_env", None) or getattr(module, "env", None)
    params = {}
    if ctor is not None:
        for p in inspect.signature(ctor).parameters.values():
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "render_mode":
                params[p.name] = None if p.default is inspect.Parameter.empty else p.default
    params.update(_OWN)
    return params


def make_pettingzoo(path: str, **kwargs: Any) -> HostEnv:
    """`pettingzoo:<module>`: the module's `parallel_env` (simultaneous moves) or
    `env` (turn-based) as a coplay environment. `api` picks one where the module has both."""
    module = _module(path)
    own = {k: kwargs.pop(k, v) for k, v in _OWN.items()}
    api = own["api"]
    if api not in APIS:
        raise ConfigError(f"pettingzoo:{path}: api={api!r} is not one of {', '.join(APIS)}")
    has_parallel, has_aec = hasattr(module, "parallel_env"), hasattr(module, "env")
    if api == "auto":
        api = "parallel" if has_parallel else "aec"
    if (api == "parallel" and not has_parallel) or (api == "aec" and not has_aec):
        raise ConfigError(f"pettingzoo:{path} has no {'parallel_env' if api == 'parallel' else 'env'}(); "
                          "valid api values here: "
                          + ", ".join(a for a, ok in (("parallel", has_parallel), ("aec", has_aec)) if ok))
    ctor = module.parallel_env if api == "parallel" else module.env
    kwargs = {k: v for k, v in kwargs.items() if v is not None or k not in _unset_defaults(path)}
    return from_pettingzoo(lambda: ctor(**kwargs), name=f"pettingzoo:{path}", max_steps=own["max_steps"],
                           max_copies=own["max_copies"], workers=own["workers"],
                           worker_backend=own["worker_backend"], out_of_bounds=own["out_of_bounds"])


def _unset_defaults(path: str) -> set[str]:
    """Parameters whose constructor default is unknown (shown as None): left out unless set."""
    module = _module(path)
    ctor = getattr(module, "raw_env", None) or getattr(module, "env", None)
    if ctor is None:
        return set()
    return {p.name for p in inspect.signature(ctor).parameters.values() if p.default is inspect.Parameter.empty}


ENVS.register_prefix(
    "pettingzoo", make_pettingzoo, kind="host", parameters=env_parameters,
    description="Any PettingZoo environment by its module, e.g. pettingzoo:mpe2.simple_spread_v3, "
                "pettingzoo:classic.tictactoe_v3; stepped on the host (needs `pip install coplay[pettingzoo]`).",
)

__all__ = ["from_pettingzoo", "make_pettingzoo"]
