"""The agent half of the core contract: how a policy acts and how it is evaluated.

Policies act through one interface, so any trained policy, a scripted bot, a
search agent or a language model can be dropped into the same evaluation,
tournament, scenario or self-play pool:

    carry = policy.initial_carry(batch_shape)
    action, carry = policy.act(params, obs, mask, key, carry, reset)

obs: [B, N, *obs_shape], mask: [B, N, A], reset: [B] (episode starts) ->
action: [B, N]. Feed-forward policies ignore `carry` and `reset` (`no_carry`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from coplay.core.env import Env

# Evaluation: `evaluate(params, key) -> dict of [episodes'] arrays` ("return" among them).
Evaluator = Callable[[Any, jax.Array], dict[str, jax.Array]]


@dataclass(frozen=True)
class Policy:
    act: Callable[..., tuple[jax.Array, Any]]
    initial_carry: Callable[[tuple[int, ...]], Any]
    env: Env  # the (wrapped) environment whose observations the policy expects
    # What the policy reads where it is not `env`'s observation: `observe(state [B], ts [B])
    # -> [B, N, ...]` from the environment's state (a text policy playing the game under
    # its text environment reads the views written from the game's state). Games between
    # policies (`algos.common.matches`) honour it.
    observe: Callable[[Any, Any], jax.Array] | None = None
    # A discrete-action policy's distribution, where it has one: `probs(params, obs, mask,
    # carry, reset) -> (probs [B, N, A], carry)`, the probabilities `act` samples from (what an
    # attack that measures its influence on the policy reads; None for a policy without one).
    probs: Callable[..., tuple[jax.Array, Any]] | None = None


def no_carry(batch: tuple[int, ...]) -> jax.Array:
    """The carry of a policy without memory."""
    return jnp.zeros((*batch, 0), jnp.float32)
