"""Social outcome metrics of an episode (Perolat et al., 2017, "A multi-agent
reinforcement learning model of common-pool resource appropriation", section 3),
for N agents over an episode of T steps with returns R_i:

    efficiency      U = sum_i R_i / T                      collective return per step
    equality        E = 1 - sum_i sum_j |R_i - R_j| / (2 N sum_i |R_i|)
                                                           one minus the Gini coefficient
                                                           (1 when every return is 0)
    sustainability  S = (1 / N') sum_i t_i,  t_i = mean of the steps t (1..T) at which
                                                           r_i,t > 0, over the N' agents
                                                           rewarded at all (0 if none was)
    peace           P = (N T - sum_i sum_t removed_i,t) / T
                                                           agents on the map, on average

Every social dilemma keeps a `Tally` in its state and reports the four in `info`
under `social/...` on the step that ends an episode (zeros on other steps), so the
episode statistics carry them into every run's metrics and summary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

NAMES = ("efficiency", "equality", "sustainability", "peace")


class Tally(struct.PyTreeNode):
    returns: jax.Array        # [N] the episode's rewards so far
    reward_time: jax.Array    # [N] sum of the steps at which r_i > 0
    rewarded: jax.Array       # [N] number of such steps
    removed: jax.Array        # [] agent-steps spent removed
    steps: jax.Array          # [] steps so far

    @classmethod
    def zeros(cls, n: int) -> Tally:
        z = jnp.zeros((n,), jnp.float32)
        return cls(returns=z, reward_time=z, rewarded=z, removed=jnp.zeros((), jnp.float32),
                   steps=jnp.zeros((), jnp.float32))

    def add(self, reward: jax.Array, removed: jax.Array) -> Tally:
        """One step: reward [N], removed [N] bool (the agents off the map during it)."""
        t = self.steps + 1
        got = (reward > 0).astype(jnp.float32)
        return Tally(returns=self.returns + reward, reward_time=self.reward_time + got * t,
                     rewarded=self.rewarded + got, removed=self.removed + jnp.sum(removed),
                     steps=t)


def gini(returns: jax.Array) -> jax.Array:
    """[N] -> []: sum_i sum_j |R_i - R_j| / (2 N sum_i |R_i|), 0 when every R_i is 0."""
    n = returns.shape[-1]
    spread = jnp.sum(jnp.abs(returns[..., :, None] - returns[..., None, :]), axis=(-2, -1))
    total = jnp.sum(jnp.abs(returns), axis=-1)
    return jnp.where(total > 0, spread / (2 * n * jnp.where(total > 0, total, 1.0)), 0.0)


def social_metrics(tally: Tally) -> dict[str, jax.Array]:
    """The four metrics of the episode tallied so far (see the module's doc)."""
    n = tally.returns.shape[-1]
    t = jnp.maximum(tally.steps, 1.0)
    mean_time = tally.reward_time / jnp.maximum(tally.rewarded, 1.0)
    any_reward = tally.rewarded > 0
    count = jnp.sum(any_reward)
    sustain = jnp.where(count > 0, jnp.sum(jnp.where(any_reward, mean_time, 0.0)) / jnp.maximum(count, 1), 0.0)
    return {"efficiency": jnp.sum(tally.returns) / t, "equality": 1.0 - gini(tally.returns),
            "sustainability": sustain, "peace": (n * tally.steps - tally.removed) / t}


def report(tally: Tally, done: jax.Array) -> dict[str, jax.Array]:
    """`info` entries `social/<metric>`: the metrics when `done`, zeros otherwise."""
    return {f"social/{k}": jnp.where(done, v, 0.0).astype(jnp.float32) for k, v in social_metrics(tally).items()}
