"""How often an agent repeats itself within one update: the batch-level term of
R-Zero's repetition penalty (Huang et al., 2025), with exact matches of whole
utterances in place of its BLEU clusters. No single episode can compute it,
which is why it lives beside the trainer and not in an environment."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from coplay.algos.common.group_advantages import view_keys
from coplay.core.errors import ConfigError


def agent_set(agents: str, n: int, env_name: str) -> tuple[int, ...]:
    """`algo.repeat_agents` ("all" or comma-separated agent indices) as a tuple of indices of `n` agents."""
    if str(agents).strip() == "all":
        return tuple(range(n))
    try:
        chosen = tuple(int(a) for a in str(agents).replace(" ", "").split(","))
    except ValueError:
        chosen = ()
    if not chosen or any(not 0 <= a < n for a in chosen):
        raise ConfigError(f"algo.repeat_agents={agents!r}: give 'all' or agent indices 0..{n - 1} of {env_name!r}, "
                          f"comma-separated (e.g. algo.repeat_agents=0)")
    return chosen


def repeat_share(tokens: jax.Array, agent: jax.Array, said: jax.Array, n: int) -> jax.Array:
    """`tokens [H, E, K, T]` utterances by `agent [H, E, K]`, of which `said [H, E, K]`
    count -> `[H, E, N]`: at each counted utterance, the share of its agent's counted
    utterances in the batch that are the same utterance (0 elsewhere). Every pair is
    compared, which is cheap at the sizes of one update (a few hundred thousand pairs)."""
    key = view_keys(tokens).reshape(-1)
    agent_flat, said_flat = agent.reshape(-1), said.reshape(-1)
    same = (key[:, None] == key[None, :]) & (agent_flat[:, None] == agent_flat[None, :]) & said_flat[None, :]
    per_agent = jnp.sum(jax.nn.one_hot(agent_flat, n) * said_flat[:, None], axis=0)            # [N]
    share = jnp.sum(same, axis=1) / jnp.maximum(per_agent[agent_flat], 1.0)
    share = jnp.where(said_flat, share, 0.0).reshape(said.shape)                                # [H, E, K]
    h, e, _ = said.shape
    return jnp.zeros((h, e, n)).at[jnp.arange(h)[:, None, None], jnp.arange(e)[None, :, None], agent].add(share)
