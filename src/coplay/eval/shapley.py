"""Shapley values of the agents (or teams) of a trained team: who carried it.

    from coplay.eval.shapley import shapley
    result = shapley(env, policy, params, replacement="random", episodes=256)
    print(result.table())          # each player's value with its 95% interval
    result.plot("shapley.png")

The players are the agents, or the teams of `env.spec.teams` (`teams=True`). The value
of a coalition S of players is the team's return, the mean over all agents of the
episode return, when the players outside S are *replaced*:

    noop       they play action 0 (the no-op of the MPE, foraging and warehouse action
               sets, not of every environment: SMAX's is 4; zeros for continuous actions)
    random     a uniformly random legal action, every step
    teammate   the action a uniformly drawn member of the coalition takes in the same
               step, where it is legal for the replaced agent (a random legal action
               where it is not, or where the coalition is empty)
    a Policy   the given baseline policy's action for that agent (`baseline=(policy,
               params)`; a scripted bot, or another run)

The choice moves the values a lot ("Collective eXplainable AI", Heuillet et al., 2022,
measured about 73 reward units between no-op and random replacement): a value says
how much a player adds over *that* stand-in, and the table names it.

Shapley value of player i among P (Shapley, 1953):

    phi_i = sum_{S not containing i} |S|! (P - |S| - 1)! / P! [v(S + i) - v(S)]

- Exact, for P <= `exact_up_to` (8): all 2^P coalitions are played in one compiled
  batch, every coalition on the same episode keys (common random numbers: the same
  resets and the same environment noise), so each episode gives one sample of every
  phi_i, and the values add up exactly, per episode and on average, to v(all) - v(none)
  (efficiency). The interval is the normal 95% interval of the mean over episodes.
- Monte-Carlo, beyond (or `method="permutations"`): each sampled permutation of the
  players adds the players one after another, and player i's marginal contribution is
  v(players before it + i) - v(players before it), each prefix coalition played on the
  permutation's own `episodes` episodes (common keys within the permutation). The
  estimate is the mean over permutations, unbiased; the interval is the normal 95%
  interval over permutations, which shrinks as one over the square root of their number.

`coplay explain runs/<run>` prints the table and draws the bar chart.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.matches import bare_env, check_same_env, random_legal_actions, seated
from coplay.algos.common.rollout import play_until_done
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.core.spaces import Discrete

REPLACEMENTS = ("noop", "random", "teammate")
METHODS = ("auto", "exact", "permutations")
Z95 = 1.959963984540054

# v(coalitions [K, P] bool, key) -> [K, E]: the team return of each coalition in E episodes,
# every coalition on the same episode keys.
ValueFn = Callable[[jax.Array, jax.Array], jax.Array]


@dataclass
class Shapley:
    """Each player's Shapley value, with its 95% interval."""

    players: list[str]
    values: np.ndarray          # [P]
    low: np.ndarray             # [P]
    high: np.ndarray            # [P]
    grand: float                # v(every player), mean
    empty: float                # v(no player): the team entirely replaced, mean
    replacement: str
    method: str                 # "exact" or "permutations"
    episodes: int               # episodes per coalition (exact) or per prefix coalition (permutations)
    permutations: int = 0       # sampled permutations (Monte-Carlo only)
    samples: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # [samples, P] the values' samples

    def as_dict(self) -> dict[str, Any]:
        return {"players": self.players, "values": self.values.tolist(), "low": self.low.tolist(),
                "high": self.high.tolist(), "grand": self.grand, "empty": self.empty,
                "replacement": self.replacement, "method": self.method, "episodes": self.episodes,
                "permutations": self.permutations}

    def table(self) -> str:
        how = (f"exact over every coalition, {self.episodes} episodes each" if self.method == "exact" else
               f"{self.permutations} sampled permutations, {self.episodes} episodes per coalition")
        lines = [f"Shapley values (replacement: {self.replacement}; {how}); 95% intervals",
                 f"v(all) = {self.grand:.4g}, v(none) = {self.empty:.4g}, sum of the values = "
                 f"{float(self.values.sum()):.4g}", "",
                 "| player | Shapley value | 95% interval |", "|---|---|---|"]
        lines += [f"| {p} | {v:.4g} | [{lo:.4g}, {hi:.4g}] |"
                  for p, v, lo, hi in zip(self.players, self.values, self.low, self.high)]
        return "\n".join(lines)

    def plot(self, path: str | Path) -> Path:
        """A bar chart of the values with their intervals, written as PNG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(max(3.0, 0.7 * len(self.players) + 1.5), 3.2))
        x = np.arange(len(self.players))
        err = np.stack([self.values - self.low, self.high - self.values])
        ax.bar(x, self.values, yerr=err, capsize=4, color="tab:blue")
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks(x, self.players, rotation=30 if len(self.players) > 6 else 0)
        ax.set_ylabel("Shapley value (team return)")
        ax.set_title(f"replacement: {self.replacement}")
        fig.tight_layout()
        path = Path(path)
        partial = path.with_name(path.name + ".partial")
        fig.savefig(partial, dpi=120, format="png")
        plt.close(fig)
        os.replace(partial, path)       # the last good chart survives a crash while drawing
        return path


# --- the combinatorics -----------------------------------------------------------------


def all_coalitions(p: int) -> np.ndarray:
    """[2^p, p] bool: coalition c holds player i where bit i of c is set."""
    return (np.arange(2**p)[:, None] >> np.arange(p)[None, :]) & 1 == 1


def exact_weights(p: int) -> np.ndarray:
    """[p, 2^p] float64 W with phi = W v for the values v [2^p] of `all_coalitions(p)`:
    W[i, S] = w(|S| - 1) where i is in S, -w(|S|) where it is not, w(s) = s! (p-s-1)! / p!."""
    members = all_coalitions(p)
    size = members.sum(1)
    w = np.array([math.factorial(s) * math.factorial(p - s - 1) / math.factorial(p) for s in range(p)] + [0.0])
    return np.where(members.T, w[np.maximum(size - 1, 0)][None, :], -w[size][None, :])


def exact(value: ValueFn, p: int, key: jax.Array) -> tuple[np.ndarray, np.ndarray]:
    """(per-episode values [E, p], v [2^p, E]) of every coalition played on the same keys."""
    v = np.asarray(value(jnp.asarray(all_coalitions(p)), key), np.float64)
    return (exact_weights(p) @ v).T, v


def permutation_samples(value: ValueFn, p: int, permutations: int, key: jax.Array) -> tuple[np.ndarray, float,
                                                                                               float]:
    """([permutations, p] marginal contributions, mean v(all), mean v(none)): each
    permutation's p + 1 prefix coalitions played on that permutation's own keys."""
    k_order, k_play = jax.random.split(key)
    orders = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, p))(jax.random.split(k_order, permutations)))
    rank = np.argsort(orders, axis=1)                                   # [M, p] position of player i
    prefixes = rank[:, None, :] < np.arange(p + 1)[None, :, None]       # [M, p+1, p] first j players
    v = jax.vmap(value)(jnp.asarray(prefixes), jax.random.split(k_play, permutations))   # [M, p+1, E]
    v = np.asarray(v, np.float64).mean(-1)                                             # [M, p+1]
    marginal = np.take_along_axis(v, rank + 1, axis=1) - np.take_along_axis(v, rank, axis=1)
    return marginal, float(v[:, -1].mean()), float(v[:, 0].mean())


def _interval(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = samples.mean(0)
    half = Z95 * (samples.std(0, ddof=1) / np.sqrt(len(samples)) if len(samples) > 1 else np.full(mean.shape,
                                                                                                  np.nan))
    return mean, mean - half, mean + half


def shapley_from(value: ValueFn, players: list[str], *, method: str = "auto", exact_up_to: int = 8,
                 permutations: int = 128, key: jax.Array, replacement: str = "", episodes: int = 0) -> Shapley:
    """Shapley values from a coalition-value function (see `ValueFn`)."""
    p = len(players)
    if method not in METHODS:
        raise ConfigError(f"method={method!r}: valid methods are {', '.join(METHODS)}")
    if method == "exact" and p > 16:
        raise ConfigError(f"method=exact plays 2^{p} coalitions; with {p} players use method=permutations")
    if method == "exact" or (method == "auto" and p <= exact_up_to):
        samples, v = exact(value, p, key)
        mean, low, high = _interval(samples)
        return Shapley(players, mean, low, high, float(v[-1].mean()), float(v[0].mean()), replacement, "exact",
                       episodes, 0, samples)
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 2:
        raise ConfigError(f"permutations={permutations!r} must be an integer >= 2")
    samples, grand, empty = permutation_samples(value, p, permutations, key)
    mean, low, high = _interval(samples)
    return Shapley(players, mean, low, high, grand, empty, replacement, "permutations", episodes, permutations,
                   samples)


# --- coalitions played in an environment --------------------------------------------------


def _noop(env: Env, shape: tuple[int, ...]) -> jax.Array:
    space = env.spec.action_space
    if isinstance(space, Discrete):
        return jnp.zeros(shape, jnp.int32)
    return jnp.zeros((*shape, *space.shape), jnp.float32)


def coalition_value(env: Env, policy: Policy, params: Any, *, replacement: str | tuple[Policy, Any] = "random",
                    episodes: int = 64, players: np.ndarray | None = None) -> ValueFn:
    """The `ValueFn` of a team in `env`: `policy` (with `params`) plays every agent of the
    coalition, `replacement` every other one. `players` [P, N] bool says which agents
    each player holds (default: each agent its own player)."""
    env = bare_env(env)
    n = env.spec.num_agents
    members = np.eye(n, dtype=bool) if players is None else np.asarray(players, bool)
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"episodes={episodes!r} must be an integer >= 1")
    baseline: tuple[Policy, Any] | None = None
    if isinstance(replacement, tuple):
        baseline = (seated(replacement[0], env), replacement[1])
        check_same_env(env, {"baseline": baseline[0]})
    elif replacement not in REPLACEMENTS:
        raise ConfigError(f"replacement={replacement!r}: valid replacements are {', '.join(REPLACEMENTS)}, "
                          "or a baseline policy")
    elif replacement == "teammate" and not isinstance(env.spec.action_space, Discrete):
        raise ConfigError("replacement=teammate copies discrete actions; this environment's actions are continuous")
    policy = seated(policy, env)
    check_same_env(env, {"team": policy})
    if env.spec.reward_dim != 1:
        raise ConfigError(f"{env.spec.name!r} has {env.spec.reward_dim} objectives; Shapley values here are of "
                          "one team return (scalarise the rewards first, with coplay.wrappers.Scalarise)")
    horizon, turn_based = env.spec.max_steps, env.spec.turn_based
    holds = jnp.asarray(members)

    def one(coalition: jax.Array, key: jax.Array) -> jax.Array:
        present = jnp.any(holds & coalition[:, None], axis=0)              # [N] agents the team plays
        k_reset, k_run = jax.random.split(key)
        state, ts = jax.vmap(env.reset)(jax.random.split(k_reset, episodes))
        carry = policy.initial_carry((episodes,))
        b_carry = None if baseline is None else baseline[0].initial_carry((episodes,))
        keys = jax.random.split(k_run, (horizon, 4))

        def body(t, c):
            state, ts, carry, b_carry, ret, done = c
            k_act, k_rep, k_env, k_pick = keys[t]
            reset = jnp.full((episodes,), t == 0)
            obs = ts.obs if policy.observe is None else policy.observe(state, ts)
            action, carry = policy.act(params, obs, ts.action_mask, k_act, carry, reset)
            if baseline is not None:
                b_pol, b_params = baseline
                b_obs = ts.obs if b_pol.observe is None else b_pol.observe(state, ts)
                stand_in, b_carry = b_pol.act(b_params, b_obs, ts.action_mask, k_rep, b_carry, reset)
            elif replacement == "noop":
                stand_in = _noop(env, action.shape[:2])
            else:
                stand_in = random_legal_actions(k_rep, ts.action_mask, turn_based)
                if replacement == "teammate":
                    # each replaced agent copies a uniformly drawn present agent's action, where legal for it
                    pick = jax.random.categorical(k_pick, jnp.where(present, 0.0, -jnp.inf), shape=(episodes, n))
                    copied = jnp.take_along_axis(action, pick, axis=1)
                    legal = jnp.take_along_axis(ts.action_mask, copied[..., None], axis=-1)[..., 0]
                    stand_in = jnp.where(jnp.any(present) & legal, copied, stand_in)
            shape = (1, n) + (1,) * (action.ndim - 2)
            act = jnp.where(present.reshape(shape), action, stand_in.astype(action.dtype))
            state, nts = jax.vmap(env.step)(state, act, jax.random.split(k_env, episodes))
            ret = ret + jnp.where(done, 0.0, nts.reward.mean(-1))
            return state, nts, carry, b_carry, ret, done | nts.done

        init = (state, ts, carry, b_carry, jnp.zeros(episodes, jnp.float32), jnp.zeros(episodes, bool))
        return play_until_done(env, horizon, body, init, lambda c: c[5])[4]

    return jax.jit(jax.vmap(one, in_axes=(0, None)))


def player_groups(env: Env, teams: bool) -> tuple[list[str], np.ndarray]:
    """(names, [P, N] bool): each agent its own player, or each team of `env.spec.teams` one."""
    spec = bare_env(env).spec
    n = spec.num_agents
    if not teams:
        return [f"agent {i}" for i in range(n)], np.eye(n, dtype=bool)
    ids = sorted(set(spec.teams))
    if len(ids) < 2:
        raise ConfigError(f"teams=True: {spec.name!r} has one team; its agents are the players (teams=False)")
    return [f"team {t}" for t in ids], np.array([[spec.teams[a] == t for a in range(n)] for t in ids])


def shapley(env: Env, policy: Policy, params: Any, *, replacement: str | tuple[Policy, Any] = "random",
            episodes: int = 64, teams: bool = False, method: str = "auto", exact_up_to: int = 8,
            permutations: int = 128, key: jax.Array | None = None, name: str | None = None) -> Shapley:
    """The Shapley value of each agent (or team) of the team `policy` plays in `env`.
    `name` labels a baseline replacement in the table (default "baseline policy")."""
    names, members = player_groups(env, teams)
    value = coalition_value(env, policy, params, replacement=replacement, episodes=episodes, players=members)
    label = replacement if isinstance(replacement, str) else (name or "baseline policy")
    return shapley_from(value, names, method=method, exact_up_to=exact_up_to, permutations=permutations,
                        key=jax.random.PRNGKey(0) if key is None else key, replacement=label, episodes=episodes)


__all__ = ["REPLACEMENTS", "Shapley", "all_coalitions", "coalition_value", "exact_weights", "player_groups",
           "shapley", "shapley_from"]
