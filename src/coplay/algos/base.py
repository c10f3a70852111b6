"""What every algorithm provides to the experiment layer.

An algorithm module defines a `Config` dataclass and `make_trainer(config, env,
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
