"""Value-learning machinery shared by the Q family (IQL, VDN, QMIX): the
family's config, acting epsilon-greedily over legal actions, bootstrapped
values (double Q), n-step targets, the team TD loss of value factorisation,
target-network updates and the exploration schedule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax

from coplay.algos.base import RolloutConfig, TrainerConfig
from coplay.core.config import param
from coplay.nets import ACTIVATIONS, distributions
from coplay.nets.agent import torso_param

RECURRENT_SEQ_LEN = 20  # trained steps per window when recurrent and seq_len = 0


@dataclass(frozen=True)
class NetConfig(TrainerConfig):
    """What training the agents' network on sampled windows needs: the network, the
    optimiser and the windows (behaviour cloning stops here)."""

    lr: float = param(1e-3, "learning rate", min=0.0, min_exclusive=True)
    optimizer: str = param("adam", "adam, or radam (rectified Adam, Liu et al., 2020: no adaptive step until its "
                                   "variance estimate is reliable; JaxMARL's Q-learning baselines use it)",
                           choices=("adam", "radam"))
    anneal_lr: bool = param(True, "decay the learning rate linearly to 0 over the run")
    batch_size: int = param(64, "windows sampled per gradient step", min=1)
    grad_steps: int = param(2, "gradient steps per update", min=1)
    eval_epsilon: float = param(0.0, "exploration rate when evaluating", min=0.0, max=1.0)
    max_grad_norm: float = param(10.0, "global gradient-norm clip", min=0.0, min_exclusive=True)
    hidden_size: int = param(64, "units per hidden layer", min=1)
    num_layers: int = param(2, "hidden layers (feed-forward); layers around the GRU (recurrent)", min=1)
    activation: str = param("relu", "hidden activation", choices=tuple(ACTIVATIONS))
    torso: str = torso_param()
    recurrent: bool = param(False, "GRU agents over the observation history")
    seq_len: int = param(0, f"steps trained per sampled window; 0 = 1 (feed-forward) or {RECURRENT_SEQ_LEN} "
                            "(recurrent)", min=0)
    burn_in: int = param(0, "steps replayed before a recurrent window to warm its state (no loss on them)", min=0)
    share_params: bool = param(True, "one network for all agents (else one per agent)")
    agent_id: bool = param(True, "append a one-hot agent id to observations when sharing parameters")


@dataclass(frozen=True)
class QLearnConfig(NetConfig):
    """What learning Q-values needs, from an agent's own experience or from a dataset:
    the above, the TD targets and the target network."""

    gamma: float = param(0.95, "discount", min=0.0, max=1.0)
    n_step: int = param(1, "steps of reward before bootstrapping (n-step returns)", min=1)
    double_q: bool = param(True, "bootstrap with the target network's value of the online network's best action")
    target_interval: int = param(100, "gradient steps between target-network updates", min=1)
    tau: float = param(1.0, "target update size: 1 = hard copy, < 1 = Polyak averaging", min=0.0, max=1.0,
                       min_exclusive=True)
    loss: str = param("mse", "TD loss", choices=("mse", "huber"))


@dataclass(frozen=True)
class QConfig(QLearnConfig, RolloutConfig):
    """The fields every Q-learning trainer that acts has (IQL, VDN, QMIX): the above, and
    the environments it explores, its replay and its exploration schedule."""

    num_envs: int = param(16, "parallel environments per seed", min=1)
    rollout_len: int = param(8, "steps per environment between updates", min=1)
    buffer_size: int = param(50_000, "replay capacity in environment steps, per seed", min=1)
    learning_starts: int = param(5_000, "environment steps collected before learning begins", min=0)
    eps_start: float = param(1.0, "exploration rate at the start", min=0.0, max=1.0)
    eps_finish: float = param(0.05, "exploration rate after the decay", min=0.0, max=1.0)
    eps_decay: float = param(0.3, "fraction of the run over which exploration decays linearly", min=0.0, max=1.0)
    reward_scale: float = param(1.0, "factor the rewards are stored in replay with, so the Q-values learn them "
                                "scaled (JaxMARL's REW_SCALE); returns and metrics stay the environment's",
                                min=0.0, min_exclusive=True)


def reward_param() -> Any:
    """The `reward` field of independent learners: their own reward or the team's."""
    return param("own", "what each agent learns from: its own reward, or the team's (the mean of all agents' "
                        "rewards, the common-reward setting of value factorisation)", choices=("own", "team"))


def epsilon_schedule(start: float, finish: float, decay_steps: float) -> optax.Schedule:
    """Linear decay from `start` to `finish` over `decay_steps` environment steps, then constant."""
    return optax.linear_schedule(start, finish, max(int(decay_steps), 1))


def greedy(q: jax.Array, mask: jax.Array) -> jax.Array:
    """q, mask: [..., A] -> the best legal action [...]."""
    return jnp.argmax(distributions.masked_logits(q, mask), axis=-1).astype(jnp.int32)


def epsilon_greedy(key: jax.Array, q: jax.Array, mask: jax.Array, epsilon: float | jax.Array) -> jax.Array:
    """With probability `epsilon` a uniformly random legal action, else the greedy one."""
    k_explore, k_random = jax.random.split(key)
    uniform = distributions.masked_logits(jnp.zeros_like(q), mask)
    random_action = distributions.sample(k_random, uniform)
    explore = jax.random.uniform(k_explore, q.shape[:-1]) < epsilon
    return jnp.where(explore, random_action, greedy(q, mask))


def chosen(q: jax.Array, action: jax.Array) -> jax.Array:
    """q: [..., A], action: [...] -> Q of the action taken [...]."""
    return jnp.take_along_axis(q, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def bootstrap_value(q_online: jax.Array, q_target: jax.Array, mask: jax.Array, double: bool) -> jax.Array:
    """The value of a next state [...] from Q-values [..., A] over its legal actions:
    the target network's value of the online network's best action (double Q,
    van Hasselt et al. 2016), or the target network's own best value."""
    best = greedy(q_online if double else q_target, mask)
    return chosen(q_target, best)


def expected_value(q_online: jax.Array, q_target: jax.Array, mask: jax.Array) -> jax.Array:
    """The value of a next state [...] under the Boltzmann policy softmax(Q) over its
    legal actions: sum_a pi(a) Q_target(a), pi = softmax of the online network's
    Q-values (expected SARSA, van Seijen et al. 2009, for the policy that draws
    from exp Q); pi is held constant in the gradient."""
    pi = jax.nn.softmax(distributions.masked_logits(jax.lax.stop_gradient(q_online), mask), axis=-1)
    return jnp.sum(pi * q_target, axis=-1)          # an illegal action's probability is exactly 0


def n_step_targets(reward: jax.Array, done: jax.Array, next_value: jax.Array, gamma: float,
                   n: int, start: int = 0) -> jax.Array:
    """n-step TD targets for positions start .. start+T-1 of a window.

    reward: [L, B, ...] received after each step; done: [L, B] the episode ended
    with that step; next_value: [T, B, ...] the bootstrap value of the state at
    position t + n, for each target position t. L >= start + T + n - 1.

        G_t = sum_{k<n} gamma^k r_{t+k} (no episode end before t+k)
              + gamma^n V(s_{t+n}) (no episode end in t..t+n-1)
    """
    length = next_value.shape[0]
    extra = reward.ndim - done.ndim
    done = done.reshape(done.shape + (1,) * extra).astype(reward.dtype)
    total = jnp.zeros_like(next_value)
    alive = jnp.ones_like(next_value)
    for k in range(n):
        total = total + (gamma ** k) * alive * reward[start + k: start + k + length]
        alive = alive * (1.0 - done[start + k: start + k + length])
    return total + (gamma ** n) * alive * next_value


def update_target(online: Any, target: Any, step: jax.Array, interval: int, tau: float) -> Any:
    """Every `interval` gradient steps move the target network towards the
    online one by `tau` (tau = 1: a hard copy; tau < 1: Polyak averaging)."""
    due = (step % interval) == 0
    moved = optax.incremental_update(online, target, tau)
    return jax.tree.map(lambda new, old: jnp.where(due, new, old), moved, target)


def masked_mean(x: jax.Array, weight: jax.Array) -> jax.Array:
    """The mean of x over the entries where weight > 0 (weight broadcast to x; 0 when none)."""
    weight = jnp.broadcast_to(weight, x.shape).astype(x.dtype)
    return jnp.sum(x * weight) / jnp.maximum(jnp.sum(weight), 1.0)


def td_loss(prediction: jax.Array, target: jax.Array, weight: jax.Array, kind: str) -> jax.Array:
    """Mean squared (or Huber) TD error over the entries with weight > 0."""
    error = prediction - jax.lax.stop_gradient(target)
    per = 0.5 * jnp.square(error) if kind == "mse" else optax.huber_loss(error)
    return masked_mean(per, weight)


def independent_td_loss(q_taken: jax.Array, next_value: jax.Array, w: dict[str, jax.Array], gamma: float, n: int,
                        kind: str, reward: str = "own") -> tuple[jax.Array, jax.Array]:
    """One TD problem per agent: q_taken, next_value [T, B, N] as in `team_td_loss`,
    each agent learning from its own reward or the team's (`reward="team"`: the mean
    of the agents' rewards). Returns (loss, targets [T, B, N])."""
    r = w["reward"]
    if reward == "team":
        r = jnp.broadcast_to(jnp.mean(r, axis=-1, keepdims=True), r.shape)
    target = n_step_targets(r, w["done"], next_value, gamma, n)
    return td_loss(q_taken, target, w["active"][:q_taken.shape[0]], kind), target


# mix(q [T, B, N], state [T, B, ...] or None) -> the team value [T, B]; a mix may also take
# q [T, B, J, N], J joint actions of each state, -> [T, B, J] (`algos.common.mixing`)
Mix = Callable[[jax.Array, jax.Array | None], jax.Array]


def team_td_loss(q_taken: jax.Array, next_value: jax.Array, w: dict[str, jax.Array], mix: Mix, target_mix: Mix,
                 gamma: float, n: int, kind: str) -> tuple[jax.Array, jax.Array]:
    """The TD loss of value factorisation: one TD problem on the team value.

    q_taken, next_value: [T, B, N] each agent's Q of the action taken and its
    bootstrap value n steps later; w: the window ([L, B, ...]: `reward`, `done`,
    `active`, and `global_state` where the mix reads it). `mix(q [T, B, N], state
    [T, B, ...] or None) -> [T, B]` makes the team value (the target network's
    `target_mix` for the bootstrap). Inactive agents enter the mix as zeros; the
    team reward is the mean of the agents' rewards (the per-agent scale coplay
    reports). Returns (loss, targets [T, B])."""
    t = q_taken.shape[0]
    active = w["active"].astype(q_taken.dtype)
    state = w.get("global_state")
    prediction = mix(q_taken * active[:t], None if state is None else state[:t])
    bootstrap = target_mix(next_value * active[n:n + t], None if state is None else state[n:n + t])
    target = n_step_targets(jnp.mean(w["reward"], axis=-1), w["done"], bootstrap, gamma, n)
    return td_loss(prediction, target, jnp.any(w["active"][:t], axis=-1), kind), target
