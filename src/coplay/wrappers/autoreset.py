"""Auto-reset: when an episode ends, the next state is a fresh episode's.

The returned TimeStep keeps the finished step's `reward`, `done`, `truncated`
and `info` (so returns and episode ends are seen), while `obs`, `active`,
`action_mask` and `global_state` are the new episode's first ones, which is what
the next action is chosen from.

Environments that already reset themselves inside `step` (`env.auto_resets`,
e.g. those stepped on the host) are passed through unchanged."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from coplay.core.env import State, Wrapper
from coplay.core.types import TimeStep


def _select(pred: jax.Array, on_true, on_false):
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


class AutoReset(Wrapper):
    def _reset(self, key: jax.Array) -> tuple[State, TimeStep]:
        return self.env.reset(key)

    def _step(self, state: State, actions: jax.Array, key: jax.Array) -> tuple[State, TimeStep]:
        if self.env.auto_resets:
            return self.env.step(state, actions, key)
        key_step, key_reset = jax.random.split(key)
        state, ts = self.env.step(state, actions, key_step)
        reset_state, reset_ts = self.env.reset(key_reset)
        state = _select(ts.done, reset_state, state)
        ts = ts.replace(  # type: ignore[attr-defined]  # flax struct.dataclass adds replace
            obs=jnp.where(ts.done, reset_ts.obs, ts.obs),
            active=jnp.where(ts.done, reset_ts.active, ts.active),
            action_mask=jnp.where(ts.done, reset_ts.action_mask, ts.action_mask),
            global_state=jnp.where(ts.done, reset_ts.global_state, ts.global_state),
        )
        return state, ts
