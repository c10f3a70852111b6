"""Text games played on the host in free text (a TextArena game): the contract.

coplay's own text environments are compiled: their views and utterances are token
ids of coplay's closed vocabulary. A game from another library reads and writes
arbitrary text and runs in Python, so it enters coplay as a *host text game*: one
copy of the game, stepped one reply at a time, one player to move at a time.

    game = env.game()                  # a fresh copy (env: a HostTextEnv)
    turn = game.reset(seed)            # Turn(player, observation, legal)
    while turn is not None:
        step = game.step(reply_text)   # Step(turn=the next Turn or None, invalid, info)
        turn = step.turn
    outcome = game.outcome()           # Outcome(rewards [N], invalid [N], status, reason)

What the contract promises, checked by `check_game` (the contract suite for host text
games, which the tests run on every adapted game):

- `Turn.observation` is what `Turn.player` may see, and `Turn.legal`, where the game
  names its moves, is *that player's* legal moves now (None where the game does not
  list them: the reply is then parsed by the game alone);
- every `Step.info` has the same keys, the first step's as every later one's;
- a reply the game does not accept is an invalid move: counted in `Step.invalid` and
  `Outcome.invalid`, with the game's own rule for what follows (a retry, a forfeit);
- `Outcome.status` is `"complete"` when the game ended by its rules, `"truncated"` when
  `max_turns` replies were written first (no rewards: the game has no result), and
  `"failed"` when the game raised (its exception is kept in `reason`). A learner
  scores only complete games; the others are dropped, never scored as a 0;
- the same seed gives the same game, whatever other copies do in between.

`HostTextEnv` is the registered environment (`env=textarena:<id>`): its `spec` names
the players and `max_turns`, its spaces are `Text`, so only learners that play on the
host take it (`algo=lm_grpo` through `coplay.lm`; the compiled learners refuse it by
name, before any work)."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from coplay.core.errors import HostEnvError
from coplay.core.spaces import Box, Text
from coplay.core.types import EnvSpec

Status = Literal["complete", "truncated", "failed"]
STATUSES: tuple[Status, ...] = ("complete", "truncated", "failed")


@dataclass(frozen=True)
class Turn:
    """Whose move it is, what that player sees, and its legal moves where the game lists them."""

    player: int
    observation: str
    legal: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Step:
    """What one reply did: the next turn (None once the game is over), whether the reply
    was an invalid move, and the game's information (the same keys at every step)."""

    turn: Turn | None
    invalid: bool
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """A finished game: `rewards` `[N]` (NaN unless complete), invalid moves per player `[N]`."""

    rewards: np.ndarray
    invalid: np.ndarray
    status: Status
    reason: str = ""
    turns: int = 0


class HostTextGame(abc.ABC):
    """One copy of a free-text game (see the module's doc for the contract)."""

    num_players: int

    @abc.abstractmethod
    def reset(self, seed: int) -> Turn:
        """Start a new game from `seed`; the first player's turn."""

    @abc.abstractmethod
    def step(self, reply: str) -> Step:
        """The player to move says `reply`."""

    @abc.abstractmethod
    def outcome(self) -> Outcome:
        """The game's result once `step` returned no next turn."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class HostTextEnv:
    """A registered free-text game: `spec` for the run loop and the learners'
    capability checks, `game()` for fresh copies. Not a compiled environment: it has
    no `reset`/`step` of JAX arrays. A player's observation is everything it has been shown
    (`views_are_states`: equal observations are equal information states, GiGPO's anchors)."""

    views_are_states = True

    def __init__(self, name: str, num_players: int, max_turns: int, roles: tuple[str, ...] = ()):
        self.num_players, self.max_turns = num_players, max_turns
        text = Text()
        self.spec = EnvSpec(name=name, num_agents=num_players, obs_space=text, action_space=text,
                            global_state_space=Box(0.0, 0.0, (1,)), max_steps=max_turns, turn_based=True,
                            teams=tuple(range(num_players)), roles=roles or tuple(f"player_{i}" for i in
                                                                                   range(num_players)))

    def game(self) -> HostTextGame:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass


def check_game(game: HostTextGame, replies: Any, seed: int = 0, max_turns: int = 200) -> Outcome:
    """Play one game of `game` with `replies(turn, rng) -> str` and check the contract at
    every step, raising `HostEnvError` naming what broke: the player in range, the legal
    moves a tuple of strings (or None), the step's info keys the first step's, the
    invalid flag a bool, the outcome's shapes and status. Returns the outcome."""
    rng = np.random.default_rng(seed)
    turn: Turn | None = game.reset(seed)
    keys: set[str] | None = None
    n = game.num_players
    count = 0
    while turn is not None:
        if not 0 <= turn.player < n:
            raise HostEnvError(f"turn {count}: player {turn.player} is not one of the {n} players")
        if not isinstance(turn.observation, str):
            raise HostEnvError(f"turn {count}: the observation is {type(turn.observation).__name__}, not text")
        if turn.legal is not None and not (isinstance(turn.legal, tuple)
                                           and all(isinstance(m, str) for m in turn.legal)):
            raise HostEnvError(f"turn {count}: legal moves {turn.legal!r} are not a tuple of strings")
        step = game.step(replies(turn, rng))
        if not isinstance(step.invalid, bool):
            raise HostEnvError(f"turn {count}: invalid={step.invalid!r} is not a bool")
        if keys is None:
            keys = set(step.info)
        elif set(step.info) != keys:
            raise HostEnvError(f"turn {count}: info keys {sorted(step.info)} differ from the first step's "
                               f"{sorted(keys)}")
        turn, count = step.turn, count + 1
        if count > max_turns:
            raise HostEnvError(f"the game did not end within {max_turns} replies")
    out = game.outcome()
    if out.rewards.shape != (n,) or out.invalid.shape != (n,):
        raise HostEnvError(f"outcome shapes {out.rewards.shape}, {out.invalid.shape} are not ({n},)")
    if out.status not in STATUSES:
        raise HostEnvError(f"outcome status {out.status!r} is not one of {', '.join(STATUSES)}")
    if out.status == "complete" and not np.isfinite(out.rewards).all():
        raise HostEnvError(f"a complete game's rewards {out.rewards} are not finite")
    return out


__all__ = ["STATUSES", "HostTextEnv", "HostTextGame", "Outcome", "Status", "Step", "Turn", "check_game"]
