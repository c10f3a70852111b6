"""Social preferences as reward transformations, for any environment with one
reward per agent. Each wrapper leaves `ts.reward` as the environment's and reports
what its preference adds, u_i - r_i, as `info["shaping/<name>"]` ([N] float32), so
a learner trains on u_i with `algo.shaped_reward=shaping/<name>` while returns,
metrics and evaluations stay the environment's. For N agents with rewards r_i:

- `InequityAversion` (Hughes et al., 2018; Fehr & Schmidt, 1999), on rewards
  smoothed over the episode, e_i,t = smoothing * e_i,t-1 + r_i,t (e_i,0 = 0):

      u_i = r_i - alpha / (N - 1) * sum_{j != i} max(e_j - e_i, 0)
                - beta  / (N - 1) * sum_{j != i} max(e_i - e_j, 0)

  alpha prices disadvantageous inequity (others ahead), beta advantageous.
- `SocialValueOrientation` (McKee et al., 2020), on the same smoothed rewards:

      theta_i = atan2(mean_{j != i} e_j, e_i),   u_i = r_i - weight * |angle - theta_i|

  with `angle` in degrees (0 selfish, 45 prosocial, 90 altruistic); theta_i = angle
  while e_i and the others' mean are both 0 (no rewards yet: no preference to
  express).
- `RewardExchange` (reward transfer; Hughes et al.'s and SocialJax's "common
  interest"): each agent keeps 1 - share of its reward and receives share of the
  mean of the others' in its group (every agent, or its team, `spec.teams`):

      u_i = (1 - share) * r_i + share * mean_{j in group(i), j != i} r_j

  (u_i = r_i for an agent alone in its group). share = (N - 1) / N gives every agent
  the group's mean reward.
- `ActionCost` (intrinsic punishment costs): u_i = r_i - cost * info[key]_i, for a
  per-agent `info` entry such as the social dilemmas' `zapping` (the agent fired its
  zap beam): a price an agent pays in its own utility for punishing.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from coplay.core.env import Env, Wrapper
from coplay.core.errors import ConfigError
from coplay.core.types import TimeStep


def _scalar_rewards(env: Env, name: str) -> None:
    if env.spec.reward_dim != 1:
        raise ConfigError(f"{name} needs one reward per agent; {env.spec.name} has {env.spec.reward_dim} objectives "
                          "(scalarise them first)")
    if env.spec.num_agents < 2:
        raise ConfigError(f"{name} compares agents' rewards; {env.spec.name} has one agent")


def _shaping(ts: TimeStep, name: str, utility: jax.Array) -> TimeStep:
    info = dict(ts.info)
    info[f"shaping/{name}"] = (utility - ts.reward).astype(jnp.float32)
    return ts.replace(info=info)  # type: ignore[attr-defined]


def _others_mean(x: jax.Array, group: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(mean over the other agents of each agent's group [N], how many there are [N])."""
    same = (group[:, None] == group[None, :]) & ~jnp.eye(x.shape[0], dtype=bool)
    count = jnp.sum(same, axis=1)
    return jnp.sum(jnp.where(same, x[None, :], 0.0), axis=1) / jnp.maximum(count, 1), count


@struct.dataclass
class SmoothedState:
    env_state: Any
    smoothed: jax.Array     # [N] e_i: each agent's reward smoothed over the episode so far


class _Smoothed(Wrapper):
    """A preference over rewards smoothed over the episode (`smoothing` in [0, 1))."""

    name = ""

    def __init__(self, env: Env, smoothing: float):
        super().__init__(env)
        _scalar_rewards(env, type(self).__name__)
        if not 0.0 <= smoothing < 1.0:
            raise ConfigError(f"smoothing={smoothing!r} is out of range; it must be in [0, 1) (0: this step's "
                              "rewards only)")
        self.smoothing = float(smoothing)

    def utility(self, reward: jax.Array, smoothed: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _reset(self, key: jax.Array) -> tuple[SmoothedState, TimeStep]:
        state, ts = self.env.reset(key)
        zeros = jnp.zeros(self.spec.num_agents, jnp.float32)
        return SmoothedState(state, zeros), _shaping(ts, self.name, ts.reward)

    def _step(self, state: SmoothedState, actions: jax.Array, key: jax.Array) -> tuple[SmoothedState, TimeStep]:
        env_state, ts = self.env.step(state.env_state, actions, key)
        smoothed = self.smoothing * state.smoothed + ts.reward
        return SmoothedState(env_state, smoothed), _shaping(ts, self.name, self.utility(ts.reward, smoothed))

    def base_state(self, state: SmoothedState) -> Any:
        return self.env.base_state(state.env_state)


class InequityAversion(_Smoothed):
    name = "inequity_aversion"

    def __init__(self, env: Env, alpha: float = 5.0, beta: float = 0.05, smoothing: float = 0.95):
        super().__init__(env, smoothing)
        self.alpha, self.beta = float(alpha), float(beta)

    def utility(self, reward: jax.Array, smoothed: jax.Array) -> jax.Array:
        gap = smoothed[None, :] - smoothed[:, None]                  # [i, j] e_j - e_i
        n = reward.shape[0]
        behind = jnp.sum(jnp.maximum(gap, 0.0), axis=1) / (n - 1)
        ahead = jnp.sum(jnp.maximum(-gap, 0.0), axis=1) / (n - 1)
        return reward - self.alpha * behind - self.beta * ahead


class SocialValueOrientation(_Smoothed):
    name = "social_value_orientation"

    def __init__(self, env: Env, angle: float = 45.0, weight: float = 0.1, smoothing: float = 0.95):
        super().__init__(env, smoothing)
        if not 0.0 <= angle <= 90.0:
            raise ConfigError(f"angle={angle!r} is out of range; it must be in [0, 90] degrees "
                              "(0 selfish, 45 prosocial, 90 altruistic)")
        self.angle, self.weight = math.radians(angle), float(weight)

    def utility(self, reward: jax.Array, smoothed: jax.Array) -> jax.Array:
        others, _ = _others_mean(smoothed, jnp.zeros(reward.shape[0], jnp.int32))
        none = (smoothed == 0) & (others == 0)
        theta = jnp.where(none, self.angle, jnp.arctan2(others, smoothed))
        return reward - self.weight * jnp.abs(self.angle - theta)


class RewardExchange(Wrapper):
    name = "reward_exchange"

    def __init__(self, env: Env, share: float = 0.5, within: str = "all"):
        super().__init__(env)
        _scalar_rewards(env, "RewardExchange")
        if within not in ("all", "teams"):
            raise ConfigError(f"within={within!r} is not allowed; valid choices: all, teams")
        if not 0.0 <= share <= 1.0:
            raise ConfigError(f"share={share!r} is out of range; it must be in [0, 1]")
        self.share = float(share)
        n = env.spec.num_agents
        self.group = jnp.zeros(n, jnp.int32) if within == "all" else jnp.asarray(env.spec.teams, jnp.int32)

    def utility(self, reward: jax.Array) -> jax.Array:
        others, count = _others_mean(reward, self.group)
        return jnp.where(count > 0, (1 - self.share) * reward + self.share * others, reward)

    def _reset(self, key: jax.Array) -> tuple[Any, TimeStep]:
        state, ts = self.env.reset(key)
        return state, _shaping(ts, self.name, self.utility(ts.reward))

    def _step(self, state: Any, actions: jax.Array, key: jax.Array) -> tuple[Any, TimeStep]:
        state, ts = self.env.step(state, actions, key)
        return state, _shaping(ts, self.name, self.utility(ts.reward))


class ActionCost(Wrapper):
    name = "action_cost"

    def __init__(self, env: Env, key: str = "zapping", cost: float = 1.0):
        super().__init__(env)
        _scalar_rewards(env, "ActionCost")
        info = jax.eval_shape(env.reset, jax.random.key(0))[1].info
        if key not in info:
            raise ConfigError(f"key={key!r} is not an info entry of {env.spec.name}; its entries: "
                              f"{', '.join(sorted(info)) or 'none'}")
        if tuple(info[key].shape) != (env.spec.num_agents,):
            raise ConfigError(f"key={key!r} has shape {tuple(info[key].shape)}; an action's cost needs one entry "
                              f"per agent ({env.spec.num_agents},)")
        self.key, self.cost = key, float(cost)

    def utility(self, ts: TimeStep) -> jax.Array:
        return ts.reward - self.cost * ts.info[self.key].astype(jnp.float32)

    def _reset(self, key: jax.Array) -> tuple[Any, TimeStep]:
        state, ts = self.env.reset(key)
        return state, _shaping(ts, self.name, self.utility(ts))

    def _step(self, state: Any, actions: jax.Array, key: jax.Array) -> tuple[Any, TimeStep]:
        state, ts = self.env.step(state, actions, key)
        return state, _shaping(ts, self.name, self.utility(ts))


# The preferences by name, for a run's `social=` field.
PREFERENCES: dict[str, type[Wrapper]] = {
    "inequity_aversion": InequityAversion, "social_value_orientation": SocialValueOrientation,
    "reward_exchange": RewardExchange, "action_cost": ActionCost,
}


def parse_preference(text: str) -> tuple[str, dict[str, Any]]:
    """`name[:field=value...]` (e.g. `inequity_aversion:alpha=5:beta=0.05`) -> (name,
    fields), each value read as its default's type; an unknown name or field, or a value
    of the wrong type, is a ConfigError naming it and the valid choices."""
    import inspect

    from coplay.core.config import parse_scalar

    name, *items = text.split(":")
    if name not in PREFERENCES:
        raise ConfigError(f"unknown preference {name!r}; valid: {', '.join(PREFERENCES)}")
    params = {k: p.default for k, p in inspect.signature(PREFERENCES[name].__init__).parameters.items()
              if k not in ("self", "env")}
    fields: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or key not in params:
            raise ConfigError(f"{item!r} is not field=value of {name}; its fields: "
                              f"{', '.join(params)}")
        value = parse_scalar(raw)
        default = params[key]
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not type(default):
            raise ConfigError(f"{key}={raw!r} must be a {type(default).__name__} "
                              f"(default {default!r})")
        fields[key] = value
    return name, fields


def preference_error(text: str) -> str | None:
    """What is wrong with `text` as a preference (None: nothing), for the config's checks."""
    try:
        parse_preference(text)
    except ConfigError as e:
        return str(e)
    return None


def social_preference(env: Env, text: str) -> Wrapper:
    """`env` wrapped in the preference `text` names (`parse_preference`)."""
    name, fields = parse_preference(text)
    return PREFERENCES[name](env, **fields)
