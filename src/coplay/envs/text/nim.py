"""Nim in words: `coplay.make("text:nim", piles="1,3,5")`.

Two players take turns removing stones from one pile; whoever takes the last
stone wins (normal play). Each reads its view of the piles and writes its move
as an utterance, "take <count> from <pile>" (piles numbered from 1):

    view    "nim , piles : 1 3 5 , your move"   (the other player reads "wait")
    move    "take 2 from 3 <end>"

The game has an exact solution (Bouton, 1901): the player to move wins with
perfect play exactly when the xor of the pile sizes is not 0, by moving to a
position whose xor is 0 (`winning_moves`). The first player moves first in
every game; with the default piles (1, 3, 5), xor 7, the first player wins.

    obs           [N, L] int32  each player's view, token ids of coplay's vocabulary
    action        [N, T] int32  each player's utterance (only the mover's is read)
    reward        [N]           +1 for the winner, -1 for the loser, at the end
    info          invalid_utterance [N] bool: the mover's utterance named no legal move

An utterance that names no legal move (an unknown move, or more stones than
the pile holds) forfeits the game (`invalid="forfeit"`, the default) or is
replaced by a uniformly random legal move (`invalid="random"`). Views are
states (the piles and who moves), so GiGPO's anchor states recur.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, MultiDiscrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.text.base import TextEnv, move_table
from coplay.envs.text.games import check_invalid, read_move
from coplay.envs.text.vocab import VOCAB
from coplay.envs.trees.tree import GAME_OVER, WAIT, YOUR_MOVE

MAX_PILES, MAX_STONES = 6, 10      # pile sizes are written with the vocabulary's numbers 0..10


@struct.dataclass
class NimState:
    piles: jax.Array    # [P] int32 stones left in each pile
    mover: jax.Array    # [] int32 the player to move
    done: jax.Array     # [] bool


def parse_piles(piles: str) -> tuple[int, ...]:
    """"1,3,5" -> (1, 3, 5), or a ConfigError naming the bad value and the valid ones."""
    try:
        sizes = tuple(int(p) for p in str(piles).replace(" ", "").split(","))
    except ValueError:
        sizes = ()
    if not 1 <= len(sizes) <= MAX_PILES or not all(1 <= k <= MAX_STONES for k in sizes):
        raise ConfigError(f"piles={piles!r}: give 1 to {MAX_PILES} pile sizes, each 1 to {MAX_STONES}, "
                          f"separated by commas (e.g. piles=\"1,3,5\")")
    return sizes


def winning_moves(piles: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Every (pile, count) move from `piles` that leaves a xor of 0: the moves that win
    with perfect play (empty where the position is lost, its xor being 0)."""
    total = functools.reduce(lambda a, b: a ^ b, piles, 0)
    return tuple((p, n - (n ^ total)) for p, n in enumerate(piles) if total and (n ^ total) < n)


class TextNim(TextEnv):
    """Nim played in words (see the module's doc)."""

    views_are_states = True

    def __init__(self, piles: str = "1,3,5", max_tokens: int = 5, invalid: str = "forfeit"):
        check_invalid(invalid)
        sizes = parse_piles(piles)
        self.sizes, self.invalid, self.vocab = sizes, invalid, VOCAB
        moves = [(p, c) for p, n in enumerate(sizes) for c in range(1, n + 1)]
        self._move_pile = jnp.asarray([p for p, _ in moves], jnp.int32)
        self._move_count = jnp.asarray([c for _, c in moves], jnp.int32)
        self.move_texts = tuple(f"take {c} from {p + 1}" for p, c in moves)
        self._moves = move_table(self.move_texts, max_tokens, "text:nim")
        self._numbers = jnp.asarray([VOCAB.index[str(k)] for k in range(MAX_STONES + 1)], jnp.int32)
        head = VOCAB.encode("nim , piles :")
        self._head, self._comma = jnp.asarray(head), jnp.int32(VOCAB.index[","])
        self._status = jnp.asarray(np.stack([VOCAB.encode(s, 2) for s in (YOUR_MOVE, WAIT, GAME_OVER)]))
        length = len(head) + len(sizes) + 3
        self.spec = EnvSpec(
            name="text:nim", num_agents=2, obs_space=MultiDiscrete((len(VOCAB),) * length),
            action_space=MultiDiscrete((len(VOCAB),) * max_tokens),
            global_state_space=Box(0.0, float(MAX_STONES), (len(sizes) + 1,)), max_steps=sum(sizes),
            teams=(0, 1), roles=("player_0", "player_1"), turn_based=True, render_text=self.render_text,
        )

    # ----- views ---------------------------------------------------------------------------------
    def _views(self, state: NimState) -> jax.Array:
        """[2, L]: "nim , piles : a b c , <status>" for each player."""
        status = jnp.where(state.done, 2, jnp.where(jnp.arange(2) == state.mover, 0, 1))   # [2]
        body = jnp.concatenate([self._head, self._numbers[state.piles], self._comma[None]])
        return jnp.concatenate([jnp.broadcast_to(body, (2, body.shape[0])), self._status[status]], axis=1)

    def _timestep(self, state: NimState, reward: jax.Array, invalid: jax.Array) -> TimeStep:
        return TimeStep(
            obs=self._views(state), reward=reward, done=state.done, truncated=jnp.bool_(False),
            active=(jnp.arange(2) == state.mover) & ~state.done, action_mask=jnp.ones((2, 0), bool),
            global_state=jnp.concatenate([state.piles, state.mover[None]]).astype(jnp.float32),
            info={"invalid_utterance": invalid},
        )

    def _reset(self, key):
        state = NimState(piles=jnp.asarray(self.sizes, jnp.int32), mover=jnp.int32(0), done=jnp.bool_(False))
        return state, self._timestep(state, jnp.zeros(2, jnp.float32), jnp.zeros(2, bool))

    def legal_moves(self, piles: jax.Array) -> jax.Array:
        """[A] bool: the moves (rows of the move table) that the piles allow."""
        return self._move_count <= piles[self._move_pile]

    def move_mask(self, state: NimState) -> jax.Array:
        return jnp.broadcast_to(self.legal_moves(state.piles), (2, len(self.move_texts)))

    def _step(self, state: NimState, actions, key):
        mover = state.mover
        move, invalid, forfeit = read_move(jnp.asarray(actions)[mover], self._moves, self.legal_moves(state.piles),
                                           ~state.done, self.invalid, key)
        row = jnp.clip(move, 0)                                         # a forfeit's -1 takes nothing below
        take = jnp.where(state.done | forfeit, 0, self._move_count[row])
        piles = state.piles.at[self._move_pile[row]].add(-take)
        emptied = ~state.done & ~forfeit & (piles.sum() == 0)          # the mover took the last stone
        me = jnp.arange(2) == mover
        sign = jnp.where(emptied, 1.0, jnp.where(forfeit, -1.0, 0.0))
        reward = jnp.where(me, sign, -sign).astype(jnp.float32)
        done = state.done | emptied | forfeit
        new = NimState(piles=piles, mover=jnp.where(done, mover, 1 - mover), done=done)
        return new, self._timestep(new, reward, me & invalid)

    def render_text(self, state: NimState, viewer: int | None = None) -> str:
        if viewer is not None:
            return self.vocab.decode(np.asarray(self._views(state)[viewer]))
        piles = " ".join(str(int(k)) for k in np.asarray(state.piles))
        turn = GAME_OVER if bool(state.done) else f"player {int(state.mover)} to move"
        return f"nim, piles: {piles}; {turn}"


ENVS.register("text:nim", TextNim, kind="competitive",
              description="Nim in words: 'take <count> from <pile>'; the xor rule is its exact solution")
