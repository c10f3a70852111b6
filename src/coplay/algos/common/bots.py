"""Scripted players that act through the common `Policy` interface, so they
can sit in tournaments, self-play pools, evaluations and the seats a learner trains
against (`algo=grpo algo.opponent=random|minimax`) beside trained ones.

    action, carry = policy.act(params, obs, mask, key, carry, reset)
    obs: [B, N, *obs_shape], mask: [B, N, A] -> action: [B, N]

Every agent row gets an action; in turn-based games only the mover's counts.
Scripted players have no parameters: pass `None` as `params`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Literal, NamedTuple, get_args

import jax.numpy as jnp
import numpy as np

from coplay.algos.common.matches import random_legal_actions, random_policy
from coplay.core.env import Env
from coplay.core.errors import ConfigError, unknown_name
from coplay.core.policy import Policy, no_carry

__all__ = ["BOTS", "make_bot", "random_policy", "tic_tac_toe_minimax", "tic_tac_toe_optimal_moves"]

_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


@cache
def tic_tac_toe_optimal_moves() -> np.ndarray:
    """`[3**9, 9]` bool: the moves that keep the best game-theoretic value for the
    player to move, for every board written from the mover's side (cell i
    contributes `3**i` times 0 empty, 1 the mover's mark, 2 the opponent's).

    Built once by negamax over every reachable position (5,478 of them).
    """
    table = np.zeros((3**9, 9), bool)
    values: dict[tuple[int, ...], int] = {}

    def won(board: tuple[int, ...], mark: int) -> bool:
        return any(all(board[i] == mark for i in line) for line in _LINES)

    def negamax(board: tuple[int, ...]) -> int:
        """Value for the mover of `board` (cells 0/1/2 = empty/mover/opponent)."""
        if board in values:
            return values[board]
        if won(board, 2):
            value = -1
        elif 0 not in board:
            value = 0
        else:
            scores = {}
            for i in range(9):
                if board[i] == 0:
                    child = list(board)
                    child[i] = 1
                    # The next mover sees the board with the roles swapped.
                    swapped = tuple((0, 2, 1)[c] for c in child)
                    scores[i] = -negamax(swapped)
            value = max(scores.values())
            code = sum(c * 3**i for i, c in enumerate(board))
            for i, s in scores.items():
                table[code, i] = s == value
        values[board] = value
        return value

    negamax((0,) * 9)
    return table


def is_tic_tac_toe(env: Env) -> bool:
    """Whether `env` is tic-tac-toe as the minimax bot reads it: two players, observations
    `[3, 3, 2]` (own marks, the opponent's), nine moves."""
    shape = getattr(env.spec.obs_space, "shape", None)
    return env.spec.num_agents == 2 and shape == (3, 3, 2) and env.spec.num_actions == 9


def tic_tac_toe_minimax(env: Env) -> Policy:
    """A perfect tic-tac-toe player: a uniformly random move among those that keep
    the position's minimax value. Expects tic-tac-toe observations `[..., 3, 3, 2]`
    with the observer's own marks in plane 0 and the opponent's in plane 1."""
    if not is_tic_tac_toe(env):
        raise ConfigError(f"the minimax bot plays tic-tac-toe only; {env.spec.name!r} has {env.spec.num_agents} "
                          f"players, observations {env.spec.obs_space} and {env.spec.num_actions} actions")
    table = jnp.asarray(tic_tac_toe_optimal_moves())
    powers = jnp.asarray(3 ** np.arange(9), jnp.int32)

    def act(params, obs, mask, key, carry, reset):
        planes = obs.reshape(*obs.shape[:-3], 9, 2).astype(jnp.int32)
        code = jnp.sum((planes[..., 0] + 2 * planes[..., 1]) * powers, axis=-1)
        best = table[code] & mask
        # Rows with no optimal legal move (agents not to move, finished games) play any legal move.
        best = jnp.where(best.any(axis=-1, keepdims=True), best, mask)
        # Tic-tac-toe is turn-based: one random number per game serves both rows.
        return random_legal_actions(key, best, turn_based=True), carry

    return Policy(act=act, initial_carry=no_carry, env=env)


class BotEntry(NamedTuple):
    """A scripted player: how it is built for an environment, what it does, and the games it can play."""

    build: Callable[[Env], Policy]
    description: str
    game: str = "any game"                              # the games it plays, in words
    plays: Callable[[Env], bool] = lambda env: True     # whether it can play `env`


# Scripted players by name, for `coplay tournament` and the seats a learner trains against.
Bot = Literal["random", "minimax", "harvester", "sustainable_harvester", "zapper", "cleaner", "cooperator",
              "defector", "punisher"]


def _social(name: str, description: str) -> BotEntry:
    """A scripted player of the mixed-motive societies (`coplay.algos.common.social_bots`)."""
    from coplay.algos.common import social_bots as social

    games = [sub for sub, named in social.substrate_bots().items() if name in named]
    return BotEntry(lambda env: social.social_bot(name, env), description, ", ".join(games),
                    lambda env: name in social.bots_for(env))


BOTS: dict[str, BotEntry] = {
    "random": BotEntry(random_policy, "uniformly random legal moves"),
    "minimax": BotEntry(tic_tac_toe_minimax, "perfect play, random among optimal moves",
                        "tic-tac-toe", is_tic_tac_toe),
    "harvester": _social("harvester", "eats the nearest apple"),
    "sustainable_harvester": _social("sustainable_harvester", "eats only apples that leave their patch regrowing"),
    "zapper": _social("zapper", "eats the nearest apple and zaps agents straight ahead"),
    "cleaner": _social("cleaner", "cleans the river, never eats"),
    "cooperator": _social("cooperator", "the substrate's cooperative behaviour (own coins, gold, cooperation)"),
    "defector": _social("defector", "the substrate's selfish behaviour (any coin, iron, defection)"),
    "punisher": _social("punisher", "cooperates and punishes every defection it may"),
}
assert tuple(BOTS) == get_args(Bot), "every bot is named in the closed set Bot"


def make_bot(name: str, env: Env, shown: str | None = None) -> Policy:
    """The scripted player `name` for `env`; unknown names list the valid ones, and a bot
    that cannot play `env` is refused naming the bots that can. `shown`: the environment
    the user named, where `env` is the game underneath it (a text game's), so that the
    refusal names what was asked for (default: `env`'s own name)."""
    if name not in BOTS:
        raise unknown_name("bot", name, BOTS)
    entry = BOTS[name]
    if not entry.plays(env):
        able = [b for b, e in BOTS.items() if e.plays(env)]
        raise ConfigError(f"the {name} bot plays {entry.game} only, not {shown or env.spec.name!r}; bots that "
                          f"play it: {', '.join(able) or 'none'}")
    return entry.build(env)
