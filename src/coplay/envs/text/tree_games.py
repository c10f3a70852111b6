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

from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.envs.text.games import INVALID_OUTCOMES, TextGame, check_invalid, parse
from coplay.envs.text.vocab import VOCAB
from coplay.envs.trees import tree_names
from coplay.envs.trees.env import TreeGameEnv, TreeState
from coplay.envs.trees.tree import CHANCE, GAME_OVER, WAIT, YOUR_MOVE

__all__ = ["INVALID_OUTCOMES", "TextTreeGame", "parse"]


def _ended(view: str) -> str:
    """A view whose closing status ("your move", "wait") becomes "game over"."""
    for status in (YOUR_MOVE, WAIT):
        if view.endswith(status):
            return view[: len(view) - len(status)] + GAME_OVER
    return view


class TextTreeGame(TextGame):
    """`tree:<name>` with observations and actions in words (see the module's doc)."""

    game: TreeGameEnv

    def __init__(self, name: str = "kuhn_poker", max_tokens: int = 3, invalid: str = "forfeit"):
        check_invalid(invalid)
        game = TreeGameEnv(name)
        rules, nodes = game.rules, game._nodes
        first = next(h for n, h in enumerate(nodes.histories) if nodes.player[n] != CHANCE)
        if rules.text_view(first, 0) is None:
            raise ConfigError(f"game {name!r} has no text rendering (Rules.text_view), so it cannot be a "
                              "text environment")
        # The view of every node (decisions and ends) for each player, computed once.
        texts = [[(rules.text_view(h, p) or "") if nodes.player[n] != CHANCE else "" for p in (0, 1)]
                 for n, h in enumerate(nodes.histories)]
        # ... and as it reads once a forfeit has ended the game at that node.
        over = [[_ended(t) for t in pair] for pair in texts]
        VOCAB.check([t for pair in texts + over for t in pair], f"text:{name}")
        length = max(len(t.split()) for pair in texts + over for t in pair)
        self._views = jnp.asarray(np.stack([[VOCAB.encode(t, length) for t in pair] for pair in texts]))
        self._forfeit_views = jnp.asarray(np.stack([[VOCAB.encode(t, length) for t in pair] for pair in over]))
        super().__init__(game, rules.action_names, length, f"text:{name}", max_tokens, invalid)

    def text_views(self, game_state: TreeState) -> jax.Array:
        return jnp.where(game_state.forfeit >= 0, self._forfeit_views[game_state.node],
                         self._views[game_state.node])

    def infoset_views(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Every information set of the game's tree as its owner reads it:
        `(views [I, L] token ids, owner [I], move utterances [A, T])`, in the tree's
        information-set order, so that a text policy's probability of each move's
        utterance at each view is a strategy the tree scores exactly."""
        game = self.game
        nodes, tree = game._nodes, game.tree
        index = {k: i for i, k in enumerate(tree.infoset_keys)}
        rows = np.zeros(len(index), np.int64)
        for n, h in enumerate(nodes.histories):
            mover = int(nodes.player[n])
            if mover in (0, 1):
                rows[index[game.rules.infoset_key(h)]] = n
        owner = np.asarray(tree.infoset_player)
        return self._views[jnp.asarray(rows), jnp.asarray(owner)], jnp.asarray(owner), self._moves


ENVS.register_prefix(
    "text", TextTreeGame, kind="competitive",
    description="a game played in words: views as token ids of coplay's vocabulary, moves as utterances "
                "(kuhn_poker, leduc_holdem, scored exactly through their trees)",
    choices=tree_names,
)
