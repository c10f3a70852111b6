"""Evaluation episodes of a policy, compiled: the default `Trainer.evaluator`."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from coplay.algos.common.rollout import play_until_done, reset_envs
from coplay.core.policy import Evaluator, Policy


def make_evaluator(policy: Policy, episodes: int) -> Evaluator:
    """Returns `evaluate(params, key) -> dict of [episodes]` arrays: each
    environment's first complete episode's statistics (`return` is the episode
    return averaged over agents; other keys are the summed `info` entries).
    Pure and jit-able; `vmap` it over seeds."""
    env = policy.env
    horizon = env.spec.max_steps

    def evaluate(params: Any, key: jax.Array) -> dict[str, jax.Array]:
        k_reset, k_run = jax.random.split(key)
        state, ts = reset_envs(env, k_reset, episodes)
        carry = policy.initial_carry((episodes,))
        stats = {k[len("episode/"):]: jnp.zeros(v.shape[:1] + v.shape[1:], jnp.float32)
                 for k, v in ts.info.items() if k.startswith("episode/") and k != "episode/done"}
        finished = jnp.zeros((episodes,), bool)

        keys = jax.random.split(k_run, horizon)

        def body(t, c):
            state, ts, carry, stats, finished = c
            k_act, k_env = jax.random.split(keys[t])
            action, carry = policy.act(params, ts.obs, ts.action_mask, k_act, carry, ts.done)
            state, ts = jax.vmap(env.step)(state, action, jax.random.split(k_env, episodes))
            first = ts.info["episode/done"] & ~finished
            stats = {name: jnp.where(first.reshape(-1, *([1] * (v.ndim - 1))),
                                     ts.info[f"episode/{name}"].astype(jnp.float32), v)
                     for name, v in stats.items()}
            return state, ts, carry, stats, finished | ts.info["episode/done"]

        _, _, _, stats, finished = play_until_done(env, horizon, body, (state, ts, carry, stats, finished),
                                                   lambda c: c[-1])
        ret = stats.pop("return")
        out = {"return": ret.reshape(episodes, -1).mean(-1) if ret.ndim > 1 else ret}
        out.update({k: v.reshape(episodes, -1).mean(-1) for k, v in stats.items()})
        out["finished"] = finished.astype(jnp.float32)
        return out

    return evaluate
