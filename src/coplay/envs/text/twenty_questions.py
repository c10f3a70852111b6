"""Twenty questions against a table: `coplay.make("text:twenty_questions", objects=16)`.

The environment keeps a secret object, drawn uniformly from its key among
`objects` (2 to 20) named "object 1", "object 2", ... Every object has five
yes/no attributes, each told by a pair of words: red or blue, big or small,
round or square, soft or hard, heavy or light. Object k is the binary code of
k - 1 (`object_table`): bit 0 set makes it red (else blue), bit 1 big, bit 2
round, bit 3 soft, bit 4 heavy. So object 1 is blue, small, square, hard and
light; object 6 (code 00101) red, small, round, hard and light; object 16 red,
big, round, soft and light. No two objects share all five attributes.

One questioner (agent 0) asks about an attribute or guesses the object, and the
environment answers truthfully from the table. Its view is the whole game so far:

    view    "twenty questions , is it red ? yes , is it big ? no , your move"
    moves   "is it red ? <end>"  (any of the ten attribute words)   "guess object 6 <end>"
    end     "twenty questions , is it red ? yes , ... , guess object 6 correct , game over"

    obs           [1, L] int32  the view, token ids of coplay's vocabulary (L = 10 + 6 max_questions)
    action        [1, T] int32  the questioner's utterance
    reward        [1]           at a guess: 1 - question_cost x (questions asked) if right, 0 if wrong
    info          invalid_utterance [1] bool: the utterance named no legal move; win [1] bool: a right guess

The episode ends at the first guess. At most `max_questions` questions may be
asked (repeats count); after that only a guess is legal. An utterance that
names no legal move (an unknown move, or a question when none is left) forfeits
(`invalid="forfeit"`, the default: reward -1, the episode ends, the view closes
with "forfeited , game over") or is replaced by a uniformly random legal move
(`invalid="random"`). The view is the history, which is the questioner's
information state, so views are states.

Exact optimum. Each answer is one bit, so k questions end in at most 2^k ways:
no strategy can be sure of the object with fewer than ceil(log2 N) questions for
every secret, and ceil(log2 N) suffice: the halving questioner, which asks about
the attribute that splits the objects still consistent with the answers most
evenly and guesses once one is left, names every secret after at most
ceil(log2 N) questions (exactly that many for every secret when N is a power of
two). With the defaults (16 objects, question_cost 0.05, 8 questions) it earns
1 - 4 x 0.05 = 0.8 in every game, and 0.8 is the greatest expected return of
any strategy (a guess among two or more consistent objects costs more than the
question it saves).
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

ATTRIBUTES = (("red", "blue"), ("big", "small"), ("round", "square"), ("soft", "hard"), ("heavy", "light"))
WORDS = tuple(w for pair in ATTRIBUTES for w in pair)      # the ten questions' words, in question order
MAX_OBJECTS, MAX_QUESTIONS = 20, 20                        # objects are named with the vocabulary's 1..20
_ENTRY, _TAIL = 6, 7                                       # "is it red ? yes ,"  "guess object 6 correct , game over"


def object_table(objects: int) -> np.ndarray:
    """`[objects, 10]` bool: whether object k + 1 is each of `WORDS` (red, blue, big, small, ...)."""
    bits = (np.arange(objects)[:, None] >> np.arange(len(ATTRIBUTES))) & 1     # [N, 5]
    return np.stack([bits == 1, bits == 0], axis=-1).reshape(objects, len(WORDS))


@struct.dataclass
class TwentyQuestionsState:
    secret: jax.Array      # [] int32 the secret object, 0-based ("object secret + 1")
    asked: jax.Array       # [Q] int32 the questions asked, in order (indices into WORDS), -1 after `count`
    count: jax.Array       # [] int32 questions asked
    guess: jax.Array       # [] int32 the object guessed (0-based), -1 before a guess
    forfeited: jax.Array   # [] bool
    done: jax.Array        # [] bool


class TextTwentyQuestions(TextEnv):
    """Twenty questions against a fixed table of objects (see the module's doc)."""

    views_are_states = True

    def __init__(self, objects: int = 16, max_questions: int = 8, question_cost: float = 0.05,
                 max_tokens: int = 5, invalid: str = "forfeit"):
        check_invalid(invalid)
        if not (isinstance(objects, int) and 2 <= objects <= MAX_OBJECTS):
            raise ConfigError(f"objects={objects!r}: give a whole number of objects from 2 to {MAX_OBJECTS}")
        if not (isinstance(max_questions, int) and 0 <= max_questions <= MAX_QUESTIONS):
            raise ConfigError(f"max_questions={max_questions!r}: give a whole number from 0 to {MAX_QUESTIONS}")
        if not (isinstance(question_cost, (int, float)) and 0.0 <= question_cost <= 1.0):
            raise ConfigError(f"question_cost={question_cost!r}: give a number from 0 to 1")
        self.objects, self.max_questions, self.question_cost = objects, max_questions, float(question_cost)
        self.invalid, self.vocab = invalid, VOCAB
        self.table = object_table(objects)
        self.move_texts = (tuple(f"is it {w} ?" for w in WORDS)
                           + tuple(f"guess object {k}" for k in range(1, objects + 1)))
        self._moves = move_table(self.move_texts, max_tokens, "text:twenty_questions")
        self._table = jnp.asarray(self.table)
        self._entries = jnp.asarray(np.stack([[VOCAB.encode(f"is it {w} ? {a} ,") for a in ("yes", "no")]
                                              for w in WORDS]))                      # [10, 2, 6]
        self._head = jnp.asarray(VOCAB.encode("twenty questions ,"))
        self._numbers = jnp.asarray([VOCAB.index[str(k)] for k in range(MAX_OBJECTS + 1)], jnp.int32)
        self._guessed = jnp.asarray(VOCAB.encode("guess object"))
        self._verdict = jnp.asarray([VOCAB.index["correct"], VOCAB.index["wrong"]], jnp.int32)
        self._over = jnp.asarray(VOCAB.encode(f", {GAME_OVER}"))
        self._playing = jnp.asarray(VOCAB.encode(YOUR_MOVE, _TAIL))
        self._forfeit = jnp.asarray(VOCAB.encode(f"forfeited , {GAME_OVER}", _TAIL))
        length = self._head.shape[0] + _ENTRY * max_questions + _TAIL
        self.spec = EnvSpec(
            name="text:twenty_questions", num_agents=1, obs_space=MultiDiscrete((len(VOCAB),) * length),
            action_space=MultiDiscrete((len(VOCAB),) * max_tokens),
            global_state_space=Box(-1.0, float(MAX_OBJECTS), (4 + max_questions,)), max_steps=max_questions + 1,
            teams=(0,), roles=("questioner",), turn_based=True, render_text=self.render_text,
        )

    # ----- views ---------------------------------------------------------------------------------
    def _view(self, state: TwentyQuestionsState) -> jax.Array:
        """[L]: "twenty questions , is it <word> ? <yes|no> , ... , <status>", padded at the end."""
        q = jnp.clip(state.asked, 0)
        answer = jnp.where(self._table[state.secret, q], 0, 1)                      # [Q] 0 yes, 1 no
        said = jnp.arange(self.max_questions) < state.count
        entries = jnp.where(said[:, None], self._entries[q, answer], PAD).reshape(-1)
        guessed = jnp.concatenate([self._guessed, self._numbers[state.guess + 1][None],
                                   self._verdict[(state.guess != state.secret).astype(jnp.int32)][None], self._over])
        tail = jnp.where(state.guess >= 0, guessed, jnp.where(state.forfeited, self._forfeit, self._playing))
        view = jnp.concatenate([self._head, entries, tail])
        return view[jnp.argsort(view == PAD, stable=True)]                         # the words first, in order

    def _timestep(self, state: TwentyQuestionsState, reward: jax.Array, invalid: jax.Array,
                  win: jax.Array) -> TimeStep:
        facts = jnp.stack([state.secret, state.count, state.guess, state.forfeited.astype(jnp.int32)])
        return TimeStep(
            obs=self._view(state)[None], reward=reward[None].astype(jnp.float32), done=state.done,
            truncated=jnp.bool_(False), active=~state.done[None], action_mask=jnp.ones((1, 0), bool),
            global_state=jnp.concatenate([facts, state.asked]).astype(jnp.float32),
            info={"invalid_utterance": invalid[None], "win": win[None]},
        )

    def _reset(self, key):
        state = TwentyQuestionsState(
            secret=jax.random.randint(key, (), 0, self.objects, jnp.int32),
            asked=jnp.full(self.max_questions, -1, jnp.int32), count=jnp.int32(0), guess=jnp.int32(-1),
            forfeited=jnp.bool_(False), done=jnp.bool_(False))
        return state, self._timestep(state, jnp.float32(0.0), jnp.bool_(False), jnp.bool_(False))

    def legal_moves(self, count: jax.Array) -> jax.Array:
        """[A] bool: the moves (rows of `move_texts`) legal after `count` questions."""
        return jnp.concatenate([jnp.full(len(WORDS), count < self.max_questions), jnp.ones(self.objects, bool)])

    def move_mask(self, state: TwentyQuestionsState) -> jax.Array:
        return self.legal_moves(state.count)[None]

    def _step(self, state: TwentyQuestionsState, actions, key):
        move, invalid, forfeit = read_move(jnp.asarray(actions)[0], self._moves, self.legal_moves(state.count),
                                           ~state.done, self.invalid, key)
        playing = ~state.done & ~forfeit
        ask = playing & (move < len(WORDS))
        guess_now = playing & (move >= len(WORDS))
        guess = jnp.where(guess_now, move - len(WORDS), state.guess)
        win = guess_now & (guess == state.secret)
        reward = jnp.where(win, 1.0 - self.question_cost * state.count, jnp.where(forfeit, -1.0, 0.0))
        new = TwentyQuestionsState(
            secret=state.secret,
            asked=jnp.where(ask & (jnp.arange(self.max_questions) == state.count), move, state.asked),
            count=state.count + ask.astype(jnp.int32), guess=guess, forfeited=state.forfeited | forfeit,
            done=state.done | forfeit | guess_now)
        return new, self._timestep(new, reward, invalid, win)

    def render_text(self, state: TwentyQuestionsState, viewer: int | None = None) -> str:
        if viewer is not None:
            return self.vocab.decode(np.asarray(self._view(state)))
        secret = int(state.secret)
        words = " ".join(w for w, has in zip(WORDS, self.table[secret]) if has)
        asked = ", ".join(WORDS[int(q)] for q in np.asarray(state.asked)[: int(state.count)]) or "none"
        status = GAME_OVER if bool(state.done) else f"{self.max_questions - int(state.count)} questions left"
        return f"twenty questions, secret: object {secret + 1} ({words}); asked: {asked}; {status}"


ENVS.register("text:twenty_questions", TextTwentyQuestions, kind="cooperative",
              description="Twenty questions in words against a table of objects: 'is it red ?', 'guess object 6'; "
                          "ceil(log2 N) questions are the exact optimum")
