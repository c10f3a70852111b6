"""Episode statistics: return, length, and every per-step `info` entry summed
over the episode. They appear in `ts.info` under `episode/...` on the step that
ends the episode (with `episode/done` true); on other steps they hold zeros.

    episode/return:   [N] or [N, K]  each agent's undiscounted episode return
    episode/length:   []             steps in the episode
    episode/<key>:    info[<key>] summed over the episode (e.g. collisions, wins)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from coplay.core.env import Wrapper
from coplay.core.types import TimeStep


@struct.dataclass
class StatsState:
    env_state: Any
    episode_return: jax.Array
    episode_length: jax.Array
    info_sums: dict[str, jax.Array]


def _as_float(x: jax.Array) -> jax.Array:
    return jnp.asarray(x, jnp.float32)


class EpisodeStats(Wrapper):
    def _reset(self, key: jax.Array) -> tuple[StatsState, TimeStep]:
        env_state, ts = self.env.reset(key)
        state = StatsState(
            env_state=env_state,
            episode_return=jnp.zeros_like(_as_float(ts.reward)),
            episode_length=jnp.zeros((), jnp.int32),
            info_sums={k: jnp.zeros_like(_as_float(v)) for k, v in ts.info.items()},
        )
        return state, self._with_stats(ts, state, jnp.zeros((), bool))

    def _step(self, state: StatsState, actions: jax.Array, key: jax.Array) -> tuple[StatsState, TimeStep]:
        env_state, ts = self.env.step(state.env_state, actions, key)
        finished = StatsState(
            env_state=env_state,
            episode_return=state.episode_return + ts.reward,
            episode_length=state.episode_length + 1,
            info_sums={k: state.info_sums[k] + _as_float(ts.info[k]) for k in state.info_sums},
        )
        out = self._with_stats(ts, finished, ts.done)
        # Accumulators restart when the episode ends (an outer AutoReset resets the env).
        keep = jnp.logical_not(ts.done)
        next_state = StatsState(
            env_state=env_state,
            episode_return=finished.episode_return * keep,
            episode_length=finished.episode_length * keep,
            info_sums={k: v * keep for k, v in finished.info_sums.items()},
        )
        return next_state, out

    def base_state(self, state: StatsState) -> Any:
        return self.env.base_state(state.env_state)

    @staticmethod
    def _with_stats(ts: TimeStep, state: StatsState, done: jax.Array) -> TimeStep:
        info = dict(ts.info)
        info["episode/done"] = done
        info["episode/return"] = state.episode_return * done
        info["episode/length"] = state.episode_length * done
        for k, v in state.info_sums.items():
            info[f"episode/{k}"] = v * done
        return ts.replace(info=info)  # type: ignore[attr-defined]  # flax struct.dataclass adds replace


def is_info_entry(path: str) -> bool:
    """Whether a state leaf (named by its pytree path) is an `info` entry of a stored
    time step, or an episode's running sum of one. A checkpoint written before an
    environment added an `info` entry lacks these; loaded, they start at zero
    (nothing of the new kind was counted then)."""
    return ".info[" in path or ".info_sums[" in path
