"""Guess the number in words: `coplay.make("text:guess_number", n=16)`.

The environment keeps a secret whole number, drawn uniformly from its key in
1..n (n from 2 to 20, the vocabulary's numbers). One guesser (agent 0) names a
number and the environment answers "higher" (the secret is higher), "lower" or
"correct". Its view is the whole game so far:

    view    "guess the number between 1 and 16 , 8 lower , 4 higher , your move"
    move    "guess 6 <end>"
    end     "guess the number between 1 and 16 , 8 lower , 4 higher , 6 correct , game over"

    obs           [1, L] int32  the view, token ids of coplay's vocabulary (L = 12 + 3 max_guesses)
    action        [1, T] int32  the guesser's utterance
    reward        [1]           1 - guess_cost x (wrong guesses before it) at the right guess, else 0
    info          invalid_utterance [1] bool: the utterance named no legal move; win [1] bool: the right guess

The episode ends at the right guess or after `max_guesses` guesses (then with
reward 0). An utterance that names no number in 1..n forfeits
(`invalid="forfeit"`, the default: reward -1, the episode ends, the view closes
with "forfeited , game over") or is replaced by a uniformly random guess
(`invalid="random"`). The view is the history, which is the guesser's
information state, so views are states.

Exact optimum. Binary search (guess the middle of the numbers still possible)
finds every secret within floor(log2 n) + 1 guesses, and no strategy does
better for every secret: each guess splits what is left into a part below and
a part above, one of which holds at least half of the rest. Binary search also
makes the fewest guesses on average (its guesses form a balanced search tree,
whose depths sum to the least possible), so with the defaults (n 16, guess_cost
0.1, 8 guesses; 54 guesses over the 16 secrets, 38 of them wrong) its expected
return, 1 - 0.1 x 38 / 16 = 0.7625, is the greatest of any strategy.
"""

from __future__ import annotations

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
from coplay.envs.text.vocab import PAD, VOCAB
from coplay.envs.trees.tree import GAME_OVER, YOUR_MOVE

MAX_N, MAX_GUESSES = 20, 20      # numbers are written with the vocabulary's 0..20
_ENTRY, _TAIL = 3, 4             # "8 lower ,"   "forfeited , game over"


@struct.dataclass
class GuessNumberState:
    secret: jax.Array      # [] int32 in 1..n
    guesses: jax.Array     # [G] int32 the guesses, in order, 0 after `count`
    count: jax.Array       # [] int32 guesses made
    forfeited: jax.Array   # [] bool
    done: jax.Array        # [] bool


class TextGuessNumber(TextEnv):
    """Guess the number with higher / lower answers (see the module's doc)."""

    views_are_states = True

    def __init__(self, n: int = 16, max_guesses: int = 8, guess_cost: float = 0.1, max_tokens: int = 3,
                 invalid: str = "forfeit"):
        check_invalid(invalid)
        if not (isinstance(n, int) and 2 <= n <= MAX_N):
            raise ConfigError(f"n={n!r}: the secret is drawn from 1..n; give a whole number n from 2 to {MAX_N}")
        if not (isinstance(max_guesses, int) and 1 <= max_guesses <= MAX_GUESSES):
            raise ConfigError(f"max_guesses={max_guesses!r}: give a whole number from 1 to {MAX_GUESSES}")
        if not (isinstance(guess_cost, (int, float)) and 0.0 <= guess_cost <= 1.0):
            raise ConfigError(f"guess_cost={guess_cost!r}: give a number from 0 to 1")
        self.n, self.max_guesses, self.guess_cost = n, max_guesses, float(guess_cost)
        self.invalid, self.vocab = invalid, VOCAB
        self.move_texts = tuple(f"guess {k}" for k in range(1, n + 1))
        self._moves = move_table(self.move_texts, max_tokens, "text:guess_number")
        self._head = jnp.asarray(VOCAB.encode(f"guess the number between 1 and {n} ,"))
        self._numbers = jnp.asarray([VOCAB.index[str(k)] for k in range(MAX_N + 1)], jnp.int32)
        self._answers = jnp.asarray([VOCAB.index[w] for w in ("lower", "correct", "higher")], jnp.int32)
        self._comma = jnp.int32(VOCAB.index[","])
        self._status = jnp.asarray(np.stack([VOCAB.encode(s, _TAIL) for s in
                                             (YOUR_MOVE, GAME_OVER, f"forfeited , {GAME_OVER}")]))
        length = self._head.shape[0] + _ENTRY * max_guesses + _TAIL
        self.spec = EnvSpec(
            name="text:guess_number", num_agents=1, obs_space=MultiDiscrete((len(VOCAB),) * length),
            action_space=MultiDiscrete((len(VOCAB),) * max_tokens),
            global_state_space=Box(0.0, float(MAX_N), (3 + max_guesses,)), max_steps=max_guesses,
            teams=(0,), roles=("guesser",), turn_based=True, render_text=self.render_text,
        )

    # ----- views ---------------------------------------------------------------------------------
    def _view(self, state: GuessNumberState) -> jax.Array:
        """[L]: "guess the number between 1 and n , <guess> <answer> , ... , <status>", padded at the end."""
        answer = self._answers[jnp.sign(state.secret - state.guesses) + 1]            # [G]
        entries = jnp.stack([self._numbers[state.guesses], answer, jnp.full_like(answer, self._comma)], axis=1)
        said = jnp.arange(self.max_guesses) < state.count
        entries = jnp.where(said[:, None], entries, PAD).reshape(-1)
        status = jnp.where(state.forfeited, 2, jnp.where(state.done, 1, 0))
        view = jnp.concatenate([self._head, entries, self._status[status]])
        return view[jnp.argsort(view == PAD, stable=True)]                           # the words first, in order

    def _timestep(self, state: GuessNumberState, reward: jax.Array, invalid: jax.Array, win: jax.Array) -> TimeStep:
        facts = jnp.stack([state.secret, state.count, state.forfeited.astype(jnp.int32)])
        return TimeStep(
            obs=self._view(state)[None], reward=reward[None].astype(jnp.float32), done=state.done,
            truncated=jnp.bool_(False), active=~state.done[None], action_mask=jnp.ones((1, 0), bool),
            global_state=jnp.concatenate([facts, state.guesses]).astype(jnp.float32),
            info={"invalid_utterance": invalid[None], "win": win[None]},
        )

    def _reset(self, key):
        state = GuessNumberState(
            secret=jax.random.randint(key, (), 1, self.n + 1, jnp.int32),
            guesses=jnp.zeros(self.max_guesses, jnp.int32), count=jnp.int32(0),
            forfeited=jnp.bool_(False), done=jnp.bool_(False))
        return state, self._timestep(state, jnp.float32(0.0), jnp.bool_(False), jnp.bool_(False))

    def _step(self, state: GuessNumberState, actions, key):
        move, invalid, forfeit = read_move(jnp.asarray(actions)[0], self._moves, jnp.ones(self.n, bool),
                                           ~state.done, self.invalid, key)       # the guess minus 1, or -1
        guessing = ~state.done & ~forfeit
        guess = move + 1
        win = guessing & (guess == state.secret)
        reward = jnp.where(win, 1.0 - self.guess_cost * state.count, jnp.where(forfeit, -1.0, 0.0))
        count = state.count + guessing.astype(jnp.int32)
        new = GuessNumberState(
            secret=state.secret,
            guesses=jnp.where(guessing & (jnp.arange(self.max_guesses) == state.count), guess, state.guesses),
            count=count, forfeited=state.forfeited | forfeit,
            done=state.done | forfeit | win | (count >= self.max_guesses))
        return new, self._timestep(new, reward, invalid, win)

    def render_text(self, state: GuessNumberState, viewer: int | None = None) -> str:
        if viewer is not None:
            return self.vocab.decode(np.asarray(self._view(state)))
        guesses = " ".join(str(int(g)) for g in np.asarray(state.guesses)[: int(state.count)]) or "none"
        status = GAME_OVER if bool(state.done) else f"{self.max_guesses - int(state.count)} guesses left"
        return f"guess the number in 1..{self.n}, secret: {int(state.secret)}; guesses: {guesses}; {status}"


ENVS.register("text:guess_number", TextGuessNumber, kind="cooperative",
              description="Guess a number in 1..n from 'higher' / 'lower' answers: 'guess 7'; binary search's "
                          "floor(log2 n) + 1 guesses are the exact optimum")
