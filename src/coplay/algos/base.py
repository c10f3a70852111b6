"""What every algorithm provides to the experiment layer.

An algorithm module defines a `Config` dataclass, `steps_per_update(config)`
(environment steps per seed in one update) and `make_trainer(config, env,
num_updates) -> Trainer`. The trainer's `init(key)` builds one seed's
`TrainState` (never under `vmap`: see `coplay.nets.init`), and `update(state)`
is one pure, compiled iteration (collect experience, learn) returning the new
state and a dict of scalar metrics. The experiment layer `vmap`s `update` over
seeds and `lax.scan`s it over a chunk of iterations.

Policies act through one interface so any trained policy, scripted bot or
search agent can be dropped into the same evaluation:

    carry = policy.initial_carry(batch_shape)
    action, carry = policy.act(params, obs, mask, key, carry, reset)

obs: [B, N, *obs_shape], mask: [B, N, A], reset: [B] (episode starts) ->
action: [B, N]. Feed-forward policies ignore `carry` and `reset`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import jax

from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec


@dataclass(frozen=True)
class Policy:
    act: Callable[..., tuple[jax.Array, Any]]
    initial_carry: Callable[[tuple[int, ...]], Any]
    env: Env  # the (wrapped) environment whose observations the policy expects


class Trainer(Protocol):
    env: Env
    steps_per_update: int  # environment steps per seed per update

    def init(self, key: jax.Array) -> Any: ...
    def update(self, state: Any) -> tuple[Any, dict[str, jax.Array]]: ...
    def policy(self) -> Policy: ...
    def policy_params(self, state: Any) -> Any: ...


def check_env_support(spec: EnvSpec, algo: str, *, continuous: bool) -> None:
    """Refuse an environment the algorithm cannot train on, naming the ones that can."""
    if not isinstance(spec.action_space, (Discrete, Box)):
        raise ConfigError(f"environment {spec.name!r} has actions {spec.action_space}; {algo!r} trains on "
                          "Discrete or Box actions only")
    if not continuous and not spec.discrete_actions:
        from coplay.algos import ALGOS  # the registry imports the algorithm modules

        able = sorted(name for name, entry in ALGOS.items() if entry.continuous_actions)
        raise ConfigError(
            f"algorithm {algo!r} needs discrete actions, but environment {spec.name!r} has continuous actions "
            f"({spec.action_space}); algorithms that support continuous actions: {', '.join(able) or 'none'}")
    if spec.reward_dim != 1:
        raise ConfigError(
            f"environment {spec.name!r} has {spec.reward_dim} objectives; {algo!r} needs a scalar reward: "
            "scalarise it first (env reward weights) or use a multi-objective algorithm")
