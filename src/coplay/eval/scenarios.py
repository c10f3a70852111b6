"""Evaluation against background populations (Leibo et al., 2021; Agapiou et al.,
2023, Melting Pot 2.0's protocol): a focal population is scored in a substrate
beside players it never trained with.

A scenario is a substrate, which of its seats are focal, and a background
population that fills the other seats: each background seat draws one of the
population's members uniformly at random for each episode (Melting Pot's
`bots_by_role`). `scenarios(env)` writes three kinds for every background
population, by how many of the N seats are focal:

    resident   N - max(1, N // 3)   the focal agents are the majority (5 of 7)
    visitor    max(1, N // 3)       a focal minority visits (2 of 7)
    half       N // 2               (3 of 7)

(kinds that come to the same count, as for N = 2, are written once), with as
background each scripted player of the substrate (`coplay.algos.common.social_bots`) on
its own, and all of them together (`mixed`). Trained runs can be background
populations too: each seed a member.

The score of a focal population in a scenario is its per-capita return: the mean
episode return of its focal seats. Each scenario is also played by reference
populations (every scripted player of the substrate and the random player, each as
the whole focal population); the normalised score is

    (score - lowest reference) / (highest reference - lowest reference)

per episode, so 0 is the worst reference population's mean and 1 the best's. A
focal population with several seeds (independent populations) is summarised by the
interquartile mean over seeds and episodes with its 95% bootstrap interval
(`coplay.eval.stats`).

Every member of the roster (background members and reference populations) acts at
every step, and each seat takes the action of its member: one compiled program per
focal policy serves every scenario of a substrate (the focal seats and the
background's members are arguments, not constants).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.matches import bare_env, check_same_env, random_policy, seated
from coplay.algos.common.rollout import play_until_done
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.eval.stats import Estimate, summarize

KINDS = ("resident", "visitor", "half")


def focal_count(kind: str, n: int) -> int:
    """How many of n seats are focal in a scenario of `kind`."""
    if kind not in KINDS:
        raise ConfigError(f"unknown scenario kind {kind!r}; valid: {', '.join(KINDS)}")
    return {"resident": n - max(1, n // 3), "visitor": max(1, n // 3), "half": n // 2}[kind]


@dataclass(frozen=True)
class Member:
    """One member of a roster: a named policy with its parameters (None: scripted)."""

    name: str
    policy: Policy
    params: Any = None


@dataclass(frozen=True)
class Scenario:
    """`focal` seats are played by the focal population; every other seat draws one of
    `background` (roster member names) for each episode."""

    name: str
    kind: str
    focal: tuple[bool, ...]
    background: tuple[str, ...]

    @property
    def description(self) -> str:
        f = sum(self.focal)
        return f"{f} focal of {len(self.focal)} ({self.kind}) beside {' or '.join(self.background)}"


def scenarios(n: int, backgrounds: Mapping[str, Sequence[str]], kinds: Sequence[str] = KINDS) -> list[Scenario]:
    """The scenarios of an n-seat substrate: every kind for every background population
    (a name -> its members' names). The focal seats are the first ones."""
    out, seen = [], set()
    for kind in kinds:
        f = focal_count(kind, n)
        if f in seen:
            continue
        seen.add(f)
        for bg, members in backgrounds.items():
            out.append(Scenario(f"{kind}/{bg}", kind, tuple(i < f for i in range(n)), tuple(members)))
    return out


def default_backgrounds(bots: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each scripted player on its own, and all together ("mixed") where there are two or more."""
    out: dict[str, tuple[str, ...]] = {b: (b,) for b in bots}
    if len(bots) > 1:
        out["mixed"] = tuple(bots)
    return out


def make_play(env: Env, roster: Sequence[Member], focal: Policy | None, episodes: int):
    """`play(focal_params, focal_member, focal_seats [N] bool, allowed [M] bool, key) ->
    returns [episodes, N]`, pure and jit-able: focal seats play `focal` (with
    `focal_params`) where `focal_member` < 0, else roster member `focal_member`; each
    other seat draws, per episode, one roster member among the `allowed`."""
    env = bare_env(env)
    n, horizon = env.spec.num_agents, env.spec.max_steps
    named = {m.name: seated(m.policy, env) for m in roster}
    if focal is not None:
        named["focal"] = seated(focal, env)
    check_same_env(env, named)
    policies = list(named.values())
    m_count = len(roster)

    def play(focal_params, focal_member, focal_seats, allowed, key):
        params = [m.params for m in roster] + ([focal_params] if focal is not None else [])
        k_reset, k_draw, k_run = jax.random.split(key, 3)
        state, ts = jax.vmap(env.reset)(jax.random.split(k_reset, episodes))
        logits = jnp.where(allowed, 0.0, -jnp.inf)
        drawn = jax.random.categorical(k_draw, logits, shape=(episodes, n))                   # [B, N]
        # each seat's member: the focal policy (index M), a reference member, or its draw
        focal_as = jnp.where(focal_member < 0, m_count, focal_member)
        seat_member = jnp.where(focal_seats[None], focal_as, drawn)                          # [B, N]
        carries = [p.initial_carry((episodes,)) for p in policies]
        acc = {"return": jnp.zeros((episodes, n), jnp.float32), "finished": jnp.zeros(episodes, bool)}
        keys = jax.random.split(k_run, (horizon, len(policies) + 1))

        def body(t, c):
            state, ts, carries, acc, reset = c
            actions, new = [], []
            for j, (policy, p) in enumerate(zip(policies, params)):
                obs = ts.obs if policy.observe is None else policy.observe(state, ts)
                a, carry = policy.act(p, obs, ts.action_mask, keys[t, j], carries[j], reset)
                actions.append(a)
                new.append(carry)
            action = jnp.take_along_axis(jnp.stack(actions, -1), seat_member[..., None], -1)[..., 0]
            state, nts = jax.vmap(env.step)(state, action, jax.random.split(keys[t, -1], episodes))
            live = ~acc["finished"]
            acc = {"return": acc["return"] + jnp.where(live[:, None], nts.reward, 0.0),
                   "finished": acc["finished"] | nts.done}
            return state, nts, new, acc, jnp.zeros_like(reset)

        init = (state, ts, carries, acc, jnp.ones(episodes, bool))
        return play_until_done(env, horizon, body, init, lambda c: c[3]["finished"])[3]["return"]

    return play


@dataclass(frozen=True)
class Row:
    """A focal population's result in one scenario."""

    scenario: Scenario
    focal: str
    score: Estimate          # per-capita return, IQM over seeds and episodes
    normalised: Estimate     # the same, normalised between the reference populations
    low: float               # the lowest and highest reference populations' mean per-capita return
    high: float
    low_name: str
    high_name: str

    def as_dict(self) -> dict:
        return {"scenario": self.scenario.name, "kind": self.scenario.kind, "focal_seats": sum(self.scenario.focal),
                "background": list(self.scenario.background), "focal": self.focal,
                "score": self.score.as_dict(), "normalised": self.normalised.as_dict(),
                "reference_low": {"name": self.low_name, "score": self.low},
                "reference_high": {"name": self.high_name, "score": self.high}}


@dataclass
class Evaluation:
    """Every focal population's rows, and the references' mean scores per scenario."""

    env_name: str
    episodes: int
    rows: list[Row]
    references: dict[str, dict[str, float]] = field(default_factory=dict)   # scenario -> reference -> score

    def table(self) -> str:
        lines = ["| scenario | focal seats | focal population | per-capita return | normalised | "
                 "references (low / high) |", "|---|---|---|---|---|---|"]
        for r in self.rows:
            s = r.scenario
            lines.append(f"| {s.name} | {sum(s.focal)} of {len(s.focal)} | {r.focal} | {r.score} | "
                         f"{r.normalised} | {r.low_name} {r.low:.3g} / {r.high_name} {r.high:.3g} |")
        return "\n".join(lines)

    def summary(self) -> dict[str, float]:
        """Each focal population's mean normalised score over the scenarios (undefined ones left out)."""
        out: dict[str, list[float]] = {}
        for r in self.rows:
            if np.isfinite(r.normalised.value):
                out.setdefault(r.focal, []).append(r.normalised.value)
        return {k: float(np.mean(v)) for k, v in out.items()}

    def plot(self, path: str, title: str = "") -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = list(dict.fromkeys(r.scenario.name for r in self.rows))
        focals = list(dict.fromkeys(r.focal for r in self.rows))
        fig, ax = plt.subplots(figsize=(8, 0.3 * len(names) * len(focals) + 1.5))
        height = 0.8 / len(focals)
        for j, f in enumerate(focals):
            rows = {r.scenario.name: r for r in self.rows if r.focal == f}
            y = np.arange(len(names)) + j * height
            v = np.array([rows[n].normalised.value if n in rows else np.nan for n in names])
            lo = np.array([rows[n].normalised.low if n in rows else np.nan for n in names])
            hi = np.array([rows[n].normalised.high if n in rows else np.nan for n in names])
            ax.barh(y, v, height=height, xerr=np.stack([v - lo, hi - v]), label=f, capsize=2)
        ax.set_yticks(np.arange(len(names)) + 0.4 - height / 2, names)
        ax.invert_yaxis()
        ax.axvline(0, color="grey", lw=0.8)
        ax.axvline(1, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("normalised focal per-capita return (0, 1: worst, best reference)")
        ax.set_title(title or f"Scenarios of {self.env_name}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)


def evaluate_scenarios(env: Env, roster: Sequence[Member], focals: Sequence[tuple[str, Policy, Any]],
                       scenario_list: Sequence[Scenario], references: Sequence[str], episodes: int = 16,
                       key: jax.Array | None = None, reps: int = 2000) -> Evaluation:
    """Play every scenario with every focal population and every reference population.

    roster: the background members and reference populations (their names unique);
    focals: (name, policy, params stacked over seeds on the leading axis, or None for
    a scripted policy); references: roster names played as focal populations for the
    normalisation (at least two)."""
    env = bare_env(env)
    names = [m.name for m in roster]
    if len(set(names)) != len(names):
        raise ConfigError(f"roster names must be unique, got {names}")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 2:
        raise ConfigError(f"episodes={episodes!r} must be an integer >= 2 (an interval needs two)")
    for s in scenario_list:
        unknown = [b for b in s.background if b not in names]
        if unknown:
            raise ConfigError(f"scenario {s.name!r}: background {unknown} not in the roster ({', '.join(names)})")
        if not any(s.focal) or all(s.focal) or len(s.focal) != env.spec.num_agents:
            raise ConfigError(f"scenario {s.name!r}: focal seats {s.focal} must mark some but not all of "
                              f"{env.spec.name!r}'s {env.spec.num_agents} seats")
    bad = [r for r in references if r not in names]
    if bad or len(references) < 2:
        raise ConfigError(f"references {list(references)} must be two or more roster members ({', '.join(names)})")
    key = jax.random.PRNGKey(0) if key is None else key

    def inputs(s: Scenario) -> tuple[jax.Array, jax.Array]:
        return jnp.asarray(s.focal), jnp.asarray([n in s.background for n in names])

    # the references: one program for all of them and every scenario
    ref_play = jax.jit(make_play(env, roster, None, episodes))
    ref_scores: dict[str, dict[str, np.ndarray]] = {}
    for i, s in enumerate(scenario_list):
        seats, allowed = inputs(s)
        k = jax.random.fold_in(key, i)
        ref_scores[s.name] = {}
        for r in references:
            ret = np.asarray(ref_play(None, jnp.int32(names.index(r)), seats, allowed, k))
            ref_scores[s.name][r] = ret[:, np.asarray(s.focal)].mean(1)

    rows = []
    for name, policy, params in focals:
        member = next((j for j, m in enumerate(roster) if m.policy is policy and m.params is None), None)
        if params is None and member is not None and names[member] in references:
            # a reference population as the focal one: its reference games are its scores
            for s in scenario_list:
                rows.append(_row(s, name, ref_scores[s.name][names[member]][None], ref_scores[s.name], reps))
            continue
        # a scripted focal policy is one population (a placeholder seed axis carries it through the vmap)
        stacked = jnp.zeros((1,)) if params is None else params
        seeds = jax.tree.leaves(stacked)[0].shape[0]
        # the seeds are independent populations, played side by side
        play = jax.jit(jax.vmap(make_play(env, roster, policy, episodes), in_axes=(0, None, None, None, None)))
        for i, s in enumerate(scenario_list):
            seats, allowed = inputs(s)
            k = jax.random.fold_in(key, i)
            ret = np.asarray(play(stacked, jnp.int32(-1), seats, allowed, k))                      # [S, B, N]
            per_capita = ret[..., np.asarray(s.focal)].mean(-1)                                   # [S, B]
            rows.append(_row(s, name if seeds == 1 else f"{name} ({seeds} seeds)", per_capita, ref_scores[s.name],
                             reps))
    refs = {s: {r: float(v.mean()) for r, v in d.items()} for s, d in ref_scores.items()}
    return Evaluation(env.spec.name, episodes, rows, refs)


def _row(s: Scenario, name: str, per_capita: np.ndarray, refs: dict[str, np.ndarray], reps: int) -> Row:
    """A focal population's row from its per-capita returns [seeds, episodes] and the references'."""
    means = {r: float(v.mean()) for r, v in refs.items()}
    low_name, high_name = min(means, key=means.__getitem__), max(means, key=means.__getitem__)
    low, high = means[low_name], means[high_name]
    normalised = (per_capita - low) / (high - low) if high > low else np.full(per_capita.shape, np.nan)
    return Row(s, name, summarize(per_capita.ravel(), reps), _estimate(normalised.ravel(), reps), low, high,
               low_name, high_name)


def _estimate(values: np.ndarray, reps: int) -> Estimate:
    if not np.all(np.isfinite(values)):
        return Estimate(float("nan"), float("nan"), float("nan"), len(values))
    return summarize(values, reps)


def substrate_roster(env: Env) -> list[Member]:
    """Every scripted player of `env`'s substrate, and the random player."""
    from coplay.algos.common.social_bots import bots_for, social_bot

    bots = bots_for(env)
    if not bots:
        raise ConfigError(f"{env.spec.name!r} has no scripted players; scenarios are written for the social "
                          "substrates (commons_harvest, clean_up, coins, coop_mining, pd_arena, population_dilemma)")
    return [Member(b, social_bot(b, env)) for b in bots] + [Member("random", random_policy(bare_env(env)))]
