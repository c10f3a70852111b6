"""How the gymnasium spaces of named agents (a PettingZoo environment's, or a
Gymnasium environment's one agent) map onto coplay's arrays, which have the
agents on a leading axis.

- Observations become float32 vectors padded with zeros to the largest agent's
  size: a `Box` is flattened, a `Discrete(n)` becomes a one-hot of size n, and
  a `Tuple` of them (nested ones too) puts its parts side by side. A
  dict `{"observation": ..., "action_mask": ...}` (PettingZoo's classic games)
  gives both the observation and the legal actions.
- Actions: every agent `Discrete` (padded to the largest `n`, the padding
  masked out; a space's `start` is added back on the host), or every agent a
  `Box` of one 1-d shape (clipped to the agent's bounds on the host).
- Legal actions come from the observation dict, else from `info["action_mask"]`,
  else every action is legal.

What the environment hands back is checked on every step, so bad data never
reaches training: an observation of the wrong shape, outside its `Discrete`
range, or with a NaN or infinite entry, and a NaN or infinite reward, raise
`HostEnvError` naming the agent, the step and the entry. An observation
outside its `Box` bounds is refused too (`out_of_bounds="refuse"`, the
default); environments whose values drift slightly past their declared
bounds can be run with `out_of_bounds="clip"`, which clips such observations
into the box, counts them (`AgentLayout.clipped`) and warns at the 1st, 10th,
100th, ... clipped observation.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from coplay.core import spaces as cs
from coplay.core.errors import ConfigError, CoplayError
from coplay.core.types import EnvSpec
from coplay.interop.extras import require
from coplay.interop.host import HostCopy, HostEnv, HostEnvError, box_bounds, foreign_error

OUT_OF_BOUNDS = ("refuse", "clip")


class ObservationClipped(UserWarning):
    """A host environment's observation left its Box and was clipped (`out_of_bounds="clip"`)."""


def _parts(gym: Any, space: Any) -> list[Any] | None:
    """The Box and Discrete spaces a space is made of, in order (a Tuple's, nested ones
    flattened); None when one is neither."""
    if isinstance(space, (gym.spaces.Box, gym.spaces.Discrete)):
        return [space]
    if isinstance(space, gym.spaces.Tuple):
        parts = [_parts(gym, sp) for sp in space.spaces]
        return None if any(p is None for p in parts) else [leaf for p in parts for leaf in p]  # type: ignore[union-attr]
    return None


def _leaf_values(raw: Any, space: Any) -> list[Any]:
    """A tuple observation's values, in the order of `_parts`."""
    if not hasattr(space, "spaces"):
        return [raw]
    return [leaf for value, sp in zip(raw, space.spaces) for leaf in _leaf_values(value, sp)]


def _size(gym: Any, space: Any) -> int:
    """Entries of a Box or Discrete observation once encoded (a Discrete is one-hot)."""
    return int(space.n) if isinstance(space, gym.spaces.Discrete) else int(np.prod(space.shape))


def _first_bad(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


class AgentLayout:
    """The array layout of agents `names` with gymnasium spaces `obs_spaces` and `act_spaces`.

    `name` is the environment's name in messages; `feature` names the coplay
    function that needs gymnasium (for the missing-extra error);
    `out_of_bounds` says what an observation outside its Box gets (see the module doc)."""

    def __init__(self, name: str, names: list[str], obs_spaces: list[Any], act_spaces: list[Any],
                 feature: str = "from_pettingzoo", out_of_bounds: str = "refuse", reward_dim: int = 1):
        gym = require("gymnasium", "pettingzoo", feature)
        self.reward_dim = reward_dim   # K objectives: every reward is a vector of K
        if out_of_bounds not in OUT_OF_BOUNDS:
            raise ConfigError(f"{name}: out_of_bounds={out_of_bounds!r} is not one of {', '.join(OUT_OF_BOUNDS)}")
        self.out_of_bounds = out_of_bounds
        self.clipped = 0  # observations clipped into their Box (in this process)
        self.name = name
        self.agents = list(names)
        if not self.agents:
            raise HostEnvError(f"{name}: the environment has no agents")
        self.index = {a: i for i, a in enumerate(self.agents)}
        self.masked_obs = [isinstance(sp, gym.spaces.Dict) and "observation" in sp.spaces for sp in obs_spaces]
        inner = [sp["observation"] if m else sp for sp, m in zip(obs_spaces, self.masked_obs)]
        self.obs_spaces = inner
        self.obs_parts: list[list[Any]] = []     # the Box and Discrete spaces each agent's is made of
        for a, sp in zip(self.agents, inner):
            parts = _parts(gym, sp)
            if parts is not None:
                self.obs_parts.append(parts)
            else:
                raise HostEnvError(
                    f"{name}: agent {a!r} has observation space {sp}; {feature} takes Box or Discrete "
                    f"observations, tuples of them, or dicts {{'observation': Box, 'action_mask': ...}}")
        self._discrete = [part for parts in self.obs_parts for part in parts if isinstance(part, gym.spaces.Discrete)]
        self.obs_sizes = [sum(_size(gym, part) for part in parts) for parts in self.obs_parts]
        self.obs_dim = max(self.obs_sizes)
        leaves = [part for parts in self.obs_parts for part in parts]
        boxes = [part for part in leaves if isinstance(part, gym.spaces.Box)]
        low, high = box_bounds(boxes, self.obs_dim) if boxes else (0.0, 1.0)
        if len(boxes) < len(leaves):          # one-hots of Discrete parts
            low, high = min(low, 0.0), max(high, 1.0)
        self.obs_space = cs.Box(low=low, high=high, shape=(self.obs_dim,))

        self.act_spaces = list(act_spaces)
        if all(isinstance(sp, gym.spaces.Discrete) for sp in act_spaces):
            self.discrete = True
            self.nvec = [int(sp.n) for sp in act_spaces]
            self.starts = [int(sp.start) for sp in act_spaces]
            self.action_space: cs.Discrete | cs.Box = cs.Discrete(max(self.nvec))
        elif all(isinstance(sp, gym.spaces.Box) for sp in act_spaces):
            shapes = {sp.shape for sp in act_spaces}
            if len(shapes) != 1 or len(next(iter(shapes))) != 1:
                raise HostEnvError(f"{name}: Box actions must have one 1-d shape for every agent, got "
                                   + ", ".join(f"{a}: {sp.shape}" for a, sp in zip(self.agents, act_spaces)))
            self.discrete = False
            low, high = box_bounds(act_spaces, act_spaces[0].shape[0])
            self.action_space = cs.Box(low=low, high=high, shape=act_spaces[0].shape)
        else:
            raise HostEnvError(
                f"{name}: action spaces " + ", ".join(f"{a}: {sp}" for a, sp in zip(self.agents, act_spaces))
                + f" are not supported; {feature} takes Discrete actions for every agent or Box actions "
                  "of one shape for every agent")
        self.num_actions = cs.num_actions(self.action_space)

    # -- host values -> arrays -------------------------------------------------
    def observation(self, agent: str, raw: Any, step: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The agent's flat observation `[obs_dim]` and the mask carried inside it (or None)."""
        i = self.index[agent]
        mask = None
        if self.masked_obs[i]:
            if not isinstance(raw, dict) or "observation" not in raw:
                raise HostEnvError(f"{self.name}: agent {agent!r} at step {step} returned an observation of type "
                                   f"{type(raw).__name__}, but its observation space is a dict with 'observation'")
            mask = raw.get("action_mask")
            raw = raw["observation"]
        out = np.zeros(self.obs_dim, np.float32)
        sp, parts = self.obs_spaces[i], self.obs_parts[i]
        values = [raw]
        if len(parts) > 1 or parts[0] is not sp:   # a tuple space: one value per part
            if not isinstance(raw, (tuple, list)) or len(raw) != len(parts):
                raise HostEnvError(f"{self.name}: agent {agent!r} at step {step} returned observation {raw!r}, "
                                   f"but its observation space is {sp} ({len(parts)} parts)")
            values = _leaf_values(raw, sp)
        at = 0
        for part, value in zip(parts, values):
            encoded = self._encode(agent, part, part in self._discrete, value, step)
            out[at:at + encoded.size] = encoded
            at += encoded.size
        return out, mask

    def _encode(self, agent: str, sp: Any, discrete: bool, raw: Any, step: int) -> np.ndarray:
        """One Box (flattened) or Discrete (one-hot) observation, checked against its space."""
        if not discrete:
            arr = np.asarray(raw)
            if arr.shape != sp.shape:
                raise HostEnvError(
                    f"{self.name}: agent {agent!r} at step {step} returned an observation of shape {arr.shape}, "
                    f"but its observation space is {sp}")
            return self._within(agent, np.asarray(arr, np.float64), sp, step).reshape(-1).astype(np.float32)
        value = np.asarray(raw)
        whole = value.shape == () and np.isfinite(value) and float(value) == int(value)
        k = int(value) - int(sp.start) if whole else -1
        if not 0 <= k < sp.n:
            raise HostEnvError(f"{self.name}: agent {agent!r} at step {step} returned observation "
                               f"{raw!r}, outside its observation space {sp}")
        out = np.zeros(int(sp.n), np.float32)
        out[k] = 1.0
        return out

    def _within(self, agent: str, arr: np.ndarray, sp: Any, step: int) -> np.ndarray:
        """`arr` if it is finite and inside `sp`'s bounds; clipped into them under `out_of_bounds="clip"`."""
        where = f"{self.name}: agent {agent!r} at step {step}"
        finite = np.isfinite(arr)
        if not finite.all():
            at = _first_bad(~finite)
            raise HostEnvError(f"{where} returned an observation with {int((~finite).sum())} non-finite "
                               f"entries (entry {at} is {arr[at]:.6g}); NaN and infinite observations are refused")
        low, high = np.broadcast_to(sp.low, arr.shape), np.broadcast_to(sp.high, arr.shape)
        outside = (arr < low) | (arr > high)
        if not outside.any():
            return arr
        at = _first_bad(outside)
        detail = (f"entry {at} is {arr[at]:.6g}, outside [{low[at]:.6g}, {high[at]:.6g}]; "
                  f"{int(outside.sum())} of {arr.size} entries are outside the space's bounds")
        if self.out_of_bounds == "refuse":
            raise HostEnvError(f"{where} returned an observation outside its observation space {sp}: {detail}. "
                               f"Environments whose values drift past their declared bounds can be run with "
                               f"out_of_bounds=clip (clipped, counted and warned about)")
        self.clipped += 1
        if str(self.clipped).strip("0") == "1":  # the 1st, 10th, 100th, ...
            warnings.warn(f"{where}: observation clipped into its space ({detail}); {self.clipped} observations "
                          f"clipped so far in this process", ObservationClipped, stacklevel=2)
        return np.clip(arr, low, high)

    @property
    def reward_shape(self) -> tuple[int, ...]:
        """`(N,)`, or `(N, K)` with K objectives."""
        n = len(self.agents)
        return (n,) if self.reward_dim == 1 else (n, self.reward_dim)

    def reward(self, agent: str, value: Any, step: int) -> np.ndarray:
        """The agent's reward as float32, `[]` or `[K]`; refused when NaN or infinite, or
        of another size."""
        try:
            r = np.asarray(value, np.float32)
        except (TypeError, ValueError):
            raise HostEnvError(f"{self.name}: agent {agent!r} at step {step} got reward {value!r}, which is not "
                               f"a number") from None
        if r.size != self.reward_dim:
            want = "a scalar" if self.reward_dim == 1 else f"{self.reward_dim} objectives (shape ({self.reward_dim},))"
            raise HostEnvError(f"{self.name}: agent {agent!r} at step {step} got reward of shape {r.shape}, "
                               f"expected {want}")
        if not np.isfinite(r).all():
            raise HostEnvError(f"{self.name}: agent {agent!r} at step {step} got reward {value!r}; NaN and "
                               f"infinite rewards are refused")
        return r.reshape(() if self.reward_dim == 1 else (self.reward_dim,))

    def legal(self, agent: str, mask: Any, info: dict | None, step: int) -> np.ndarray:
        """The agent's legal actions `[num_actions]` (all False for continuous actions)."""
        i = self.index[agent]
        full = np.zeros(self.num_actions, bool)
        if not self.discrete:
            return full
        if mask is None and info:
            mask = info.get("action_mask")
        if mask is None:
            full[:self.nvec[i]] = True
            return full
        mask = np.asarray(mask).reshape(-1)
        if mask.size != self.nvec[i]:
            raise HostEnvError(f"{self.name}: agent {agent!r} at step {step} gave an action mask of size "
                               f"{mask.size}, but it has {self.nvec[i]} actions")
        full[:mask.size] = mask.astype(bool)
        return full

    def action(self, i: int, a: np.ndarray, step: int) -> Any:
        """Agent `i`'s action in its own space; one outside it (an index out of the
        agent's range, a NaN) is refused rather than handed to the environment."""
        a = np.asarray(a)
        if self.discrete:
            if not 0 <= int(a) < self.nvec[i]:
                raise HostEnvError(f"{self.name}: agent {self.agents[i]!r} at step {step} was given action {int(a)}, "
                                   f"outside its action space {self.act_spaces[i]}")
            return int(a) + self.starts[i]
        if not np.isfinite(a).all():
            raise HostEnvError(f"{self.name}: agent {self.agents[i]!r} at step {step} was given action {a}, which "
                               f"is not finite")
        sp = self.act_spaces[i]
        return np.clip(a.astype(sp.dtype), sp.low, sp.high)

    def step_arrays(self, obs: dict, masks: dict, infos: dict, live: list[str], reward: dict, step: int):
        """Per-agent dicts of the `live` agents -> `obs [N, obs_dim]`, `mask [N, A]`,
        `active [N]`, `reward [N]` (`[N, K]`); absent agents get zeros and every action legal."""
        n = len(self.agents)
        o = np.zeros((n, self.obs_dim), np.float32)
        m = np.ones((n, self.num_actions), bool)
        active = np.zeros(n, bool)
        for a in live:
            i = self.index[a]
            o[i], inner_mask = self.observation(a, obs[a], step)
            m[i] = self.legal(a, inner_mask if inner_mask is not None else masks.get(a), infos.get(a), step)
            active[i] = True
        r = np.zeros(self.reward_shape, np.float32)
        for a, v in reward.items():
            r[self.rewarded(a, step)] = self.reward(a, v, step)
        return o, m, active, r

    def rewarded(self, agent: str, step: int) -> int:
        """The index of `agent`, which got a reward at `step`; refused when it is not an agent."""
        if agent not in self.index:
            raise HostEnvError(f"{self.name}: step {step} gave a reward to {agent!r}, which is not one of the "
                               f"environment's agents ({', '.join(map(repr, self.agents))})")
        return self.index[agent]


def probe_episode(copy_: HostCopy, layout: AgentLayout, max_steps: int, seed: int = 0) -> tuple[int, ...]:
    """One episode of random legal play on a fresh copy, so that a broken API fails
    when the environment is built. Returns the global state's shape."""
    rng = np.random.default_rng(seed)
    try:
        ts = copy_.reset(seed)
        shape = np.shape(ts.global_state)
        sp = layout.action_space
        for _ in range(max_steps):
            if isinstance(sp, cs.Discrete):
                actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in ts.action_mask])
            else:
                actions = rng.uniform(max(sp.low, -1.0), min(sp.high, 1.0), (len(layout.agents), *sp.shape))
            ts = copy_.step(actions)
            if ts.done:
                break
    except CoplayError:
        raise
    except Exception as e:
        raise foreign_error(layout.name, e) from e
    finally:
        copy_.close()
    return shape


def host_env(make_copy: Callable[[], HostCopy], layout: AgentLayout, *, name: str, max_steps: int,
             max_copies: int, workers: int, worker_backend: str, **spec_fields: Any) -> HostEnv:
    """The HostEnv of copies made by `make_copy` with `layout`'s agents and spaces,
    after one probe episode (see `probe_episode`); `spec_fields` go to its EnvSpec."""
    if max_steps < 1:
        raise ConfigError(f"{name}: max_steps must be >= 1, got {max_steps}")
    state_shape = probe_episode(make_copy(), layout, max_steps)
    spec = EnvSpec(
        name=name,
        num_agents=len(layout.agents),
        obs_space=layout.obs_space,
        action_space=layout.action_space,
        global_state_space=cs.Box(low=-np.inf, high=np.inf, shape=state_shape),
        max_steps=max_steps,
        roles=tuple(layout.agents),
        **spec_fields,
    )
    return HostEnv(make_copy, spec, max_copies=max_copies, workers=workers, worker_backend=worker_backend)


def objectives(space: Any, where: str) -> int:
    """The number of objectives a reward space declares (MO-Gymnasium's and MOMAland's
    `reward_space`, a Box of shape (K,)); 1 without one, or for a scalar space."""
    if space is None or not getattr(space, "shape", None):
        return 1
    if len(space.shape) != 1:
        raise HostEnvError(f"{where}: reward_space {space} must be 1-d (one entry per objective)")
    return int(space.shape[0])


__all__ = ["OUT_OF_BOUNDS", "AgentLayout", "ObservationClipped", "host_env", "objectives", "probe_episode"]
