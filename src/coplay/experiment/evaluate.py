"""Recording episodes of trained policies (frames, GIFs)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.core.compile import jit
from coplay.core.env import Wrapper
from coplay.core.policy import Policy
from coplay.wrappers import AutoReset


def record_episode(policy: Policy, params: Any, key: jax.Array, max_frames: int | None = None) -> list[np.ndarray]:
    """Play one episode with one seed's `params` and return rendered RGB frames."""
    env = policy.env.env if isinstance(policy.env, AutoReset) else policy.env
    render = env.spec.render_rgb  # wrappers keep the environment's renderer
    if render is None:
        return []
    step = jit(env.step)
    k_reset, key = jax.random.split(key)
    state, ts = jit(env.reset)(k_reset)
    carry = policy.initial_carry((1,))
    act = jit(policy.act)
    frames = [render(jax.device_get(env.base_state(state)))]
    limit = max_frames or env.spec.max_steps
    for _ in range(limit):
        key, k_act, k_env = jax.random.split(key, 3)
        action, carry = act(params, ts.obs[None], ts.action_mask[None], k_act, carry, ts.done[None])
        state, ts = step(state, action[0], k_env)
        frames.append(render(jax.device_get(env.base_state(state))))
        if bool(ts.done):
            break
    return frames


def record_dialogue(policy: Policy, params: Any, key: jax.Array) -> list[str]:
    """Play one episode of a text environment with one seed's `params` and return it
    as lines of text: what each speaker read, what it said, and each agent's episode
    return; an empty list for environments that are not text environments."""
    from coplay.envs.text.base import TextEnv

    # played in the policy's own environment (its wrappers may carry what it reads, such as
    # the legal moves of a policy restricted to them), read in the text environment's words
    played = policy.env.env if isinstance(policy.env, AutoReset) else policy.env
    env = played.unwrapped if isinstance(played, Wrapper) else played
    if not isinstance(env, TextEnv):
        return []
    step, act = jit(played.step), jit(policy.act)
    k_reset, key = jax.random.split(key)
    state, ts = jit(played.reset)(k_reset)
    carry = policy.initial_carry((1,))
    roles, lines = env.spec.roles, []
    returns = np.zeros(len(roles))
    for _ in range(env.spec.max_steps):
        key, k_act, k_env = jax.random.split(key, 3)
        action, carry = act(params, ts.obs[None], ts.action_mask[None], k_act, carry, ts.done[None])
        speakers = np.flatnonzero(np.asarray(ts.active))
        for i in speakers:
            lines.append(f"{roles[i]} reads: {env.vocab.decode(np.asarray(ts.obs[i]))}")
            lines.append(f"{roles[i]} says:  {env.vocab.decode(np.asarray(action[0, i])) or '(nothing)'}")
        state, ts = step(state, action[0], k_env)
        returns += np.asarray(ts.reward).reshape(len(roles), -1)[:, 0]
        invalid = np.asarray(ts.info.get("invalid_utterance", np.zeros(len(roles), bool)))
        for i in np.flatnonzero(invalid):
            lines.append(f"  ({roles[i]}'s utterance names no legal move)")
        if bool(ts.done):
            break
    lines.append("end: " + ", ".join(f"{r} {float(v):+g}" for r, v in zip(roles, returns)))
    return lines


def save_gif(frames: list[np.ndarray], path, fps: int = 8) -> None:
    """`frames` as an animated GIF at `path`, written atomically (the old file or the new one, never a torn one)."""
    from PIL import Image

    from coplay.experiment.checkpoint import atomic_write

    images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
    buf = io.BytesIO()
    images[0].save(buf, format="GIF", save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    atomic_write(Path(path), buf.getvalue())
