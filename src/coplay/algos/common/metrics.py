"""Turn a trajectory's per-step info into per-update training metrics."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def episode_metrics(info: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """info: [T, E, ...] with the EpisodeStats keys. Returns the mean over the
    episodes that ended in this trajectory (NaN when none did), plus their count.

    `return` is the episode return averaged over agents (per-agent convention;
    `return_sum` adds the agents' returns)."""
    done = info["episode/done"].astype(jnp.float32)          # [T, E]
    count = jnp.sum(done)
    denom = jnp.where(count > 0, count, jnp.nan)
    out = {"episodes": count}
    for key, value in info.items():
        if not key.startswith("episode/") or key == "episode/done":
            continue
        name = key[len("episode/"):]
        value = value.astype(jnp.float32)
        if name == "return":
            per_agent = value if value.ndim == 3 else value.mean(-1)  # [T, E, N](, K)
            out["return"] = jnp.sum(per_agent.mean(-1) * done) / denom
            out["return_sum"] = jnp.sum(per_agent.sum(-1) * done) / denom
            continue
        value = value.reshape(*done.shape, -1).mean(-1)
        out[name] = jnp.sum(value * done) / denom
    return out
