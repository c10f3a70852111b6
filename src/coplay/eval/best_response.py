"""Approximate exploitability: how much a trained best response wins against a policy.

For games too large for an exact best response (`coplay.envs.trees` computes
one for Kuhn and Leduc), the field's stand-in is to train a fresh learner
against the fixed policy and measure what it earns (Lanctot et al., 2017;
Timbers et al., 2022). In a two-player zero-sum game whose seats are drawn at
random, that value (averaged over seats) is a lower bound of the policy's
exploitability: the trained response is at best a best response.

    value = best_response_value(env, target_params, selfplay_ppo.Config(), updates=300,
                                key=jax.random.PRNGKey(0))

The target is a self-play PPO actor (`selfplay_ppo.SelfPlayPPO.policy_params`), or
several with weights (a population's mixture, as PSRO reports). It plays its
stochastic policy; the response is trained by self-play PPO against the fixed
population and evaluated greedily.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos import selfplay_ppo
from coplay.algos.common import opponent_pool
from coplay.algos.common.matches import make_match, outcomes
from coplay.core.compile import jit
from coplay.core.env import Env
from coplay.eval.stats import Estimate


@dataclasses.dataclass(frozen=True)
class BestResponse:
    value: Estimate               # the response's mean return against the target, both seats
    per_seat: tuple[float, ...]   # its mean return in each seat
    params: Any                   # the response's actor parameters
    train_win: float              # its win rate in the last training update


def best_response_value(env: Env, target: Any, config: selfplay_ppo.Config, updates: int, key: jax.Array,
                        weights: jax.Array | None = None, episodes: int = 2000) -> BestResponse:
    """Train a response to `target` (actor params, or params stacked [K, ...] with
    `weights` [K]) for `updates` PPO updates, then play `episodes` games per seat."""
    if weights is None:
        stacked, weights = jax.tree.map(lambda x: jnp.asarray(x)[None], target), jnp.ones(1)
    else:
        stacked = target
    pool = opponent_pool.from_population(stacked, weights)
    k_init, k_eval = jax.random.split(key)
    response, metrics = selfplay_ppo.response_trainer(config, env, updates, pool)(pool, k_init)

    n = env.spec.num_agents
    greedy = selfplay_ppo.SelfPlayPPO(dataclasses.replace(config, greedy_eval=True), env, 1).policy()
    mixed = selfplay_ppo.SelfPlayPPO(dataclasses.replace(config, greedy_eval=False), env, 1).policy()
    returns, per_seat = [], []
    probs = np.asarray(weights, np.float64) / float(np.sum(weights))
    for seat, k in enumerate(jax.random.split(k_eval, n)):
        # The target's mixture: each game meets member i with probability weights[i].
        counts = np.random.default_rng(seat).multinomial(episodes, probs)
        member_returns = []
        for member, count in enumerate(counts):
            if count == 0:
                continue
            params = jax.tree.map(lambda x, m=member: x[m], stacked)
            policies = [greedy if i == seat else mixed for i in range(n)]
            play = jit(make_match(env, policies, int(count)), once=True)   # one call per seat and member
            out = play([response if i == seat else params for i in range(n)], jax.random.fold_in(k, member))
            member_returns.append(np.asarray(outcomes(out["return"], seat)["return"]))
        seat_returns = np.concatenate(member_returns)
        per_seat.append(float(seat_returns.mean()))
        returns.append(seat_returns)
    flat = np.concatenate(returns)
    half = 1.96 * flat.std(ddof=1) / np.sqrt(flat.size)
    value = Estimate(float(flat.mean()), float(flat.mean() - half), float(flat.mean() + half), int(flat.size))
    return BestResponse(value, tuple(per_seat), response, float(np.nanmean(np.asarray(metrics["win"])[-10:])))
