"""Scalarise vector rewards: an environment with K objectives (`reward [N, K]`)
becomes one with a scalar reward per agent (`reward [N]`), so that every
single-objective algorithm trains on it. The vector is kept in `info`, one entry
per objective named from `spec.objective_names` (`info["objective/<name>"]`,
`[N]`), so that `EpisodeStats` sums each into `episode/objective/<name>`, each
agent's return in that objective, and training metrics, evaluations,
metrics.csv and summary.json report every objective by name. `Objectives(env)`
does only that, leaving the vector reward as it is (for the trainers that
learn from the vector themselves).

    Scalarise(env, weights=[0.7, 0.3])                                  # linear
    Scalarise(env, weights=[0.5, 0.5], method="chebyshev", utopia=[10, 0])

- `linear`: r = w . r_vec at every step, so the episode return is w . R, the
  linear utility of the vector return R.
- `chebyshev` (Tchebycheff): the utility of a vector return v is
  u(v) = -max_k w_k |z_k - v_k| for a utopia point z (at least the best return of
  each objective). It is not a sum over steps, so each step pays the change in the
  utility of the return so far: r_t = u(R_t) - u(R_{t-1}), R_t the vector return
  after step t. An episode's scalar return is then u(R) - u(0), the utility of its
  vector return up to a constant: it optimises the expected utility of episode
  returns (ESR), which is what a non-linear utility of one episode asks for.

`weights` is `[K]` (every agent) or `[N, K]` (one row per agent), non-negative with
a positive sum; they are used as given, not normalised (`coplay train`'s `preference=`
is normalised before it gets here). A utopia point that is not better than every return
the environment can reach, as far as it knows them (its true front, its reference point),
is refused (`check_utopia`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env, TimeStepWrapper, Wrapper
from coplay.core.errors import ConfigError, CoplayError, unknown_name
from coplay.core.types import EnvSpec, TimeStep

METHODS = ("linear", "chebyshev")


@struct.dataclass
class ScalariseState:
    env_state: Any
    vector_return: jax.Array   # [N, K] the episode's vector return so far


def chebyshev(weights: jax.Array, utopia: jax.Array, vector_return: jax.Array,
              scale: jax.Array | float = 1.0) -> jax.Array:
    """Tchebycheff utility `[..., K] -> [...]`: u(v) = -max_k w_k |z_k - v_k| / s_k, for
    weights w, utopia point z and a per-objective scale s (Miettinen, 1999). Every
    Pareto-optimal return is the maximum of u for some weight when z is strictly better
    than every return, concave parts of the front included, which no linear weight
    reaches."""
    return -jnp.max(weights * jnp.abs(utopia - vector_return) / scale, axis=-1)


def true_front(env: Env) -> np.ndarray | None:
    """`[F, K]`: the environment's true Pareto front, where it computes one."""
    compute = getattr(getattr(env, "unwrapped", env), "true_front", None)
    if compute is None:
        return None
    try:
        return np.asarray(compute(), np.float64)
    except CoplayError:       # an environment that computes it for some of its variants only
        return None


def named_reference_point(env: Env) -> np.ndarray | None:
    """`[K]`: the reference point the environment names in code, where it names one (weakly
    worse than every episode return in each objective)."""
    given = getattr(getattr(env, "unwrapped", env), "reference_point", None)
    return None if given is None else np.asarray(given, np.float64)


def check_utopia(env: Env, utopia: np.ndarray, given: str) -> None:
    """Refuse a utopia point `[K]` that is not better than every return `env` can reach, as
    far as the environment knows its returns: below the best of its true front in some
    objective, or not above its reference point (which every return is at least). `given`
    names the value as the user wrote it."""
    names = env.spec.objective_names
    truth = true_front(env)
    if truth is not None and np.any(truth.max(0) > utopia):
        raise ConfigError(f"{given} is not a utopia point of {env.spec.name!r}: its true front reaches "
                          f"{truth.max(0).tolist()} in ({', '.join(names)}); give one at least that good in every "
                          "objective")
    reference = named_reference_point(env)
    if reference is not None and np.any(utopia <= reference):
        low = ", ".join(n for n, below in zip(names, utopia <= reference) if below)
        raise ConfigError(f"{given} is not a utopia point of {env.spec.name!r}: it is not above the environment's "
                          f"reference point {reference.tolist()} (every episode return is at least that) in {low}; "
                          "give one better than every episode return in every objective")


class Accrued(Wrapper):
    """The episode's vector return before each step, `info["accrued"]` (`[N, K]`), so that
    a utility of the episode's return that is not a sum over steps can be paid step by
    step: r_t = u(accrued + r_t^vec) - u(accrued) sums over an episode to u(R) - u(0)."""

    def _reset(self, key: jax.Array) -> tuple[ScalariseState, TimeStep]:
        env_state, ts = self.env.reset(key)
        zero = jnp.zeros(ts.reward.shape, jnp.float32)
        return ScalariseState(env_state, zero), self._accrued(ts, zero)

    def _step(self, state: ScalariseState, actions: jax.Array, key: jax.Array) -> tuple[ScalariseState, TimeStep]:
        env_state, ts = self.env.step(state.env_state, actions, key)
        so_far = state.vector_return + ts.reward.astype(jnp.float32)
        # The return restarts with the episode (also where the environment resets itself).
        return ScalariseState(env_state, so_far * jnp.logical_not(ts.done)), self._accrued(ts, state.vector_return)

    def _accrued(self, ts: TimeStep, before: jax.Array) -> TimeStep:
        return ts.replace(info={**ts.info, "accrued": before})  # type: ignore[attr-defined]  # flax struct.dataclass adds replace

    def base_state(self, state: ScalariseState) -> Any:
        return self.env.base_state(state.env_state)


class Scalarise(Accrued):
    def __init__(self, env: Env, weights: Any, method: str = "linear", utopia: Any = None):
        super().__init__(env)
        spec = env.spec
        n, k = spec.num_agents, spec.reward_dim
        if k < 2:
            raise ConfigError(f"Scalarise needs vector rewards (reward_dim >= 2); {spec.name!r} has a scalar reward")
        if method not in METHODS:
            raise unknown_name("scalarisation method", method, METHODS)
        w = np.asarray(weights, np.float64)
        if w.shape not in ((k,), (n, k)) or not np.all(np.isfinite(w)):
            raise ConfigError(f"weights for {spec.name!r} must be {k} finite numbers (one per objective: "
                              f"{', '.join(spec.reward_names) or k}) or [{n}, {k}] (one row per agent), got "
                              f"{np.asarray(weights).tolist()}")
        if np.any(w < 0) or np.any(w.reshape(-1, k).sum(-1) <= 0):
            raise ConfigError(f"weights must be non-negative with a positive sum, got {w.tolist()}")
        self.weights = jnp.asarray(np.broadcast_to(w, (n, k)), jnp.float32)
        self.method = method
        if method == "chebyshev":
            if utopia is None:
                raise ConfigError("method='chebyshev' needs a utopia point: one number per objective, at least "
                                  "the best episode return of each")
            z = np.asarray(utopia, np.float64)
            if z.shape != (k,) or not np.all(np.isfinite(z)):
                raise ConfigError(f"utopia must be {k} finite numbers (one per objective), got "
                                  f"{np.asarray(utopia).tolist()}")
            check_utopia(env, z, f"utopia {z.tolist()}")
            self.utopia = jnp.asarray(z, jnp.float32)
        elif utopia is not None:
            raise ConfigError("a utopia point is used by method='chebyshev' only; linear weights take none")
        self.spec = dataclasses.replace(spec, reward_dim=1, reward_names=())

    def utility(self, vector_return: jax.Array) -> jax.Array:
        """`[N, K] -> [N]`: each agent's utility of a vector return."""
        if self.method == "linear":
            return jnp.sum(self.weights * vector_return, axis=-1)
        return chebyshev(self.weights, self.utopia, vector_return)

    def _accrued(self, ts: TimeStep, before: jax.Array) -> TimeStep:
        vector = ts.reward.astype(jnp.float32)
        reward = self.utility(vector) if self.method == "linear" else \
            self.utility(before + vector) - self.utility(before)
        info = {**ts.info, **objective_info(self.env.spec, ts.reward)}
        return ts.replace(reward=reward, info=info)  # type: ignore[attr-defined]  # flax struct.dataclass adds replace


def objective_info(spec: EnvSpec, reward: jax.Array) -> dict[str, jax.Array]:
    """`reward [N, K]` as `info` entries, one per objective: `objective/<name>` -> `[N]`."""
    return {f"objective/{name}": reward[:, k].astype(jnp.float32) for k, name in enumerate(spec.objective_names)}


class Objectives(TimeStepWrapper):
    """Each objective of a vector reward also in `info["objective/<name>"]` (`[N]`); the
    reward stays the vector `[N, K]`."""

    def __init__(self, env: Env):
        super().__init__(env)
        if env.spec.reward_dim < 2:
            raise ConfigError(f"Objectives needs vector rewards (reward_dim >= 2); {env.spec.name!r} has a scalar "
                              "reward")

    def _view(self, state: Any, ts: TimeStep) -> TimeStep:
        return ts.replace(info={**ts.info, **objective_info(self.spec, ts.reward)})  # type: ignore[attr-defined]
