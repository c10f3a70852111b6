"""Conservative penalties for learning Q-values from a fixed dataset.

Offline, a Q-network is asked about actions the data never shows, and the
maximum in its target picks out exactly those it overrates. CQL (Kumar et al.,
2020) pushes the values of all actions down and the data's actions up; for
discrete actions its penalty at a state is

    log sum_a exp Q(s, a) - Q(s, a_data)                                   (`cql_penalty`)

With several agents the question is over which actions to take the sum. Each
agent alone (independent Q-learning: each agent's own Q), the team's joint
actions (value factorisation, MACQL: `joint_penalty`, a sum over |A|^N joint
actions, exact when few, else estimated from uniform samples), or, as CFCQL
(Shao et al., NeurIPS 2023) argues, counterfactually: one agent's action
varied at a time while the others' stay at the data, and the per-agent
penalties mixed with weights lambda_i that sum to one (`counterfactual_penalty`):

    sum_i lambda_i(s) log sum_{a_i} exp Q_tot(s, a_i, a_data_{-i}) - Q_tot(s, a_data)

The joint sum grows with the number of agents as |A|^N; the counterfactual one
as N |A|, and so does the over-estimation it must correct, which is the
paper's case for it. The weights are uniform, or (`counterfactual_weights`)
a softmax over agents of how far each agent's counterfactual softmax policy
strays from its behaviour policy (a KL divergence), so the agent that strays
most is held back most.

Only legal actions enter a sum. An inactive agent's action is held at the data.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.q_learning import Mix, chosen
from coplay.nets.distributions import sample


def legal_logsumexp(x: jax.Array, mask: jax.Array, axis: int = -1) -> jax.Array:
    """log sum exp of x over the entries where mask is true (along `axis`)."""
    return jax.nn.logsumexp(jnp.where(mask, x, -jnp.inf), axis=axis)


def cql_penalty(q: jax.Array, action: jax.Array, mask: jax.Array) -> jax.Array:
    """CQL's penalty of each row: q, mask [..., A], action [...] -> [...]."""
    return legal_logsumexp(q, mask) - chosen(q, action)


def _held(mask: jax.Array, action: jax.Array, active: jax.Array) -> jax.Array:
    """The actions each agent may take in a counterfactual: its legal ones when
    active, the data's one when not. mask [..., N, A], action, active [..., N]."""
    data = jax.nn.one_hot(action, mask.shape[-1], dtype=bool)
    return jnp.where(active[..., None], mask, data)


def counterfactual_values(q: jax.Array, action: jax.Array, active: jax.Array, mix: Mix,
                          state: jax.Array | None) -> jax.Array:
    """`[T, B, N, A]`: Q_tot(s, a_i = a, a_data_{-i}) for every agent i and action a.

    q: [T, B, N, A] the agents' Q-values; action, active: [T, B, N] the data's
    actions and who acted; mix, state: the team value as in `q_learning.team_td_loss`.
    Inactive agents enter the mix as zeros."""
    t, b, n, a = q.shape
    live = active.astype(q.dtype)
    taken = chosen(q, action) * live                                              # [T, B, N]
    varied = q * live[..., None]                                                  # [T, B, N, A]
    eye = jnp.eye(n, dtype=bool)                                                  # [i, k]
    # x[t, b, i, a, k]: agent k's value when agent i takes a and everyone else the data's action
    x = jnp.where(eye[:, None, :], varied[..., :, :, None], taken[..., None, None, :])
    return mix(x.reshape(t, b, n * a, n), state).reshape(t, b, n, a)


def counterfactual_penalty(q_cf: jax.Array, mask: jax.Array, q_tot: jax.Array, weights: jax.Array) -> jax.Array:
    """CFCQL's penalty `[T, B]`: sum_i weights_i log sum_{a legal} exp q_cf[i, a] - q_tot.

    q_cf, mask: [T, B, N, A] (`counterfactual_values`, the legal actions); q_tot:
    [T, B] the team value of the data's joint action; weights: [T, B, N], summing
    to one over the agents."""
    return jnp.sum(weights * legal_logsumexp(q_cf, mask), axis=-1) - q_tot


def counterfactual_weights(q_cf: jax.Array, mask: jax.Array, active: jax.Array, behaviour_logits: jax.Array | None,
                           temperature: float) -> jax.Array:
    """lambda `[T, B, N]`: uniform over the active agents (temperature 0), else a
    softmax over them of temperature x KL(mu_i || beta_i), where mu_i is the softmax
    of agent i's counterfactual team values and beta_i its behaviour policy (logits
    [T, B, N, A] of a model of the data). No gradient flows through the weights."""
    if temperature == 0.0 or behaviour_logits is None:
        live = active.astype(q_cf.dtype)
        return live / jnp.maximum(jnp.sum(live, axis=-1, keepdims=True), 1.0)
    log_mu = jax.nn.log_softmax(jnp.where(mask, q_cf, -jnp.inf), axis=-1)
    log_beta = jax.nn.log_softmax(jnp.where(mask, behaviour_logits, -jnp.inf), axis=-1)
    kl = jnp.sum(jnp.where(mask, jnp.exp(log_mu) * (log_mu - log_beta), 0.0), axis=-1)         # [T, B, N]
    weights = jax.nn.softmax(jnp.where(active, temperature * kl, -jnp.inf), axis=-1)
    return jax.lax.stop_gradient(weights)


def joint_actions(num_agents: int, num_actions: int) -> np.ndarray:
    """`[A^N, N]`: every joint action, the first agent's action varying slowest."""
    return np.stack(np.meshgrid(*[np.arange(num_actions)] * num_agents, indexing="ij"), -1).reshape(-1, num_agents)


def joint_penalty(key: jax.Array, q: jax.Array, action: jax.Array, mask: jax.Array, active: jax.Array, mix: Mix,
                  state: jax.Array | None, q_tot: jax.Array, samples: int) -> jax.Array:
    """MACQL's penalty `[T, B]`: log sum over the team's legal joint actions of
    exp Q_tot(s, a) - q_tot. Exact when there are at most `samples` joint actions;
    otherwise estimated from `samples` joint actions drawn uniformly from the legal
    ones (each agent's uniformly), as log(count x mean exp Q_tot), whose exponential
    is unbiased for the exact sum's. Arguments as in `counterfactual_values`."""
    t, b, n, a = q.shape
    allowed = _held(mask, action, active)                                         # [T, B, N, A]
    live = active.astype(q.dtype)
    if a ** n <= samples:
        joints = jnp.asarray(joint_actions(n, a))                                 # [J, N]
        legal = jnp.all(allowed[:, :, jnp.arange(n), joints], axis=-1)            # [T, B, J]
        values = q[:, :, jnp.arange(n), joints] * live[:, :, None, :]             # [T, B, J, N]
        return legal_logsumexp(mix(values, state), legal) - q_tot
    # one uniform number per draw (inverse CDF), not the Gumbel trick's one per action: the draws were most
    # of an update's time
    uniform = jnp.broadcast_to(jnp.where(allowed, 0.0, -jnp.inf), (samples, t, b, n, a))
    drawn = sample(key, uniform)                                                  # [S, T, B, N]
    values = chosen(jnp.broadcast_to(q, (samples, t, b, n, a)), drawn) * live     # [S, T, B, N]
    team = mix(jnp.moveaxis(values, 0, 2), state)                   # [T, B, S]
    log_count = jnp.sum(jnp.log(jnp.sum(allowed, axis=-1)), axis=-1)             # [T, B]
    return jax.nn.logsumexp(team, axis=-1) - math.log(samples) + log_count - q_tot
