"""Mixing networks: combine the agents' chosen Q-values into a team value."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class MonotonicMixer(nn.Module):
    """QMIX's mixer (Rashid et al., 2018): Q_tot = f(q_1..q_N; s) with
    dQ_tot/dq_i >= 0, so each agent's greedy action is the team's greedy action.
    Hypernetworks read the global state and emit the mixing weights, made
    non-negative by an absolute value; the biases and the final state value are
    unconstrained. The layers that emit the weights and the first bias start small
    (`init_scale`): a first bias read from a state of large features would make the
    mixer's hidden layer, and so Q_tot, start far from the returns, and its TD
    errors would push every agent's Q-values at once. `init_mode="weights_and_value"`
    starts the state value's last layer small too, so Q_tot starts near 0;
    `init_mode="orthogonal"` starts every layer orthogonal with gain `init_scale` and
    zero bias (JaxMARL's mixer).

    q: [B, N] chosen Q-values (zero for inactive agents), or [B, J, N] for J joint
    actions of each state (the hypernetworks then run once per state); state:
    [B, S] -> [B] (or [B, J])."""

    embed_dim: int = 32
    hypernet_hidden: int = 64
    init_scale: float = 0.01  # the weights' and the first bias's layers start small
    init_mode: str = "weights"    # or "weights_and_value", or "orthogonal" (every layer)

    @nn.compact
    def __call__(self, q: jax.Array, state: jax.Array) -> jax.Array:
        b, n = q.shape[0], q.shape[-1]
        e = self.embed_dim

        if self.init_mode == "orthogonal":
            small = inner = nn.initializers.orthogonal(self.init_scale)
        else:
            small = nn.initializers.variance_scaling(self.init_scale, "fan_in", "truncated_normal")
            inner = nn.initializers.lecun_normal()      # flax's default

        def hyper(out: int, name: str) -> nn.Module:
            return nn.Sequential([nn.Dense(self.hypernet_hidden, kernel_init=inner), nn.relu,
                                  nn.Dense(out, kernel_init=small)], name=name)

        w1 = jnp.abs(hyper(n * e, "hyper_w1")(state)).reshape(b, n, e)
        b1 = nn.Dense(e, kernel_init=small, name="hyper_b1")(state)
        joint = q.reshape(b, -1, n)                                                  # [B, J, N]
        hidden = nn.elu(jnp.einsum("bjn,bne->bje", joint, w1) + b1[:, None])
        w2 = jnp.abs(hyper(e, "hyper_w2")(state))
        last = inner if self.init_mode == "weights" else small
        value = nn.Sequential([nn.Dense(e, kernel_init=inner), nn.relu, nn.Dense(1, kernel_init=last)],
                              name="hyper_value")(state)[:, 0]
        return (jnp.sum(hidden * w2[:, None], axis=-1) + value[:, None]).reshape(q.shape[:-1])
