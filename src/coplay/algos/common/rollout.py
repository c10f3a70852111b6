"""Collect a trajectory from E parallel environments inside `lax.scan`.

The environment is stepped with `vmap`; the acting function is whatever the
algorithm supplies, so the same loop serves on-policy and off-policy learners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from coplay.core.env import Env
from coplay.core.types import TimeStep
from coplay.wrappers import AgentID, AutoReset, EpisodeStats


def acting_env(env: Env, agent_id: bool) -> Env:
    """The environment as the PPO and Q families step it: one-hot agent ids appended to
    the observations (`agent_id`, when one network serves every agent), episode
    statistics, and auto-reset."""
    return AutoReset(EpisodeStats(AgentID(env) if agent_id else env))


@struct.dataclass
class Transition:
    """One step of E environments; a trajectory has a leading time axis [T, E, ...].

    ts:       the TimeStep the action was chosen from (obs, action_mask, active, global_state)
    action:   [E, N] or [E, N, d]
    reward:   [E, N] (or [E, N, K]) reward received for the action
    done:     [E] the episode ended with this step
    truncated:[E] it ended by the time limit
    info:     per-step info returned with the reward (episode/... statistics included)
    extras:   whatever the acting function recorded (log-probabilities, values, ...)
    """

    ts: TimeStep
    action: jax.Array
    reward: jax.Array
    done: jax.Array
    truncated: jax.Array
    info: dict[str, jax.Array]
    extras: dict[str, jax.Array]


ActFn = Callable[[Any, TimeStep, jax.Array], tuple[Any, jax.Array, dict[str, jax.Array]]]


def rollout(env: Env, act: ActFn, env_state: Any, ts: TimeStep, policy_carry: Any,
            key: jax.Array, length: int) -> tuple[tuple[Any, TimeStep, Any], Transition]:
    """Run `length` steps. `act(policy_carry, ts, key) -> (policy_carry, action, extras)`
    sees the batched TimeStep ([E, ...]). Returns the final (env_state, ts,
    policy_carry) and the stacked transitions [length, E, ...]."""
    num_envs = ts.done.shape[0]
    # Every key of the rollout in one draw (per step: the policy's, then one per
    # environment) instead of two splits inside every step.
    keys = jax.random.split(key, (length, num_envs + 1))

    def body(carry, step_keys):
        env_state, ts, policy_carry = carry
        policy_carry, action, extras = act(policy_carry, ts, step_keys[0])
        env_state, next_ts = jax.vmap(env.step)(env_state, action, step_keys[1:])
        step = Transition(
            ts=ts.replace(info={}), action=action, reward=next_ts.reward, done=next_ts.done,
            truncated=next_ts.truncated, info=next_ts.info, extras=extras,
        )
        return (env_state, next_ts, policy_carry), step

    return jax.lax.scan(body, (env_state, ts, policy_carry), keys)


def reset_envs(env: Env, key: jax.Array, num_envs: int) -> tuple[Any, TimeStep]:
    """Reset `num_envs` copies: returns batched state and TimeStep [E, ...]."""
    return jax.vmap(env.reset)(jax.random.split(key, num_envs))


def play_until_done(env: Env, horizon: int, body: Callable[[jax.Array, Any], Any], carry: Any,
                    finished: Callable[[Any], jax.Array], *, vmapped: bool = True) -> Any:
    """`carry = body(t, carry)` for t = 0, 1, ... up to `horizon` steps, stopping once
    `finished(carry)` is all true: steps after every episode has ended change nothing.
    Where states are used once (`env.states_used_once`, host copies) and the loop may be
    batched by `vmap` (`vmapped`, the default), it always runs `horizon` steps: a batched
    stop condition keeps stepping finished members and keeps their old states, which such
    environments refuse. `vmapped=False` promises that no `vmap` batches the loop, so that
    it stops early on host copies too (a host environment of 1,000 steps whose episodes
    end after 20 is then stepped about 20 times, not 1,000); a broken promise is refused
    by the host environment, never silently wrong."""
    run_to_horizon = env.states_used_once and vmapped

    def go_on(c):
        t, inner = c
        return t < horizon if run_to_horizon else (t < horizon) & ~jnp.all(finished(inner))

    return jax.lax.while_loop(go_on, lambda c: (c[0] + 1, body(c[0], c[1])), (jnp.int32(0), carry))[1]
