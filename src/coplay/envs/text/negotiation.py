"""Negotiation in words: `coplay.make("text:negotiation", max_turns=6)`.

Two players divide a pool of items of up to three types (books, hats, balls).
Each episode draws, from its key, how many items of each type there are
(`min_count` to `max_count` each) and, for each player separately, a private
value per item type: a vector of integers >= 0 whose value for the whole pool
is exactly `total` (10 by default), drawn uniformly among all such vectors for
the drawn counts (count vectors for which no such vector exists are never
drawn). A player sees the counts and its own values, never the other's.

The players take turns, player 0 first, for at most `max_turns` turns. On its
turn a player either proposes a split, naming how many of each type it keeps
(the other gets the rest), or accepts the other's standing proposal (the one
made on the turn before; there is none on the first turn):

    view    "negotiation , items : 1 2 3 , my values : 3 2 1 , turn 3 of 6 ,
             i propose 1 2 3 , they propose 1 0 2 , your move"
            (the other player reads the same proposals as "they ... , i ...", then "wait")
    moves   "propose 1 2 0 <end>"   I keep 1 book, 2 hats, 0 balls; you get the rest
            "accept <end>"          the standing proposal is the deal

A view lists every proposal so far, so it is its reader's information state
(`views_are_states`). Once the game is over a view ends with how:
"i accept , game over", "they accept , game over", "no deal , game over",
"i forfeited , game over" or "they forfeited , game over".

    obs           [N, L] int32  each player's view, token ids of coplay's vocabulary
    action        [N, T] int32  each player's utterance (only the mover's is read)
    reward        [N]           at the end (see below), 0 before
    info          invalid_utterance [N] bool: the mover's utterance named no legal move
                  deal [] bool: a proposal was accepted on this step

Rewards (`reward="general"`, the default, general-sum): on an accepted
proposal each player gets the value, under its own values, of the items it
ends with; when `max_turns` turns pass without an accept (the last turn's
proposal can no longer be accepted) both get `no_deal` (0 by default). With
`reward="zero_sum"` each gets its general reward minus the other's, so the two
always sum to 0 (and no deal gives both 0).

An utterance that names no move of the table, accepts when there is no
standing proposal, or keeps more items than there are, forfeits
(`invalid="forfeit"`, the default): the game ends without a deal, the speaker
gets -1 and the other `no_deal` (zero_sum: -1 - no_deal and its opposite). With
`invalid="random"` a uniformly random legal move is played instead. Either way
`info["invalid_utterance"]` counts it. An episode ends by its `max_turns`-th
turn at the latest, as a rule of the game (`done`, not `truncated`).

The most value the two can make together is sum_i count_i * max(v0_i, v1_i),
reached by giving each type wholly to a player who values it most
(`best_split`).
"""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.compile import jit
from coplay.core.errors import ConfigError, unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, MultiDiscrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.text.base import TextEnv, move_table
from coplay.envs.text.games import check_invalid, read_move
from coplay.envs.text.vocab import PAD, VOCAB
from coplay.envs.trees.tree import GAME_OVER, WAIT, YOUR_MOVE

ITEM_NAMES = ("books", "hats", "balls")
REWARD_MODES = ("general", "zero_sum")
MAX_COUNT, MAX_TOTAL, MAX_TURNS = 6, 20, 20     # written with the vocabulary's numbers 0..20
FORFEIT = -1.0
PLAYING, DEAL, NO_DEAL, FORFEITED = 0, 1, 2, 3  # NegotiationState.outcome

# The closing words of a view, by outcome (PLAYING, DEAL, NO_DEAL, FORFEITED) and by whether
# its reader moves now, or made the last move (first), or not (second).
_STATUS = ((YOUR_MOVE, WAIT), (f"i accept , {GAME_OVER}", f"they accept , {GAME_OVER}"),
           (f"no deal , {GAME_OVER}",) * 2, (f"i forfeited , {GAME_OVER}", f"they forfeited , {GAME_OVER}"))
_STATUS_LEN = max(len(s.split()) for pair in _STATUS for s in pair)


@struct.dataclass
class NegotiationState:
    counts: jax.Array     # [K] int32 items of each type in the pool
    values: jax.Array     # [2, K] int32 each player's private value per item
    history: jax.Array    # [max_turns, K] int32 each proposal so far: what its proposer keeps
    offers: jax.Array     # [] int32 proposals made so far (proposal i was made by player i % 2)
    outcome: jax.Array    # [] int32 PLAYING, DEAL, NO_DEAL or FORFEITED

    @property
    def mover(self) -> jax.Array:
        """The player to move (once the game is over: who made the last move)."""
        return self.offers % 2

    @property
    def done(self) -> jax.Array:
        return self.outcome != PLAYING


def value_vectors(counts: tuple[int, ...], total: int) -> np.ndarray:
    """`[M, K]` every vector of integer values >= 0 with `values . counts == total`, in
    lexicographic order (M may be 0)."""
    grid = np.asarray(list(itertools.product(range(total + 1), repeat=len(counts))), np.int64)
    return grid[grid @ np.asarray(counts, np.int64) == total].astype(np.int32)


def best_split(counts, values0, values1) -> tuple[int, tuple[int, ...]]:
    """The most value the two players can make together from the pool, and a split
    reaching it, as what player 0 keeps: each item type goes wholly to the player who
    values it more (to player 0 on ties)."""
    counts, v0, v1 = (np.asarray(x, np.int64) for x in (counts, values0, values1))
    keep0 = np.where(v0 >= v1, counts, 0)
    return int((counts * np.maximum(v0, v1)).sum()), tuple(int(k) for k in keep0)


class TextNegotiation(TextEnv):
    """Two players split a pool of items by proposals and accepts (see the module's doc)."""

    views_are_states = True    # a view holds the counts, its reader's values and every proposal so far

    def __init__(self, types: int = 3, min_count: int = 1, max_count: int = 4, total: int = 10,
                 max_turns: int = 6, reward: str = "general", no_deal: float = 0.0, invalid: str = "forfeit",
                 max_tokens: int = 5):
        check_invalid(invalid)
        if reward not in REWARD_MODES:
            raise unknown_name("reward mode", reward, REWARD_MODES)
        if not 1 <= types <= len(ITEM_NAMES):
            raise ConfigError(f"types={types}: give 1 to {len(ITEM_NAMES)} item types ({', '.join(ITEM_NAMES)})")
        if not 1 <= min_count <= max_count <= MAX_COUNT:
            raise ConfigError(f"min_count={min_count}, max_count={max_count}: item counts need "
                              f"1 <= min_count <= max_count <= {MAX_COUNT}")
        if not 1 <= total <= MAX_TOTAL:
            raise ConfigError(f"total={total}: a player's value of the whole pool must be 1 to {MAX_TOTAL}")
        if not 2 <= max_turns <= MAX_TURNS:
            raise ConfigError(f"max_turns={max_turns}: give 2 to {MAX_TURNS} turns (one to propose, one to accept)")
        if not (math.isfinite(no_deal) and no_deal > FORFEIT):
            raise ConfigError(f"no_deal={no_deal}: the no-deal reward must be a finite number above the "
                              f"forfeit's {FORFEIT}")
        # The count vectors that some value vector prices at `total`, and those value vectors.
        pools = list(itertools.product(range(min_count, max_count + 1), repeat=types))
        tables = [value_vectors(c, total) for c in pools]
        reachable = [i for i, t in enumerate(tables) if len(t)]
        if not reachable:
            raise ConfigError(f"total={total}: no item counts from {min_count} to {max_count} can be valued at "
                              f"exactly {total}; choose another total or counts")
        width = max(len(tables[i]) for i in reachable)
        self._pools = jnp.asarray([pools[i] for i in reachable], jnp.int32)                          # [P, K]
        self._num_values = jnp.asarray([len(tables[i]) for i in reachable], jnp.int32)               # [P]
        self._values = jnp.asarray(np.stack([np.pad(tables[i], ((0, width - len(tables[i])), (0, 0)))
                                             for i in reachable]))                                    # [P, M, K]
        self.types, self.max_count, self.total, self.max_turns = types, max_count, total, max_turns
        self.reward_mode, self.no_deal, self.invalid, self.vocab = reward, float(no_deal), invalid, VOCAB

        # The move table: every proposal a pool of up to max_count items allows, then "accept".
        keeps = list(itertools.product(range(max_count + 1), repeat=types))
        self.move_texts = tuple(f"propose {' '.join(map(str, k))}" for k in keeps) + ("accept",)
        self._keeps = jnp.asarray(keeps, jnp.int32)                                                  # [A-1, K]
        self._accept = len(keeps)
        self._moves = move_table(self.move_texts, max_tokens, "text:negotiation")

        # Pieces of the views.
        word = VOCAB.index
        self._numbers = jnp.asarray([word[str(k)] for k in range(MAX_TOTAL + 1)], jnp.int32)
        self._head = jnp.asarray(VOCAB.encode("negotiation , items :"))
        self._mine = jnp.asarray(VOCAB.encode(", my values :"))
        self._turn = jnp.asarray(VOCAB.encode(", turn"))
        self._of = jnp.asarray(VOCAB.encode("of"))
        self._who = jnp.asarray([word["i"], word["they"]], jnp.int32)
        self._propose, self._comma = jnp.int32(word["propose"]), jnp.int32(word[","])
        self._status = jnp.asarray(np.stack([[VOCAB.encode(s, _STATUS_LEN) for s in pair] for pair in _STATUS]))
        length = (len(self._head) + types + len(self._mine) + types + len(self._turn) + 4
                  + max_turns * (types + 3) + _STATUS_LEN)
        self._length = length
        self.spec = EnvSpec(
            name="text:negotiation", num_agents=2, obs_space=MultiDiscrete((len(VOCAB),) * length),
            action_space=MultiDiscrete((len(VOCAB),) * max_tokens),
            global_state_space=Box(0.0, float(max(total, max_count, max_turns, FORFEITED)), (4 * types + 3,)),
            max_steps=max_turns, teams=(0, 1), roles=("player_0", "player_1"), turn_based=True,
            render_text=self.render_text,
        )

    # ----- views ---------------------------------------------------------------------------------
    def _views(self, state: NegotiationState) -> jax.Array:
        """[2, L]: each player's view; its pieces are laid out with gaps, then packed to the left."""
        num, turns, readers = self._numbers, self.max_turns, jnp.arange(2)[:, None]
        turn = jnp.minimum(state.offers + 1, turns)
        fixed = lambda *ids: jnp.broadcast_to(jnp.concatenate(ids), (2, sum(len(i) for i in ids)))  # noqa: E731
        head = jnp.concatenate([fixed(self._head, num[state.counts], self._mine), num[state.values],
                                fixed(self._turn, num[turn][None], self._of, num[turns][None], self._comma[None])],
                               axis=1)
        rows = jnp.arange(turns)
        who = self._who[(rows % 2 != readers).astype(jnp.int32)]                              # [2, max_turns]
        said = jnp.concatenate([who[:, :, None], jnp.broadcast_to(jnp.concatenate(
            [jnp.full((turns, 1), self._propose), num[state.history], jnp.full((turns, 1), self._comma)], axis=1),
            (2, turns, self.types + 2))], axis=2)                                             # [2, max_turns, K + 3]
        said = jnp.where((rows < state.offers)[None, :, None], said, PAD).reshape(2, -1)
        mine = state.mover == readers[:, 0]        # the reader moves now (or made the last move)
        tokens = jnp.concatenate([head, said, self._status[state.outcome, (~mine).astype(jnp.int32)]], axis=1)
        return jnp.take_along_axis(tokens, jnp.argsort(tokens == PAD, axis=1, stable=True), axis=1)

    def _timestep(self, state: NegotiationState, reward: jax.Array, invalid: jax.Array,
                  deal: jax.Array) -> TimeStep:
        standing = jnp.where(state.offers > 0, state.history[jnp.maximum(state.offers - 1, 0)], 0)
        gs = jnp.concatenate([state.counts, state.values.reshape(-1), standing,
                              jnp.stack([state.offers, state.mover, state.outcome])])
        return TimeStep(
            obs=self._views(state), reward=reward, done=state.done,
            truncated=jnp.bool_(False), active=(jnp.arange(2) == state.mover) & ~state.done,
            action_mask=jnp.ones((2, 0), bool), global_state=gs.astype(jnp.float32),
            info={"invalid_utterance": invalid, "deal": deal},
        )

    def _reset(self, key):
        k_pool, k_values = jax.random.split(key)
        pool = jax.random.randint(k_pool, (), 0, self._pools.shape[0])
        rows = jax.random.randint(k_values, (2,), 0, self._num_values[pool])     # each player's own draw
        state = NegotiationState(
            counts=self._pools[pool], values=self._values[pool, rows],
            history=jnp.zeros((self.max_turns, self.types), jnp.int32), offers=jnp.int32(0),
            outcome=jnp.int32(PLAYING))
        return state, self._timestep(state, jnp.zeros(2, jnp.float32), jnp.zeros(2, bool), jnp.bool_(False))

    def legal_moves(self, state: NegotiationState) -> jax.Array:
        """[A] bool: the moves (rows of the move table) that are legal now: proposals that
        keep no more than the pool holds, and "accept" once there is a standing proposal."""
        fits = jnp.all(self._keeps <= state.counts, axis=1)
        return jnp.concatenate([fits, (state.offers > 0)[None]])

    def move_mask(self, state: NegotiationState) -> jax.Array:
        return jnp.broadcast_to(self.legal_moves(state), (2, len(self.move_texts)))

    def _step(self, state: NegotiationState, actions, key):
        playing, mover = ~state.done, state.mover
        move, invalid, forfeit = read_move(jnp.asarray(actions)[mover], self._moves, self.legal_moves(state),
                                           playing, self.invalid, key)
        accept = playing & ~forfeit & (move == self._accept)
        propose = playing & ~forfeit & ~accept
        keep = self._keeps[jnp.clip(move, 0, self._accept - 1)]
        slot = jnp.minimum(state.offers, self.max_turns - 1)
        history = jnp.where(propose, state.history.at[slot].set(keep), state.history)
        offers = state.offers + propose.astype(jnp.int32)
        no_deal = propose & (offers == self.max_turns)
        outcome = jnp.select([~playing, accept, forfeit, no_deal],
                             [state.outcome, jnp.int32(DEAL), jnp.int32(FORFEITED), jnp.int32(NO_DEAL)],
                             jnp.int32(PLAYING))

        me = jnp.arange(2) == mover
        deal = state.history[jnp.maximum(state.offers - 1, 0)]                   # kept by the other (the proposer)
        kept = jnp.where(me[:, None], state.counts - deal, deal)                 # [2, K] what each ends with
        gains = (kept * state.values).sum(1).astype(jnp.float32)
        reward = jnp.select([accept, forfeit, no_deal],
                            [gains, jnp.where(me, FORFEIT, self.no_deal), jnp.full(2, self.no_deal)],
                            jnp.zeros(2)).astype(jnp.float32)
        if self.reward_mode == "zero_sum":
            reward = reward - reward[::-1]
        new = NegotiationState(counts=state.counts, values=state.values, history=history, offers=offers,
                               outcome=outcome)
        return new, self._timestep(new, reward, me & invalid, accept)

    def render_text(self, state: NegotiationState, viewer: int | None = None) -> str:
        if viewer is not None:
            return self.vocab.decode(np.asarray(_compiled_views(self, state)[viewer]))
        counts, values = np.asarray(state.counts), np.asarray(state.values)
        items = ", ".join(f"{int(c)} {name}" for c, name in zip(counts, ITEM_NAMES))
        lines = [f"negotiation: {items}; values: player 0 {values[0].tolist()}, player 1 {values[1].tolist()}"]
        history = np.asarray(state.history)
        lines += [f"player {i % 2} proposes to keep {history[i].tolist()}" for i in range(int(state.offers))]
        outcome, mover = int(state.outcome), int(state.mover)
        lines.append({PLAYING: f"player {mover} to move", DEAL: f"player {mover} accepts; {GAME_OVER}",
                      NO_DEAL: f"no deal; {GAME_OVER}", FORFEITED: f"player {mover} forfeits; {GAME_OVER}"}[outcome])
        return "\n".join(lines)


@functools.partial(jit, static_argnums=0)
def _compiled_views(env: TextNegotiation, state: NegotiationState) -> jax.Array:
    """`env._views`, compiled once per environment (render_text runs on the host)."""
    return env._views(state)


ENVS.register("text:negotiation", TextNegotiation, kind="mixed",
              description="Deal-or-no-deal style bargaining in words: private item values, 'propose <keep...>' "
                          "or 'accept'; general-sum or zero-sum")
