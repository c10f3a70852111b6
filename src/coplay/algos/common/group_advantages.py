"""Group-relative advantage estimators for agents that interact.

Every function here is pure (jit and vmap compatible) and reads one batch of
episodes, `Episodes`, laid out as E episodes x T steps x N agents:

- `reward [E, T, N]` (or `[E, T, N, K]` for K rewards): what agent n received
  after step t. A NaN reward marks an episode that could not be scored: it
  enters no statistic and gets no advantage (TRL's convention).
- `acted [E, T, N]`: agent n acted (spoke) at step t. Only those turns get an
  advantage; steps after an episode's end, and whole padding episodes, are
  False and never enter a group's statistics.
- `group [E]`: episodes with the same id started from the same state (same
  deal, same problem) with different sampling keys: a group of G episodes.
- `role [E, N]`: the role agent n played in episode e (a seat of a game, a
  proposer or solver); by default the agent's index.
- `state [E, T, N]`, optional: a key of agent n's view at step t, equal
  where the views are equal (GiGPO's anchor states).

Each estimator returns advantages `[E, T, N]`: per acted turn, zero elsewhere.
The outcome-level ones give every acted turn of an agent the advantage of its
episode return `R = sum_t reward`; the turn-level ones (MARS, GiGPO's step part,
AT-GRPO) use the return from the turn on, `G_t = sum_{t' >= t} gamma^(t'-t) r_t'`.

Statistics within a group are taken over the agents that acted in it, with
Bessel's correction for the standard deviation (as verl and TRL do). Where a
group's values are all equal (the same reward for every member, one member
only), its advantages are exactly zero, never NaN: normalising such a group is
where other implementations divide zero by zero.

`ESTIMATORS` names them all, with what each needs from a batch (state keys,
a baseline carried between batches); `estimator(name)` looks one up with an
error that lists the choices. `to_verl` writes a batch (and its advantages) as
the flat rows verl-style trainers consume, to check them against another
implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.errors import ConfigError, unknown_name
from coplay.envs.text.vocab import view_keys  # noqa: F401  (GiGPO's state keys of token views, re-exported)

EPS = 1e-6


class Episodes(NamedTuple):
    """A batch of episodes for the estimators (see the module's doc for the shapes)."""

    reward: jax.Array
    acted: jax.Array
    group: jax.Array
    role: jax.Array | None = None
    state: jax.Array | None = None

    @property
    def roles(self) -> jax.Array:
        """`[E, N]`: `role`, or each agent's index where no roles were given."""
        if self.role is not None:
            return self.role
        e, _, n = self.acted.shape
        return jnp.broadcast_to(jnp.arange(n), (e, n))


# --- grouping and statistics ----------------------------------------------------------


def segments(*keys: jax.Array) -> jax.Array:
    """Dense ids `[M]` in `[0, M)`, equal exactly where every key column is equal
    (keys: `[M]` integers each). Sorting based, so keys may be any integers."""
    stacked = jnp.stack([jnp.asarray(k).astype(jnp.int32) for k in keys])
    order = jnp.lexsort(stacked)
    ordered = stacked[:, order]
    starts = jnp.concatenate([jnp.ones(1, bool), jnp.any(ordered[:, 1:] != ordered[:, :-1], axis=0)])
    return jnp.zeros(order.shape, jnp.int32).at[order].set(jnp.cumsum(starts) - 1)


class Stats(NamedTuple):
    """Per-sample statistics of the sample's segment, over the samples that count."""

    size: jax.Array    # members that count
    mean: jax.Array
    std: jax.Array     # Bessel-corrected; 0 for fewer than two members
    equal: jax.Array   # every member has the same value (true for 0 or 1 member)


def segment_stats(x: jax.Array, counts: jax.Array, ids: jax.Array, weight: jax.Array | None = None) -> Stats:
    """x, counts (bool), ids: `[M]`. `weight`, where given, weighs each counted
    sample in the mean and deviation (MARS's statistics over distinct values)."""
    m = x.shape[0]
    w = counts.astype(x.dtype) if weight is None else jnp.where(counts, weight, 0.0)
    x0 = jnp.where(counts, x, 0.0)   # a NaN outside the count must not reach a sum
    n = jax.ops.segment_sum(counts.astype(x.dtype), ids, m)
    wsum = jax.ops.segment_sum(w, ids, m)
    mean = jax.ops.segment_sum(w * x0, ids, m) / jnp.maximum(wsum, 1e-30)
    dev = jnp.where(counts, x0 - mean[ids], 0.0)
    bessel = jnp.where(wsum > 1, wsum / jnp.maximum(wsum - 1, 1e-30), 0.0)
    var = jax.ops.segment_sum(w * dev**2, ids, m) / jnp.maximum(wsum, 1e-30) * bessel
    high = jax.ops.segment_max(jnp.where(counts, x, -jnp.inf), ids, m)
    low = jax.ops.segment_min(jnp.where(counts, x, jnp.inf), ids, m)
    return Stats(n[ids], mean[ids], jnp.sqrt(var)[ids], (high <= low)[ids] | (n[ids] <= 1))


def normalise(x: jax.Array, counts: jax.Array, ids: jax.Array, *, scale: bool = True, eps: float = EPS,
              weight: jax.Array | None = None) -> jax.Array:
    """`(x - mean) / (std + eps)` within each segment (`scale=False`: `x - mean`);
    exactly 0 where a segment's values are all equal and outside `counts`."""
    s = segment_stats(x, counts, ids, weight)
    centred = x - s.mean
    out = centred / (s.std + eps) if scale else centred
    return jnp.where(counts & ~s.equal, out, 0.0)


# --- views of a batch -------------------------------------------------------------------


def scalar_reward(ep: Episodes, weights: Sequence[float] | None = None) -> jax.Array:
    """`[E, T, N]`: the reward, or the weighted sum of K rewards (TRL's
    `sum_then_normalize`; equal weights by default)."""
    r = ep.reward
    if r.ndim == 3:
        return r
    w = jnp.ones(r.shape[-1]) if weights is None else jnp.asarray(weights, r.dtype)
    return r @ w


def episode_returns(ep: Episodes, weights: Sequence[float] | None = None) -> tuple[jax.Array, jax.Array]:
    """`(R [E, N], scored [E, N])`: each agent's return, and whether it counts
    (the agent acted in the episode and its rewards are numbers)."""
    r = scalar_reward(ep, weights)
    total = r.sum(axis=1)
    return total, ep.acted.any(axis=1) & jnp.isfinite(total)


def turn_returns(reward: jax.Array, gamma: float) -> jax.Array:
    """`G_t = r_t + gamma G_{t+1}` along the step axis of `[E, T, ...]` rewards."""
    def back(g, r):
        g = r + gamma * g
        return g, g

    _, out = jax.lax.scan(back, jnp.zeros_like(reward[:, 0]), jnp.swapaxes(reward, 0, 1), reverse=True)
    return jnp.swapaxes(out, 0, 1)


def own_turns(acted: jax.Array) -> jax.Array:
    """`[E, T, N]`: how many turns agent n had taken before step t (its turn index)."""
    a = acted.astype(jnp.int32)
    return jnp.cumsum(a, axis=1) - a


def to_turns(per_agent: jax.Array, ep: Episodes) -> jax.Array:
    """Spread `[E, N]` episode-level advantages over the agent's acted turns: `[E, T, N]`."""
    return jnp.where(ep.acted, per_agent[:, None, :], 0.0)


def episode_advantages(ep: Episodes, keys: Sequence[jax.Array], weights: Sequence[float] | None = None,
                       **options: Any) -> jax.Array:
    """`[E, N]`: each agent's return normalised (`normalise`'s options) within the
    segments of `keys` (each broadcastable to `[E, N]`)."""
    total, scored = episode_returns(ep, weights)
    ids = segments(*[jnp.broadcast_to(k, total.shape).reshape(-1) for k in keys])
    return normalise(total.reshape(-1), scored.reshape(-1), ids, **options).reshape(total.shape)


def turn_advantages(ep: Episodes, keys: Sequence[jax.Array], gamma: float,
                    weights: Sequence[float] | None = None, **options: Any) -> jax.Array:
    """`[E, T, N]`: each acted turn's return to go `G_t` normalised (`normalise`'s
    options) within the segments of `keys` (each broadcastable to `[E, T, N]`)."""
    g = turn_returns(scalar_reward(ep, weights), gamma)
    counts = (ep.acted & jnp.isfinite(g)).reshape(-1)
    ids = segments(*[jnp.broadcast_to(k, g.shape).reshape(-1) for k in keys])
    return normalise(g.reshape(-1), counts, ids, **options).reshape(g.shape)


def whiten(x: jax.Array, counts: jax.Array, eps: float = EPS) -> jax.Array:
    """`(x - mean) / (std + eps)` over every counted entry of the batch."""
    flat = counts.reshape(-1)
    return normalise(x.reshape(-1), flat, jnp.zeros(flat.shape, jnp.int32), eps=eps).reshape(x.shape)


def _group(ep: Episodes) -> list[jax.Array]:
    return [ep.group[:, None]]


def _group_and_role(ep: Episodes) -> list[jax.Array]:
    return [ep.group[:, None], ep.roles]


# --- the estimators ---------------------------------------------------------------------


def grpo(ep: Episodes, *, eps: float = EPS, weights: Sequence[float] | None = None) -> jax.Array:
    """GRPO (Shao et al., 2024, DeepSeekMath): `A_i = (R_i - mean_g R) / (std_g R + eps)`
    over every agent of every episode in group g (all seats pooled: "global" GRPO)."""
    return to_turns(episode_advantages(ep, _group(ep), weights, eps=eps), ep)


def dr_grpo(ep: Episodes, *, weights: Sequence[float] | None = None) -> jax.Array:
    """Dr. GRPO (Liu et al., 2025, "Understanding R1-Zero-like training"):
    `A_i = R_i - mean_g R`, no division by the group's std (its length bias is
    removed in the loss: a constant token normaliser)."""
    return to_turns(episode_advantages(ep, _group(ep), weights, scale=False), ep)


def rloo(ep: Episodes, *, weights: Sequence[float] | None = None) -> jax.Array:
    """RLOO (Kool et al., 2019; Ahmadian et al., 2024): the baseline of sample i is
    the mean of the other members, `A_i = R_i - 1/(G-1) sum_{j != i} R_j
    = G/(G-1) (R_i - mean_g R)`; a group of one gets 0."""
    total, scored = episode_returns(ep, weights)
    ids = segments(jnp.broadcast_to(ep.group[:, None], total.shape).reshape(-1))
    g = segment_stats(total.reshape(-1), scored.reshape(-1), ids).size.reshape(total.shape)
    centred = episode_advantages(ep, _group(ep), weights, scale=False)
    return to_turns(centred * g / jnp.maximum(g - 1, 1.0), ep)


def reinforce_pp(ep: Episodes, *, eps: float = EPS, weights: Sequence[float] | None = None) -> jax.Array:
    """REINFORCE++ with a group baseline (Hu et al., 2025): `x_i = R_i - mean_g R`,
    then whitened over the whole batch, `A_i = (x_i - mean_B x) / (std_B x + eps)`."""
    _, scored = episode_returns(ep, weights)
    return to_turns(whiten(episode_advantages(ep, _group(ep), weights, scale=False), scored, eps), ep)


def dr_mas(ep: Episodes, *, eps: float = EPS, weights: Sequence[float] | None = None) -> jax.Array:
    """Dr. MAS (Feng et al., 2026): GRPO's z-score with statistics per agent role
    within the group, `A_{i,k} = (R_{i,k} - mean_{g,k}) / (std_{g,k} + eps)`, so that
    a role whose rewards are on another scale does not inflate the others' gradients."""
    return to_turns(episode_advantages(ep, _group_and_role(ep), weights, eps=eps), ep)


def gdpo(ep: Episodes, *, eps: float = EPS, weights: Sequence[float] | None = None) -> jax.Array:
    """GDPO (decoupled normalisation of several rewards; TRL's `normalize_then_sum`):
    each reward k is z-scored within the group, the results summed with weights
    `w_k`, and the sum whitened over the batch:
    `A_i = norm_B( sum_k w_k (R_{i,k} - mean_{g,k}) / (std_{g,k} + eps) )`.
    An agent's episode with any of its K returns unscorable (NaN) enters none of the K
    rewards' statistics and gets no advantage."""
    r = ep.reward if ep.reward.ndim == 4 else ep.reward[..., None]
    unscorable = ~jnp.all(jnp.isfinite(r.sum(axis=1)), axis=-1)          # [E, N]
    r = jnp.where(unscorable[:, None, :, None], jnp.nan, r)
    k = r.shape[-1]
    w = jnp.ones(k) if weights is None else jnp.asarray(weights, r.dtype)
    summed = sum(w[j] * episode_advantages(ep._replace(reward=r[..., j]), _group(ep), eps=eps) for j in range(k))
    _, scored = episode_returns(ep._replace(reward=r.sum(-1)))
    return to_turns(whiten(jnp.asarray(summed), scored, eps), ep)


def rae(ep: Episodes, baseline: jax.Array, *, alpha: float = 0.95, game: jax.Array | None = None,
        weights: Sequence[float] | None = None) -> tuple[jax.Array, jax.Array]:
    """SPIRAL's role-conditioned advantage estimation (Liu et al., 2026): an
    exponential moving average of the return per (game, role),
    `A = R_p - b_{G,p}` read before `b_{G,p} <- alpha b_{G,p} + (1 - alpha) R_p`,
    updated one episode after another in batch order (episode-major, then
    agent), as SPIRAL updates it per trajectory; the baseline starts at 0.
    Reading the baseline before the update is what SPIRAL's released code does; the
    paper's equations update it first and subtract the updated value, which gives
    `R_p - (alpha b + (1 - alpha) R_p) = alpha (R_p - b)`: the same advantage scaled by
    alpha (a learning rate alpha times smaller), not what the code trains with.

    baseline: `[games, roles]`; game: `[E]` ids (all 0 by default).
    Returns (advantages [E, T, N], the updated baseline)."""
    total, scored = episode_returns(ep, weights)
    e, n = total.shape
    games = jnp.zeros(e, jnp.int32) if game is None else game
    keys = (jnp.broadcast_to(games[:, None], (e, n)).reshape(-1), ep.roles.reshape(-1))

    def one(b, x):
        r, counts, g, p = x
        adv = jnp.where(counts, r - b[g, p], 0.0)
        b = jnp.where(counts, b.at[g, p].set(alpha * b[g, p] + (1 - alpha) * r), b)
        return b, adv

    baseline, adv = jax.lax.scan(one, baseline, (total.reshape(-1), scored.reshape(-1), *keys))
    return to_turns(adv.reshape(e, n), ep), baseline


def mars(ep: Episodes, *, gamma: float = 1.0, eps: float = EPS, distinct: bool = False,
         weights: Sequence[float] | None = None) -> jax.Array:
    """MARS's turn-level advantage (Yuan et al., 2026, MARS/MARSHAL): the return
    from each turn on, `G_t = r_t + gamma G_{t+1}` per agent, z-scored per role
    over the batch. `distinct=True` takes the statistics over the set of distinct
    values of G, as MARS's code does (each value weighted once, not by frequency)."""
    g = turn_returns(scalar_reward(ep, weights), gamma)
    counts = ep.acted & jnp.isfinite(g)
    role = jnp.broadcast_to(ep.roles[:, None, :], g.shape).reshape(-1)
    ids = segments(role)
    flat, c = g.reshape(-1), counts.reshape(-1)
    weight = None
    if distinct:   # weight 1 / (how often the value occurs for this role): each value counts once
        same = segments(role, jax.lax.bitcast_convert_type(jnp.where(c, flat, 0.0).astype(jnp.float32), jnp.int32))
        weight = 1.0 / jnp.maximum(jax.ops.segment_sum(c.astype(flat.dtype), same, flat.shape[0])[same], 1.0)
    return normalise(flat, c, ids, eps=eps, weight=weight).reshape(g.shape)


def at_grpo(ep: Episodes, *, gamma: float = 1.0, eps: float = EPS,
            weights: Sequence[float] | None = None) -> jax.Array:
    """AT-GRPO (Zhao et al., 2025, PettingLLMs): GRPO within (group, agent role,
    turn index) groups: the return from the k-th turn of role p is compared with
    the k-th turns of the same role in the group's other episodes."""
    keys = [ep.group[:, None, None], ep.roles[:, None, :], own_turns(ep.acted)]
    return turn_advantages(ep, keys, gamma, weights, eps=eps)


def turn_rloo(ep: Episodes, *, gamma: float = 1.0, weights: Sequence[float] | None = None) -> jax.Array:
    """A turn-level leave-one-out advantage, unbiased where the policy decides when to
    stop: the return from the k-th turn of role p on, `G_{i,k}`, minus the mean of the
    same role's k-th-turn returns in the group's *other* episodes,
    `A_{i,k} = G_{i,k} - mean_{j != i, j had a k-th turn} G_{j,k}` (no division by a
    standard deviation); a turn that no other episode of the group reached keeps
    `G_{i,k}` (baseline 0), and a segment whose returns are all equal gets exactly 0.

    Why it is unbiased: episode i's baseline is built from the other episodes only, which
    are independent of i's actions, so `E[b grad log pi(a_{i,k})] = E[b] E[grad log
    pi(a_{i,k})] = 0` however many turns i or the others went on to take. The
    per-turn-index normalisation of MT-GRPO (each turn's *reward* centred within its
    turn index, then summed from the turn on) subtracts one group mean for every later
    turn the episode itself took: its baseline depends on the episode's own decision to
    go on, and the gradient is biased by the sum of those means (verl RFC #7244); dividing
    by a per-turn standard deviation (AT-GRPO) reweighs turns and is biased too, where
    the spreads differ. `tests/test_group_advantages.py` measures all three against the
    exact policy gradient of a game whose player chooses when to stop."""
    g = turn_returns(scalar_reward(ep, weights), gamma)
    counts = (ep.acted & jnp.isfinite(g)).reshape(-1)
    shape = g.shape
    turn = own_turns(ep.acted)
    role = jnp.broadcast_to(ep.roles[:, None, :], shape)
    in_group = segments(*[jnp.broadcast_to(k, shape).reshape(-1) for k in (ep.group[:, None, None], role, turn)])
    in_episode = segments(*[jnp.broadcast_to(k, shape).reshape(-1)
                            for k in (jnp.arange(shape[0])[:, None, None], role, turn)])
    flat = g.reshape(-1)
    x0, c = jnp.where(counts, flat, 0.0), counts.astype(flat.dtype)
    m = flat.shape[0]

    def total(x, ids):
        return jax.ops.segment_sum(x, ids, m)[ids]

    others = total(c, in_group) - total(c, in_episode)
    baseline = jnp.where(others > 0, (total(x0, in_group) - total(x0, in_episode)) / jnp.maximum(others, 1.0), 0.0)
    same = segment_stats(flat, counts, in_group).equal & (others > 0)
    return jnp.where(counts & ~same, flat - baseline, 0.0).reshape(shape)


def gigpo(ep: Episodes, *, omega: float = 1.0, gamma: float = 1.0, scale: bool = False, eps: float = EPS,
          singleton_raw: bool = False, weights: Sequence[float] | None = None) -> jax.Array:
    """GiGPO (Feng et al., 2025, verl-agent): an episode-level advantage within the
    group plus a step-level one within anchor-state groups, the turns (of the same
    group and role) that saw the same state:
    `A = (R - mean_g R) / F + omega (G_t - mean_s G) / F`, `F = std + eps` with
    `scale=True` (verl-agent's `mean_std_norm`), 1 otherwise (`mean_norm`).
    `singleton_raw=True` gives an episode alone in its group its raw return as
    episode-level advantage (verl-agent's convention; 0 by default)."""
    if ep.state is None:
        raise ConfigError("gigpo needs the environment's state keys (Episodes.state); this batch has none")
    episode = episode_advantages(ep, _group_and_role(ep), weights, scale=scale, eps=eps)
    if singleton_raw:
        total, scored = episode_returns(ep, weights)
        keys = [jnp.broadcast_to(k, total.shape).reshape(-1) for k in _group_and_role(ep)]
        alone = (segment_stats(total.reshape(-1), scored.reshape(-1), segments(*keys)).size == 1).reshape(total.shape)
        episode = episode + jnp.where(alone & scored, total, 0.0)
    step = turn_advantages(ep, [ep.group[:, None, None], ep.roles[:, None, :], ep.state], gamma, weights,
                           scale=scale, eps=eps)
    return to_turns(episode, ep) + omega * step


# --- export -----------------------------------------------------------------------------


def to_verl(ep: Episodes, advantages: jax.Array | None = None, *, gamma: float = 1.0,
            reward_names: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """A batch as the flat rows verl-style trainers consume (verl's GRPO, verl-agent's
    GiGPO), one row per acted turn, so that advantages computed here can be checked
    against another implementation on the same batch. Host-side numpy.

        uid            str    the episode's group (verl: the prompt's uid)
        traj_uid       str    the episode (verl-agent: the trajectory)
        agent_id       int    the agent that acted
        role           int    the role it played (`Episodes.role`, or its index)
        turn           int    the step of the episode
        anchor_obs     int    the state key of the step (`Episodes.state`; only where given)
        rewards        float  the agent's reward after the step (several rewards: summed
                              with equal weights, and each also as `rewards/<name>`)
        step_rewards   float  the return from the step on, `G_t` with `gamma` (verl-agent's)
        episode_rewards float the agent's episode return (what a verl sequence's
                              `token_level_rewards` sum to)
        active_masks   bool   True (every row is a real turn)
        advantages     float  `advantages [E, T, N]` at the turn, where given
    """
    acted = np.asarray(ep.acted)
    rewards = np.asarray(ep.reward, np.float64)
    several = rewards.ndim == 4
    if several and reward_names and len(reward_names) != rewards.shape[-1]:
        raise ConfigError(f"reward_names has {len(reward_names)} names for {rewards.shape[-1]} rewards")
    scalar = rewards.sum(-1) if several else rewards
    rows = np.nonzero(acted)
    episode, step, agent = rows
    returns_to_go = np.asarray(turn_returns(jnp.asarray(scalar), gamma))
    out: dict[str, np.ndarray] = {
        "uid": np.asarray(ep.group)[episode].astype(str),
        "traj_uid": episode.astype(str),
        "agent_id": agent.astype(np.int64),
        "role": np.asarray(ep.roles)[episode, agent].astype(np.int64),
        "turn": step.astype(np.int64),
        "rewards": scalar[rows],
        "step_rewards": returns_to_go[rows],
        "episode_rewards": scalar.sum(1)[episode, agent],
        "active_masks": np.ones(len(episode), bool),
    }
    if ep.state is not None:
        out["anchor_obs"] = np.asarray(ep.state)[rows].astype(np.int64)
    if several:
        names = reward_names or [str(k) for k in range(rewards.shape[-1])]
        out.update({f"rewards/{name}": rewards[..., k][rows] for k, name in enumerate(names)})
    if advantages is not None:
        out["advantages"] = np.asarray(advantages, np.float64)[rows]
    return out


# --- lookup -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimator:
    """An estimator, what it needs from a batch, and the keyword options of `fn` that a
    trainer's config sets (`options`, names of `fn`'s keywords: gamma, omega, alpha)."""

    name: str
    fn: Callable[..., Any]
    needs_state: bool = False      # GiGPO: the environment's state keys
    stateful: bool = False         # RAE: carries a baseline between batches
    summary: str = ""
    options: tuple[str, ...] = ()


ESTIMATORS: dict[str, Estimator] = {e.name: e for e in [
    Estimator("grpo", grpo, summary="z-score within the group, all agents pooled"),
    Estimator("dr_grpo", dr_grpo, summary="return minus the group's mean"),
    Estimator("rloo", rloo, summary="return minus the mean of the group's other members"),
    Estimator("reinforce_pp", reinforce_pp, summary="group-centred, then whitened over the batch"),
    Estimator("dr_mas", dr_mas, summary="z-score within the group, per role"),
    Estimator("gdpo", gdpo, summary="each reward z-scored in the group, summed, whitened over the batch"),
    Estimator("rae", rae, stateful=True, summary="return minus an EMA baseline per game and role (SPIRAL)",
              options=("alpha",)),
    Estimator("mars", mars, summary="turn returns-to-go z-scored per role (MARS)", options=("gamma",)),
    Estimator("at_grpo", at_grpo, summary="turn returns z-scored within (group, role, turn index)",
              options=("gamma",)),
    Estimator("turn_rloo", turn_rloo, summary="turn returns minus the same turn's mean in the group's other "
              "episodes (unbiased where the policy chooses when to stop)", options=("gamma",)),
    Estimator("gigpo", gigpo, needs_state=True, summary="episode advantage plus anchor-state step advantage",
              options=("omega", "gamma")),
]}


def estimator(name: str) -> Estimator:
    """The estimator called `name`, or a ConfigError listing the choices."""
    if name not in ESTIMATORS:
        raise unknown_name("estimator", name, sorted(ESTIMATORS))
    return ESTIMATORS[name]
