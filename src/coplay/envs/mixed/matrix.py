"""Repeated two-player normal-form games.

Both players choose simultaneously each round; the episode is `rounds` rounds.
Observation of each player: one-hot of its own previous action, one-hot of the
other's previous action, and a first-round flag (1 on the first round, when the
one-hots are zero). `global_state` is both previous actions one-hot and the flag.

Games (payoffs[a0, a1] = (reward of player 0, reward of player 1)):
    climbing           common payoff [[11, -30, 0], [-30, 7, 6], [0, 0, 5]] (Claus & Boutilier, 1998)
    penalty            common payoff [[k, 0, 10], [0, 2, 0], [10, 0, k]], k = penalty_k (default -100)
    prisoners_dilemma  actions (cooperate, defect); R=3, S=0, T=5, P=1
    stag_hunt          actions (stag, hare); (4, 4) both stag, (0, 3) stag vs hare, (3, 3) both hare
    rps                zero-sum rock-paper-scissors, win 1, loss -1, draw 0

Games with two objectives (x, y): `reward [2, 2]`, `spec.reward_dim` 2 (Radulescu et
al., 2020, "A utility-based analysis of equilibria in multi-objective normal form
games"; Ropke et al., 2021, "On Nash equilibria in normal-form games with vectorial
payoffs"):
    imbalancing_act            common payoff [[(4,0), (3,1), (2,2)], [(3,1), (2,2), (1,3)], [(2,2), (1,3), (0,4)]]
    imbalancing_act_without_m  common payoff [[(4,0), (2,2)], [(2,2), (0,4)]]
    vector_payoffs             each player its own vectors, rows (row player; column player):
                               A: (4,1);(4,0)  (1,2);(3,1)  (2,1);(2,2)
                               B: (3,1);(3,1)  (3,2);(2,2)  (1,2);(1,3)
                               C: (1,2);(2,2)  (2,1);(1,3)  (1,3);(0,4)

info["optimal"] is 1 when the joint action maximises the sum of payoffs; with
several objectives, when no other joint action's sum of payoffs is at least as good
in every objective and better in one (it is Pareto-optimal for the pair).
`true_front()` gives the Pareto front of the episode returns of a common-payoff
game, and `reference_point` a point weakly worse than every episode return.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError, unknown_name
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep


def _common(table) -> np.ndarray:
    """Both players' payoffs from one table: `[A, A] -> [A, A, 2]`, `[A, A, K] -> [A, A, 2, K]`."""
    t = np.asarray(table, np.float32)
    return np.stack([t, t], axis=2)


def _games(k: float) -> dict[str, tuple[np.ndarray, bool]]:
    pd_row = np.array([[3, 0], [5, 1]], np.float32)
    sh_row = np.array([[4, 0], [3, 3]], np.float32)
    rps_row = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], np.float32)
    return {
        "climbing": (_common([[11, -30, 0], [-30, 7, 6], [0, 0, 5]]), True),
        "penalty": (_common([[k, 0, 10], [0, 2, 0], [10, 0, k]]), True),
        "prisoners_dilemma": (np.stack([pd_row, pd_row.T], -1), False),
        "stag_hunt": (np.stack([sh_row, sh_row.T], -1), False),
        "rps": (np.stack([rps_row, -rps_row], -1), False),
        "imbalancing_act": (_common([[(4, 0), (3, 1), (2, 2)], [(3, 1), (2, 2), (1, 3)], [(2, 2), (1, 3), (0, 4)]]),
                            True),
        "imbalancing_act_without_m": (_common([[(4, 0), (2, 2)], [(2, 2), (0, 4)]]), True),
        "vector_payoffs": (np.stack([np.array([[(4, 1), (1, 2), (2, 1)], [(3, 1), (3, 2), (1, 2)],
                                               [(1, 2), (2, 1), (1, 3)]], np.float32),
                                     np.array([[(4, 0), (3, 1), (2, 2)], [(3, 1), (2, 2), (1, 3)],
                                               [(2, 2), (1, 3), (0, 4)]], np.float32)], axis=2), False),
    }


def _non_dominated(vectors: np.ndarray) -> np.ndarray:
    """`[M, K] -> [M]` bool: no other row is at least as large everywhere and larger somewhere."""
    ge = np.all(vectors[None, :] >= vectors[:, None], axis=-1)     # ge[i, j]: row j >= row i everywhere
    gt = np.any(vectors[None, :] > vectors[:, None], axis=-1)
    return ~np.any(ge & gt, axis=1)


GAMES = tuple(_games(-100.0))
SCALAR_GAMES = tuple(g for g, (table, _) in _games(-100.0).items() if table.ndim == 3)   # one payoff per player


def payoff_table(game: str, penalty_k: float = -100.0) -> np.ndarray:
    """`[A, A, 2]` (`[A, A, 2, K]` with K objectives): `table[a0, a1]` = (player 0's payoff,
    player 1's payoff) of game `game`."""
    games = _games(float(penalty_k))
    if game not in games:
        raise unknown_name("matrix game", game, games)
    return games[game][0].copy()


@struct.dataclass
class MatrixState:
    last: jax.Array     # [2] previous actions (-1 before the first round)
    round: jax.Array    # [] rounds played


class MatrixGame(Env):
    def __init__(self, game: str = "climbing", rounds: int = 25, penalty_k: float = -100.0):
        games = _games(float(penalty_k))
        if game not in games:
            raise unknown_name("matrix game", game, games)
        if not isinstance(rounds, int) or rounds < 1:
            raise ConfigError(f"rounds={rounds!r} is out of range; it must be an integer >= 1")
        table, common = games[game]
        self.game = game
        self.rounds = rounds
        self.common = common
        self.payoffs = jnp.asarray(table)                     # [A, A, 2] or [A, A, 2, K]
        a = table.shape[0]
        self.num_choices = a
        objectives = table.shape[3] if table.ndim == 4 else 1
        total = table.sum(2).reshape(a * a, objectives)       # each joint action's sum over the players
        self.optimal = jnp.asarray(_non_dominated(total).reshape(a, a))   # [A, A]; one objective: the maxima
        # weakly worse than every episode return: each objective's worst payoff in every round
        self.reference_point = rounds * table.reshape(-1, objectives).min(0)
        obs_dim = 2 * a + 1
        self.spec = EnvSpec(
            name="matrix", num_agents=2, obs_space=Box(0.0, 1.0, (obs_dim,)), action_space=Discrete(a),
            global_state_space=Box(0.0, 1.0, (obs_dim,)), max_steps=rounds,
            teams=(0, 0) if common else (0, 1), roles=("row", "column"),
            reward_dim=objectives, reward_names=("x", "y") if objectives == 2 else (),
            render_text=self.render_text,
        )

    def true_front(self) -> np.ndarray:
        """`[F, K]`: the Pareto front of the episode returns (both players' return, a
        common payoff) over every sequence of joint actions: the non-dominated sums of
        `rounds` one-round payoffs. Only for a common-payoff game, where the players'
        returns are one vector."""
        if not self.common:
            raise ConfigError(f"matrix game {self.game!r} pays each player its own payoffs; true_front is the front "
                              "of a common payoff (games: " + ", ".join(g for g, (_, c) in _games(-100.0).items() if c)
                              + ")")
        table = np.asarray(self.payoffs)[:, :, 0]
        outcomes = np.unique(table.reshape(-1, self.spec.reward_dim), axis=0)
        outcomes = outcomes[_non_dominated(outcomes)]          # a dominated payoff never helps a sum
        sums = np.unique([np.sum(c, axis=0) for c in
                          itertools.combinations_with_replacement(outcomes, self.rounds)], axis=0)
        return sums[_non_dominated(sums)]

    def _observe(self, state: MatrixState, reward: jax.Array, done: jax.Array, optimal: jax.Array) -> TimeStep:
        a = self.num_choices
        first = (state.round == 0).astype(jnp.float32)
        onehot = jax.nn.one_hot(state.last, a, dtype=jnp.float32)   # -1 -> zeros
        own = jnp.concatenate([onehot[0], onehot[1], first[None]])
        other = jnp.concatenate([onehot[1], onehot[0], first[None]])
        return TimeStep(
            obs=jnp.stack([own, other]), reward=reward, done=done, truncated=done,
            active=jnp.ones(2, bool), action_mask=jnp.ones((2, a), bool), global_state=own,
            info={"optimal": optimal.astype(jnp.int32)},
        )

    def _reset(self, key: jax.Array) -> tuple[MatrixState, TimeStep]:
        state = MatrixState(last=jnp.full((2,), -1, jnp.int32), round=jnp.zeros((), jnp.int32))
        return state, self._observe(state, jnp.zeros(self.spec.reward_shape, jnp.float32), jnp.zeros((), bool),
                                    jnp.zeros((), bool))

    def _step(self, state: MatrixState, actions: jax.Array, key: jax.Array) -> tuple[MatrixState, TimeStep]:
        actions = jnp.clip(actions.astype(jnp.int32), 0, self.num_choices - 1)
        reward = self.payoffs[actions[0], actions[1]]
        state = MatrixState(last=actions, round=state.round + 1)
        done = state.round >= self.rounds
        return state, self._observe(state, reward, done, self.optimal[actions[0], actions[1]])

    def render_text(self, state: MatrixState) -> str:
        last = np.asarray(state.last)
        if last[0] < 0:
            return f"{self.game}: round 0, no moves yet"
        r = np.asarray(self.payoffs[last[0], last[1]])
        return f"{self.game}: round {int(state.round)}, actions {last.tolist()}, payoffs {r.tolist()}"
