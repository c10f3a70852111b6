"""Text policies beside the others: exact evaluation on a game with a tree
(`text:kuhn_poker`, `text:leduc_holdem`), and play in the game underneath a text
game (`speaker`), so that a text policy meets policies and bots built for it in
one tournament.

At every information set the policy's probability of each legal move is the
probability of that move's utterance, `exp(log_prob(view, utterance))`,
renormalised over the legal moves; the mass left over is what the policy gives
to utterances that name no legal move (`invalid`). The resulting `[I, A]`
strategy is scored by the tree: exploitability and NashConv, exactly.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from coplay.core.compile import call_once
from coplay.core.policy import Policy
from coplay.envs.text.games import TextGame
from coplay.envs.text.tree_games import TextTreeGame
from coplay.envs.trees.values import TreeArrays, exploitability, nash_conv


class TextPolicyScore(NamedTuple):
    exploitability: jax.Array   # []
    nash_conv: jax.Array        # []
    strategy: jax.Array         # [I, A] the policy's move probabilities, renormalised over legal moves
    invalid: jax.Array          # [I] probability of an utterance that names no legal move

    def measures(self, episodes: int) -> dict[str, jax.Array]:
        """The score as an evaluation's entries (`exploitability`, `nash_conv`, `invalid_mass`:
        the mean invalid probability over information sets), each repeated for `episodes`."""
        full = lambda v: jnp.full((episodes,), v, jnp.float32)  # noqa: E731
        return {"exploitability": full(self.exploitability), "nash_conv": full(self.nash_conv),
                "invalid_mass": full(jnp.mean(self.invalid))}


def move_probabilities(env: TextTreeGame, policy: Any, params: Any, temperature: float = 1.0,
                       per_role: bool = False, legal_only: bool = False) -> tuple[jax.Array, jax.Array]:
    """`(strategy [I, A], invalid [I])` of `policy` (a token-level policy: anything with the
    `log_prob` of `coplay.nets.token_policy.TokenPolicy`) at every information set of `env`'s tree.
    `per_role`: `params` holds one model per player (every leaf `[N, ...]`), and each
    information set is read by its owner's. `legal_only`: the policy writes only the
    moves legal at the information set (its decoding is restricted to them)."""
    views, owner, moves = env.infoset_views()
    legal = jnp.asarray(env.game.tree.legal)

    def at(view, role, ok):
        own = jax.tree.map(lambda p: p[role], params) if per_role else params
        ok = ok if legal_only else None
        return jax.vmap(lambda u: policy.log_prob(own, view, role, u, temperature, ok)[0])(moves)

    return renormalise(jax.vmap(at)(views, owner, legal), legal)


def renormalise(logp: jax.Array, legal: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`logp [I, A]` log-probabilities of each move's utterance, `legal [I, A]` ->
    `(strategy [I, A], invalid [I])`: the probabilities renormalised over the legal
    moves, and the mass left to utterances that name none."""
    mass = jnp.where(legal, jnp.exp(logp), 0.0)
    said = mass.sum(-1, keepdims=True)
    # A policy that gives (numerically) nothing to the legal moves is read as uniform over them.
    uniform = legal / legal.sum(-1, keepdims=True)
    strategy = jnp.where(said > 0, mass / jnp.maximum(said, 1e-30), uniform)
    return strategy, 1.0 - said[:, 0]


def score_text_policy(env: TextTreeGame, policy: Any, params: Any, temperature: float = 1.0,
                      per_role: bool = False, legal_only: bool = False) -> TextPolicyScore:
    """The exact exploitability and NashConv of `policy` (see the module's doc and
    `move_probabilities` for `per_role` and `legal_only`), computed as one program."""
    t = TreeArrays.from_tree(env.game.tree)

    def score(params):
        strategy, invalid = move_probabilities(env, policy, params, temperature, per_role, legal_only)
        return TextPolicyScore(exploitability(t, strategy), nash_conv(t, strategy), strategy, invalid)

    return call_once(score, params)


def speaker(env: TextGame, policy: Policy) -> Policy:
    """`policy`, a text policy of `env`, as a player of the game underneath (`env.game`):
    it reads the views `env.text_views` writes from the game's state, and the move its
    utterance names is played; an utterance that names none is played as an illegal
    move (the game's forfeit, counted by the game as an illegal action)."""
    def observe(game_state, ts):
        return jax.vmap(env.text_views)(game_state)

    def act(params, obs, mask, key, carry, reset):
        tokens, carry = policy.act(params, obs, mask, key, carry, reset)
        return env.move_of(tokens), carry

    return Policy(act=act, initial_carry=policy.initial_carry, env=env.game, observe=observe)


def score_lm_player(env: TextTreeGame, player: Any) -> TextPolicyScore:
    """The exact exploitability and NashConv of a language model playing `env`
    (`coplay.lm.LMPlayer`): at every information set its prompt is built from the
    view the set's owner reads, each legal move is scored by the log-probability of
    its canonical reply, and the moves are renormalised as for a token-level policy
    (`renormalise`). With `decoding=legal` the renormalised strategy is exactly how
    the model plays; with free decoding, `invalid` is the mass of every other reply
    (including other spellings of a move). Runs on the host, one forward pass per
    batch of (information set, move) pairs."""
    import numpy as np

    from coplay.envs.text.vocab import VOCAB

    views, owner, _ = env.infoset_views()
    legal = np.asarray(env.game.tree.legal)
    prompts, moves = [], []
    for view, who, ok in zip(np.asarray(views), np.asarray(owner), legal):
        allowed = [int(a) for a in np.flatnonzero(ok)]
        prompts.append(player.prompt(VOCAB.decode(view), int(who), [player.moves[a] for a in allowed]))
        moves.append(allowed)
    logp = np.full(legal.shape, -np.inf)
    for who in sorted(set(np.asarray(owner).tolist())):
        rows = [i for i, w in enumerate(np.asarray(owner)) if w == who]
        with player.speaking_as(who):
            scored = player.move_log_probs([prompts[i] for i in rows], [moves[i] for i in rows])
        for i, row in zip(rows, scored):
            logp[i, moves[i]] = row
    strategy, invalid = renormalise(jnp.asarray(logp, jnp.float32), jnp.asarray(legal))
    t = TreeArrays.from_tree(env.game.tree)
    return TextPolicyScore(exploitability(t, strategy), nash_conv(t, strategy), strategy, invalid)
