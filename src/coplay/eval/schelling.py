"""Schelling diagrams (Schelling, 1973; Perolat et al., 2017): in an N-player
dilemma, the payoff to a cooperator and to a defector as functions of how many of
the *other* N - 1 players cooperate, measured by playing fixed policies.

For each number c = 0..N of cooperators, seats 0..c-1 play `cooperator` and the
others `defector`, for `episodes` games each (one compiled program for every c:
each seat's role is a parameter). Then, for k = 0..N-1 other cooperators,

    cooperator payoff(k) = mean episode return of the cooperator seats when c = k + 1
    defector payoff(k)   = mean episode return of the defector seats when c = k

each with a 95% normal-approximation interval over the games. For every c it also
keeps the collective return (the sum of the N returns, with its interval) and, on the
social substrates, the mean of each social metric (`coplay.envs.social.metrics`):
how the society fares as cooperators become defectors. The game is a social
dilemma where, at every k, defecting pays more than cooperating (defector above
cooperator), yet all cooperating (cooperator at N - 1) pays more than all defecting
(defector at 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.matches import bare_env, check_same_env, make_match, seated
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy


@dataclass(frozen=True)
class Schelling:
    others: np.ndarray          # [N] k = 0..N-1 other cooperators
    cooperator: np.ndarray      # [N] mean return of a cooperator among k other cooperators
    defector: np.ndarray        # [N] mean return of a defector among k other cooperators
    cooperator_ci: np.ndarray   # [N, 2] 95% intervals
    defector_ci: np.ndarray     # [N, 2]
    episodes: int
    collective: np.ndarray = field(default_factory=lambda: np.zeros(0))      # [N + 1] c = 0..N cooperators:
    collective_ci: np.ndarray = field(default_factory=lambda: np.zeros(0))   # the sum of the returns, its interval
    metrics: dict = field(default_factory=dict)   # social/<metric> -> [N + 1] its mean at each c (social substrates)

    @property
    def is_dilemma(self) -> bool:
        """Defecting pays more at every k, and all cooperating beats all defecting."""
        return bool(np.all(self.defector > self.cooperator) and self.cooperator[-1] > self.defector[0])

    def table(self) -> str:
        rows = ["| other cooperators | cooperator's return | defector's return |", "|---|---|---|"]
        for k, c, cl, d, dl in zip(self.others, self.cooperator, self.cooperator_ci, self.defector,
                                   self.defector_ci):
            rows.append(f"| {k} | {c:.3g} [{cl[0]:.3g}, {cl[1]:.3g}] | {d:.3g} [{dl[0]:.3g}, {dl[1]:.3g}] |")
        return "\n".join(rows)

    def plot(self, path: str, title: str = "") -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        for name, y, ci, colour in (("cooperator", self.cooperator, self.cooperator_ci, "tab:green"),
                                    ("defector", self.defector, self.defector_ci, "tab:red")):
            ax.plot(self.others, y, "o-", color=colour, label=name)
            ax.fill_between(self.others, ci[:, 0], ci[:, 1], color=colour, alpha=0.2)
        ax.set_xlabel("other cooperators")
        ax.set_ylabel("episode return")
        ax.set_title(title or "Schelling diagram")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)


def _mean_ci(x: np.ndarray) -> tuple[float, tuple[float, float]]:
    m = float(np.mean(x))
    half = 1.96 * float(np.std(x, ddof=1)) / np.sqrt(len(x)) if len(x) > 1 else 0.0
    return m, (m - half, m + half)


def schelling_diagram(env: Env, cooperator: Policy, cooperator_params: Any, defector: Policy, defector_params: Any,
                      episodes: int = 64, key: jax.Array | None = None) -> Schelling:
    """The Schelling diagram of `env` for the two policies (see the module's doc)."""
    env = bare_env(env)
    n = env.spec.num_agents
    if n < 2 or env.spec.reward_dim != 1:
        raise ConfigError(f"a Schelling diagram needs 2 or more players with one reward each; {env.spec.name} has "
                          f"{n} agents and {env.spec.reward_dim} objectives")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 2:
        raise ConfigError(f"episodes={episodes!r} must be an integer >= 2 (an interval needs two games)")

    cooperator, defector = seated(cooperator, env), seated(defector, env)
    check_same_env(env, {"cooperator": cooperator, "defector": defector})

    def act(params, obs, mask, key, carry, reset):
        k_c, k_d = jax.random.split(key)
        c_carry, d_carry = carry
        a_c, c_carry = cooperator.act(params["c"], obs[0], mask, k_c, c_carry, reset)
        a_d, d_carry = defector.act(params["d"], obs[1], mask, k_d, d_carry, reset)
        return jnp.where(params["cooperates"], a_c, a_d), (c_carry, d_carry)

    def observe(state, ts):   # each policy's own reading (a scripted player reads the state)
        return tuple(ts.obs if p.observe is None else p.observe(state, ts) for p in (cooperator, defector))

    either = Policy(act=act, env=env, observe=observe,
                    initial_carry=lambda batch: (cooperator.initial_carry(batch), defector.initial_carry(batch)))
    play = make_match(env, [either] * n, episodes)

    def config(count, k):
        flags = jnp.arange(n) < count
        out = play([{"c": cooperator_params, "d": defector_params, "cooperates": flags[i]} for i in range(n)], k)
        return out["return"], out["final"]

    key = jax.random.PRNGKey(0) if key is None else key
    counts = jnp.arange(n + 1)
    returns, final = jax.jit(jax.vmap(config))(counts, jax.random.split(key, n + 1))
    returns = np.asarray(returns)                                                       # [N + 1, episodes, N]
    coop, coop_ci, defect, defect_ci = [], [], [], []
    for k in range(n):
        m, ci = _mean_ci(returns[k + 1][:, :k + 1].mean(axis=1))          # cooperator seats: 0..k
        coop.append(m)
        coop_ci.append(ci)
        m, ci = _mean_ci(returns[k][:, k:].mean(axis=1))                  # defector seats: k..N-1
        defect.append(m)
        defect_ci.append(ci)
    collective = [_mean_ci(returns[c].sum(axis=1)) for c in range(n + 1)]
    return Schelling(others=np.arange(n), cooperator=np.array(coop), defector=np.array(defect),
                     cooperator_ci=np.array(coop_ci), defector_ci=np.array(defect_ci), episodes=episodes,
                     collective=np.array([m for m, _ in collective]),
                     collective_ci=np.array([ci for _, ci in collective]),
                     metrics={k: np.asarray(v).mean(axis=1) for k, v in final.items()})
