"""Games of coplay's exact trees played in words: `coplay.make("text:kuhn_poker")`.

Each agent reads its view of the game as token ids of the shared vocabulary
(`coplay.envs.text.vocab.VOCAB`) and answers with an utterance: up to
`max_tokens` token ids, stopped early by `<end>`. The utterance is parsed into
a move by its words: "pass", "bet" in Kuhn poker; "fold", "call", "raise" in
Leduc hold'em. The views are the game's information states, written out
(`Rules.text_view`), so a text policy's probability of each move's utterance
at every information set is a strategy the tree scores exactly.

    obs           [N, L] int32  token ids of each player's view, `<pad>` after it
    action        [N, T] int32  each player's utterance (only the mover's is read)
    active        [N] bool      the player to move
    action_mask   [N, 0]        (utterances are not masked)
    reward        [N]           as the tree game: player 0's payoff and its opposite
    info          invalid_utterance [N] bool: the mover's utterance named no legal move
                  (and the tree game's illegal_action and win)

An utterance that names no legal move (`invalid="forfeit"`, the default, as in
SPIRAL) forfeits the game: the speaker pays the game's largest stake. With
`invalid="random"` a uniformly random legal move is played instead. Either way
`info["invalid_utterance"]` counts it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.errors import ConfigError, unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, MultiDiscrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.text.base import TextEnv
from coplay.envs.text.vocab import PAD, VOCAB, spoken
from coplay.envs.trees import tree_names
from coplay.envs.trees.env import TERMINAL, TreeGameEnv, TreeState
from coplay.envs.trees.tree import CHANCE, GAME_OVER, WAIT, YOUR_MOVE

INVALID_OUTCOMES = ("forfeit", "random")


@struct.dataclass
class TextTreeState:
    game: TreeState


def parse(utterance: jax.Array, moves: jax.Array) -> jax.Array:
    """The index of the move `utterance [T]` names, or -1: the tokens up to the first
    `<end>` (all T where there is none) must equal a row of `moves [A, T]` (each
    move's tokens, `<end>`, then `<pad>`)."""
    said = jnp.where(spoken(utterance), utterance, PAD)
    match = jnp.all(said[None, :] == moves, axis=-1)
    return jnp.where(match.any(), jnp.argmax(match), -1)


def _ended(view: str) -> str:
    """A view whose closing status ("your move", "wait") becomes "game over"."""
    for status in (YOUR_MOVE, WAIT):
        if view.endswith(status):
            return view[: len(view) - len(status)] + GAME_OVER
    return view


class TextTreeGame(TextEnv):
    """`tree:<name>` with observations and actions in words (see the module's doc)."""

    views_are_states = True    # a view is its reader's information state

    def __init__(self, name: str = "kuhn_poker", max_tokens: int = 3, invalid: str = "forfeit"):
        if invalid not in INVALID_OUTCOMES:
            raise unknown_name("invalid-utterance outcome", invalid, INVALID_OUTCOMES)
        vocab = VOCAB
        game = TreeGameEnv(name)
        rules, nodes = game.rules, game._nodes
        first = next(h for n, h in enumerate(nodes.histories) if nodes.player[n] != CHANCE)
        if rules.text_view(first, 0) is None:
            raise ConfigError(f"game {name!r} has no text rendering (Rules.text_view), so it cannot be a "
                              "text environment")
        moves = [vocab.encode(a) for a in rules.action_names]
        longest = max(len(m) for m in moves)
        if max_tokens < longest:
            raise ConfigError(f"max_tokens={max_tokens} is shorter than the longest move "
                              f"({longest} tokens: {rules.action_names})")
        self.game, self.vocab, self.invalid = game, vocab, invalid
        self.move_texts = tuple(rules.action_names)
        # The view of every node (decisions and ends) for each player, computed once.
        texts = [[(rules.text_view(h, p) or "") if nodes.player[n] != CHANCE else "" for p in (0, 1)]
                 for n, h in enumerate(nodes.histories)]
        # ... and as it reads once a forfeit has ended the game at that node.
        over = [[_ended(t) for t in pair] for pair in texts]
        vocab.check([t for pair in texts + over for t in pair], f"text:{name}")
        length = max(len(t.split()) for pair in texts + over for t in pair)
        self._views = jnp.asarray(np.stack([[vocab.encode(t, length) for t in pair] for pair in texts]))
        self._forfeit_views = jnp.asarray(np.stack([[vocab.encode(t, length) for t in pair] for pair in over]))
        self._moves = jnp.asarray(np.stack([vocab.encode(a, max_tokens, end=len(m) < max_tokens)
                                            for a, m in zip(rules.action_names, moves)]))
        self.spec = EnvSpec(
            name=f"text:{name}", num_agents=2,
            obs_space=MultiDiscrete((len(vocab),) * length), action_space=MultiDiscrete((len(vocab),) * max_tokens),
            global_state_space=Box(0.0, float(len(vocab) - 1), (2 * length,)), max_steps=game.spec.max_steps,
            teams=game.spec.teams, roles=game.spec.roles, turn_based=True, render_text=self.render_text,
        )

    def _timestep(self, state: TextTreeState, ts: TimeStep, invalid: jax.Array) -> TimeStep:
        views = jnp.where(state.game.forfeit >= 0, self._forfeit_views[state.game.node], self._views[state.game.node])
        return ts.replace(  # type: ignore[attr-defined]  # flax struct.dataclass adds replace
            obs=views, global_state=views.reshape(-1).astype(jnp.float32), action_mask=jnp.ones((2, 0), bool),
            info={**ts.info, "invalid_utterance": invalid})

    def _reset(self, key):
        game, ts = self.game.reset(key)
        state = TextTreeState(game)
        return state, self._timestep(state, ts, jnp.zeros(2, bool))

    def _step(self, state: TextTreeState, actions, key):
        node = state.game.node
        mover = jnp.clip(self.game._player[node], 0, 1)
        moving = (self.game._player[node] != TERMINAL) & (state.game.forfeit < 0)
        move = parse(jnp.asarray(actions)[mover], self._moves)
        legal = self.game._children[node] >= 0
        invalid = moving & ((move < 0) | ~legal[jnp.clip(move, 0)])
        k_move, k_step = jax.random.split(key)
        if self.invalid == "random":
            move = jnp.where(invalid, jax.random.categorical(k_move, jnp.where(legal, 0.0, -jnp.inf)), move)
        else:
            move = jnp.where(invalid, -1, move)         # the tree game's forfeit
        game, ts = self.game.step(state.game, jnp.full(2, move, jnp.int32), k_step)
        new = TextTreeState(game)
        return new, self._timestep(new, ts, jax.nn.one_hot(mover, 2, dtype=bool) & invalid)

    def infoset_views(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Every information set of the game's tree as its owner reads it:
        `(views [I, L] token ids, owner [I], move utterances [A, T])`, in the tree's
        information-set order, so that a text policy's probability of each move's
        utterance at each view is a strategy the tree scores exactly."""
        nodes, tree = self.game._nodes, self.game.tree
        index = {k: i for i, k in enumerate(tree.infoset_keys)}
        rows = np.zeros(len(index), np.int64)
        for n, h in enumerate(nodes.histories):
            mover = int(nodes.player[n])
            if mover in (0, 1):
                rows[index[self.game.rules.infoset_key(h)]] = n
        owner = np.asarray(tree.infoset_player)
        return self._views[jnp.asarray(rows), jnp.asarray(owner)], jnp.asarray(owner), self._moves

    def base_state(self, state: TextTreeState) -> TreeState:
        return state.game

    def render_text(self, state: TextTreeState, viewer: int | None = None) -> str:
        if viewer is not None:
            forfeited = int(np.asarray(state.game.forfeit)) >= 0
            views = self._forfeit_views if forfeited else self._views
            return self.vocab.decode(np.asarray(views[int(np.asarray(state.game.node)), viewer]))
        return self.game.render_text(state.game)


ENVS.register_prefix(
    "text", TextTreeGame, kind="competitive",
    description="a game played in words: views as token ids of coplay's vocabulary, moves as utterances "
                "(kuhn_poker, leduc_holdem, scored exactly through their trees)",
    choices=tree_names,
)
