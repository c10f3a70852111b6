"""Exact game trees of small two-player zero-sum games, laid out for solvers.

A `GameTree` is built once on the host from a game's rules (a `Rules` object:
who moves, what is legal, chance probabilities, payoffs and what each player
knows) and then stored as flat arrays, one row per *terminal path*:

    path_infoset[z, d]  the information set of the d-th decision on the way to
                        terminal z (or -1 for a chance edge or padding)
    path_action[z, d]   the action taken there
    path_owner[z, d]    who owns that edge: 0, 1, CHANCE or PAD
    path_chance[z, d]   the chance probability of a chance edge (1 otherwise)
    utility[z]          player 0's payoff at z (player 1 gets minus it)

Everything a tabular solver needs is a product along these paths: the reach
probability of a terminal is the product of its edge probabilities, and a
counterfactual value of an (information set, action) pair is a sum over the
terminals below it. So one CFR iteration is a gather, a few cumulative
products and a `segment_sum`, with no loop over the tree's depth, and it
vectorises over all information sets at once.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.errors import ConfigError, unknown_name

CHANCE = 2
PAD = 3


class Rules(abc.ABC):
    """A two-player zero-sum extensive-form game, as plain host-side Python.

    Histories are hashable values (tuples of actions work for most games).
    """

    name: str
    num_actions: int
    action_names: tuple[str, ...]

    @abc.abstractmethod
    def initial(self) -> Hashable: ...

    @abc.abstractmethod
    def is_terminal(self, h: Hashable) -> bool: ...

    @abc.abstractmethod
    def player(self, h: Hashable) -> int:
        """0 or 1 for a decision, CHANCE for a chance node."""

    @abc.abstractmethod
    def chance_outcomes(self, h: Hashable) -> Sequence[tuple[int, float]]:
        """`(outcome, probability)` pairs at a chance node."""

    @abc.abstractmethod
    def legal_actions(self, h: Hashable) -> Sequence[int]: ...

    @abc.abstractmethod
    def child(self, h: Hashable, action: int) -> Hashable: ...

    @abc.abstractmethod
    def utility(self, h: Hashable) -> float:
        """Player 0's payoff at a terminal history (player 1 receives minus it)."""

    @abc.abstractmethod
    def infoset_key(self, h: Hashable) -> str:
        """What the player to move knows at `h`, as text; equal keys = one information set."""

    def observation_key(self, h: Hashable, player: int) -> str:
        """What `player` knows at a decision or terminal history `h`, whoever is to move;
        for the mover it must agree with `infoset_key`. Needed to play the game as an
        environment (`coplay.envs.trees.env`), not by the solvers."""
        raise NotImplementedError(f"{self.name}: observation_key is not implemented, so the game "
                                  "cannot be played as an environment")

    def text_view(self, h: Hashable, player: int) -> str | None:
        """What `player` knows at a decision or terminal history `h`, in words of coplay's
        text vocabulary (`coplay.envs.text.vocab`); the same words wherever
        `observation_key` is the same. None where the game has no text rendering, so
        that it cannot be played as a text environment."""
        return None

    def text_status(self, h: Hashable, player: int) -> str:
        """The last words of a text view: "game over", "your move" or "wait"."""
        if self.is_terminal(h):
            return GAME_OVER
        return YOUR_MOVE if self.player(h) == player else WAIT


# How a text view ends (`Rules.text_status`).
GAME_OVER, YOUR_MOVE, WAIT = "game over", "your move", "wait"

# The ranks of the poker games' cards (J < Q < K), in words.
RANK_WORDS = ("jack", "queen", "king")


@dataclass(frozen=True)
class GameTree:
    """A game's exact tree as terminal paths (see the module docstring).

    `num_infosets` information sets, each owned by `infoset_player[i]` with
    legal actions `legal[i]` (`[I, A]` bool) and a readable `infoset_keys[i]`.
    """

    name: str
    num_actions: int
    action_names: tuple[str, ...]
    infoset_keys: tuple[str, ...]
    infoset_player: np.ndarray  # [I] int
    infoset_depth: np.ndarray  # [I] int, decisions of the owner before this one
    legal: np.ndarray  # [I, A] bool
    path_infoset: np.ndarray  # [Z, D] int, -1 off decisions
    path_action: np.ndarray  # [Z, D] int
    path_owner: np.ndarray  # [Z, D] int: 0, 1, CHANCE, PAD
    path_chance: np.ndarray  # [Z, D] float
    utility: np.ndarray  # [Z] float, player 0's payoff
    _index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_infosets(self) -> int:
        return len(self.infoset_keys)

    @property
    def num_terminals(self) -> int:
        return int(self.utility.shape[0])

    def infoset_index(self, key: str) -> int:
        """The row of the information set with text `key`."""
        if key not in self._index:
            raise unknown_name(f"information set of {self.name}:", key, self._index)
        return self._index[key]

    def uniform_policy(self) -> jax.Array:
        """`[I, A]`: every legal action equally likely."""
        legal = jnp.asarray(self.legal, jnp.float32)
        return legal / legal.sum(axis=1, keepdims=True)


def build_tree(rules: Rules) -> GameTree:
    """Enumerate every history of `rules` and lay the tree out as terminal paths."""
    keys: list[str] = []
    index: dict[str, int] = {}
    players: list[int] = []
    depths: list[int] = []
    legal_rows: list[np.ndarray] = []
    paths: list[list[tuple[int, int, int, float]]] = []
    utilities: list[float] = []

    # Iterative depth-first walk; each stack entry carries its path so far and
    # how many decisions each player has made (the depth of their infosets).
    stack: list[tuple[Hashable, list[tuple[int, int, int, float]], tuple[int, int]]] = [
        (rules.initial(), [], (0, 0))]
    while stack:
        h, path, made = stack.pop()
        if rules.is_terminal(h):
            paths.append(path)
            utilities.append(float(rules.utility(h)))
            continue
        p = rules.player(h)
        if p == CHANCE:
            outcomes = list(rules.chance_outcomes(h))
            total = sum(prob for _, prob in outcomes)
            if abs(total - 1.0) > 1e-9:
                raise ConfigError(f"{rules.name}: chance probabilities at {h!r} sum to {total}, not 1")
            for a, prob in reversed(outcomes):
                stack.append((rules.child(h, a), path + [(-1, a, CHANCE, prob)], made))
            continue
        key = rules.infoset_key(h)
        actions = list(rules.legal_actions(h))
        mask = np.zeros(rules.num_actions, bool)
        mask[actions] = True
        if key not in index:
            index[key] = len(keys)
            keys.append(key)
            players.append(p)
            depths.append(made[p])
            legal_rows.append(mask)
        i = index[key]
        # Perfect recall: every history in an information set has the same owner,
        # legal actions and number of the owner's earlier decisions.
        if players[i] != p or depths[i] != made[p] or not np.array_equal(legal_rows[i], mask):
            raise ConfigError(f"{rules.name}: information set {key!r} is not consistent at {h!r}")
        after = (made[0] + (p == 0), made[1] + (p == 1))
        for a in reversed(actions):
            stack.append((rules.child(h, a), path + [(i, a, p, 1.0)], after))

    depth = max(len(p) for p in paths)
    z = len(paths)
    path_infoset = np.full((z, depth), -1, np.int32)
    path_action = np.zeros((z, depth), np.int32)
    path_owner = np.full((z, depth), PAD, np.int32)
    path_chance = np.ones((z, depth), np.float64)
    for row, path in enumerate(paths):
        for d, (i, a, owner, prob) in enumerate(path):
            path_infoset[row, d] = i
            path_action[row, d] = a
            path_owner[row, d] = owner
            path_chance[row, d] = prob
    return GameTree(
        name=rules.name,
        num_actions=rules.num_actions,
        action_names=tuple(rules.action_names),
        infoset_keys=tuple(keys),
        infoset_player=np.asarray(players, np.int32),
        infoset_depth=np.asarray(depths, np.int32),
        legal=np.stack(legal_rows),
        path_infoset=path_infoset,
        path_action=path_action,
        path_owner=path_owner,
        path_chance=path_chance,
        utility=np.asarray(utilities, np.float64),
        _index=index,
    )
