"""Any turn-based coplay game played in words: `coplay.make("text:tic_tac_toe")`.

`TextGame` wraps a game whose moves have names and whose states can be written
out as each player's view in the shared vocabulary (`text_views`), and turns it
into a text environment: each agent reads its view as token ids and answers
with an utterance, which is parsed into the move it names and played in the
game underneath. Rewards, `done`, `active` and the game's own `info` pass
through unchanged.

    obs           [N, L] int32  token ids of each player's view, `<pad>` after it
    action        [N, T] int32  each player's utterance (only the mover's is read)
    active        [N] bool      the player to move (the game's)
    action_mask   [N, 0]        (utterances are not masked)
    reward        [N]           the game's
    info          invalid_utterance [N] bool: the mover's utterance named no legal move
                  (and the game's own entries: illegal_action, win)

With `opening=k` each episode starts from a position reached by 0 to k uniformly
random legal moves (how many: drawn uniformly as well; never a move that ends the
game): varied starts for self-play, which from one empty board can settle on one
line of play.

An utterance that names no legal move forfeits the game (`invalid="forfeit"`,
the default, as in SPIRAL): the game receives an illegal move and ends as its
rules say for one (the speaker loses). With `invalid="random"` a uniformly
random legal move is played instead. Either way `info["invalid_utterance"]`
counts it.

Two families use it: the exact trees (`text:kuhn_poker`, `text:leduc_holdem`,
`coplay.envs.text.tree_games`) and pgx's boards (`coplay.interop.pgx`).

A text policy also plays in the game underneath, beside policies and bots
built for it (`coplay.envs.text.scoring.speaker`): it reads the views that
`text_views` writes from the game's state, and the moves its utterances name
are played (an utterance that names none, an illegal move).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError, unknown_name
from coplay.core.spaces import Box, MultiDiscrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.text.base import TextEnv, move_table
from coplay.envs.text.vocab import PAD, VOCAB, spoken

INVALID_OUTCOMES = ("forfeit", "random")


def parse(utterance: jax.Array, moves: jax.Array) -> jax.Array:
    """The index of the move `utterance [T]` names, or -1: the tokens up to the first
    `<end>` (all T where there is none) must equal a row of `moves [A, T]` (each
    move's tokens, `<end>`, then `<pad>`)."""
    said = jnp.where(spoken(utterance), utterance, PAD)
    match = jnp.all(said[None, :] == moves, axis=-1)
    return jnp.where(match.any(), jnp.argmax(match), -1)


def read_move(utterance: jax.Array, moves: jax.Array, legal: jax.Array, live: jax.Array, invalid: str,
              key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The move a speaker's `utterance [T]` names among `moves [A, T]`, `legal [A]` now:
    `(move, invalid, forfeit)`. `invalid`: the game is `live` and the utterance names no
    legal move. With `invalid="random"` a uniformly random legal move replaces it (no
    forfeit); with `"forfeit"` the move stays as named (-1 where none is) and
    `forfeit = invalid`."""
    move = parse(utterance, moves)
    bad = live & ((move < 0) | ~legal[jnp.clip(move, 0)])
    if invalid == "random":
        move = jnp.where(bad, jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf)), move)
        return move, bad, jnp.zeros_like(bad)
    return move, bad, bad


def check_invalid(invalid: str) -> None:
    if invalid not in INVALID_OUTCOMES:
        raise unknown_name("invalid-utterance outcome", invalid, INVALID_OUTCOMES)


@struct.dataclass
class TextGameState:
    game: Any            # the game's own state
    active: jax.Array    # [N] bool the player to move (the game's last TimeStep)
    legal: jax.Array     # [N, A] bool the game's action mask
    obs: Any             # [N, ...] the game's own observations (what a scripted bot of the game reads)


class TextGame(TextEnv):
    """A turn-based game in words (see the module's doc). Subclasses give `text_views`."""

    views_are_states = True

    def __init__(self, game: Env, move_texts: Sequence[str], view_length: int, name: str,
                 max_tokens: int, invalid: str, opening: int = 0):
        check_invalid(invalid)
        if isinstance(opening, bool) or not isinstance(opening, int) or opening < 0:
            raise ConfigError(f"opening={opening!r} is out of range; it must be an integer >= 0 (the most random "
                              "moves played before the players take over)")
        self.opening = opening
        if not game.spec.turn_based:
            raise ConfigError(f"{game.spec.name!r} is not turn-based; a text game reads one mover's utterance")
        self.game, self.vocab, self.invalid = game, VOCAB, invalid
        self.move_texts = tuple(move_texts)
        self._moves = move_table(self.move_texts, max_tokens, name)
        n, v = game.spec.num_agents, len(VOCAB)
        self.spec = EnvSpec(
            name=name, num_agents=n, obs_space=MultiDiscrete((v,) * view_length),
            action_space=MultiDiscrete((v,) * max_tokens),
            global_state_space=Box(0.0, float(v - 1), (n * view_length,)), max_steps=game.spec.max_steps,
            teams=game.spec.teams, roles=game.spec.roles, turn_based=True, render_text=self.render_text,
        )

    def text_views(self, game_state: Any) -> jax.Array:
        """`[N, L]` token ids of each player's view of the game's state."""
        raise NotImplementedError

    def move_of(self, utterances: jax.Array) -> jax.Array:
        """`[..., T]` utterances -> `[...]` int32 the move each names (-1: none)."""
        flat = utterances.reshape(-1, utterances.shape[-1])
        return jax.vmap(parse, in_axes=(0, None))(flat, self._moves).reshape(utterances.shape[:-1])

    def utterance_of(self, moves: jax.Array) -> jax.Array:
        """`[...]` move indices -> `[..., T]` the utterance that names each (the move's
        words, `<end>`, `<pad>`): how a scripted player of the game speaks."""
        return self._moves[moves]

    def _timestep(self, state: TextGameState, ts: TimeStep, invalid: jax.Array) -> TimeStep:
        views = self.text_views(state.game)
        n = self.spec.num_agents
        return ts.replace(  # type: ignore[attr-defined]  # flax struct.dataclass adds replace
            obs=views, global_state=views.reshape(-1).astype(jnp.float32), action_mask=jnp.ones((n, 0), bool),
            info={**ts.info, "invalid_utterance": invalid})

    def _reset(self, key):
        if self.opening:
            key, k_open = jax.random.split(key)
        game, ts = self.game.reset(key)
        if self.opening:
            game, ts = self._open(game, ts, k_open)
        state = TextGameState(game, ts.active, ts.action_mask, ts.obs)
        return state, self._timestep(state, ts, jnp.zeros(self.spec.num_agents, bool))

    def _open(self, game: Any, ts: TimeStep, key: jax.Array) -> tuple[Any, TimeStep]:
        """Play 0 to `opening` uniformly random legal moves (how many: uniform too), never
        one that would end the game: the players take over from the position reached."""
        n = self.spec.num_agents
        count = jax.random.randint(jax.random.fold_in(key, self.opening), (), 0, self.opening + 1)
        for i in range(self.opening):
            k_move, k_step = jax.random.split(jax.random.fold_in(key, i))
            mover = jnp.argmax(ts.active)
            move = jax.random.categorical(k_move, jnp.where(ts.action_mask[mover], 0.0, -jnp.inf))
            after, ts_after = self.game.step(game, jnp.full(n, move, jnp.int32), k_step)
            keep = (i < count) & ~ts_after.done
            game, ts = jax.tree.map(lambda a, b, keep=keep: jnp.where(keep, a, b), (after, ts_after), (game, ts))
        return game, ts.replace(reward=jnp.zeros_like(ts.reward))  # type: ignore[attr-defined]

    def _step(self, state: TextGameState, actions, key):
        n = self.spec.num_agents
        mover = jnp.argmax(state.active)
        k_move, k_step = jax.random.split(key)
        # a forfeit plays the move as named (-1 where none is): an illegal move, the game's forfeit
        move, invalid, _ = read_move(jnp.asarray(actions)[mover], self._moves, state.legal[mover],
                                     state.active.any(), self.invalid, k_move)
        game, ts = self.game.step(state.game, jnp.full(n, move, jnp.int32), k_step)
        new = TextGameState(game, ts.active, ts.action_mask, ts.obs)
        return new, self._timestep(new, ts, jax.nn.one_hot(mover, n, dtype=bool) & invalid)

    def move_mask(self, state: TextGameState) -> jax.Array:
        """The game's action mask: its moves are the rows of the move table."""
        return state.legal

    def base_state(self, state: TextGameState) -> Any:
        return self.game.base_state(state.game)

    def render_text(self, state: TextGameState, viewer: int | None = None) -> str:
        if viewer is not None:
            return self.vocab.decode(np.asarray(self.text_views(state.game)[viewer]))
        return self.game.spec.render_text(state.game) if self.game.spec.render_text else ""
