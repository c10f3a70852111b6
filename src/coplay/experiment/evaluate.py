"""Evaluation episodes and episode recording for trained policies."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.base import Policy
from coplay.algos.common.rollout import reset_envs
from coplay.core.env import Wrapper
from coplay.wrappers import AutoReset


def evaluator_for(trainer: Any, episodes: int):
    """The trainer's own evaluation where it defines one (e.g. self-play: against
    random play), else `make_evaluator(trainer.policy(), episodes)`."""
    own = getattr(trainer, "evaluator", None)
    return own(episodes) if own is not None else make_evaluator(trainer.policy(), episodes)


def make_evaluator(policy: Policy, episodes: int):
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

        def body(c, k):
            state, ts, carry, stats, finished = c
            k_act, k_env = jax.random.split(k)
            action, carry = policy.act(params, ts.obs, ts.action_mask, k_act, carry, ts.done)
            state, ts = jax.vmap(env.step)(state, action, jax.random.split(k_env, episodes))
            first = ts.info["episode/done"] & ~finished
            stats = {name: jnp.where(first.reshape(-1, *([1] * (v.ndim - 1))),
                                     ts.info[f"episode/{name}"].astype(jnp.float32), v)
                     for name, v in stats.items()}
            return (state, ts, carry, stats, finished | ts.info["episode/done"]), None

        (_, _, _, stats, finished), _ = jax.lax.scan(
            body, (state, ts, carry, stats, finished), jax.random.split(k_run, horizon))
        ret = stats.pop("return")
        out = {"return": ret.reshape(episodes, -1).mean(-1) if ret.ndim > 1 else ret}
        out.update({k: v.reshape(episodes, -1).mean(-1) for k, v in stats.items()})
        out["finished"] = finished.astype(jnp.float32)
        return out

    return evaluate


def _inner_state(state: Any) -> Any:
    while hasattr(state, "env_state"):
        state = state.env_state
    return state


def record_episode(policy: Policy, params: Any, key: jax.Array, max_frames: int | None = None) -> list[np.ndarray]:
    """Play one episode with one seed's `params` and return rendered RGB frames."""
    env = policy.env.env if isinstance(policy.env, AutoReset) else policy.env
    base = env
    while isinstance(base, Wrapper):
        base = base.env
    render = base.spec.render_rgb
    if render is None:
        return []
    step = jax.jit(env.step)
    k_reset, key = jax.random.split(key)
    state, ts = jax.jit(env.reset)(k_reset)
    carry = policy.initial_carry((1,))
    act = jax.jit(policy.act)
    frames = [render(jax.device_get(_inner_state(state)))]
    limit = max_frames or env.spec.max_steps
    for _ in range(limit):
        key, k_act, k_env = jax.random.split(key, 3)
        action, carry = act(params, ts.obs[None], ts.action_mask[None], k_act, carry, ts.done[None])
        state, ts = step(state, action[0], k_env)
        frames.append(render(jax.device_get(_inner_state(state))))
        if bool(ts.done):
            break
    return frames


def save_gif(frames: list[np.ndarray], path, fps: int = 8) -> None:
    from PIL import Image

    images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
