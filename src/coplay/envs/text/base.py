"""What every text environment has beyond the environment contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.env import Env, State, TimeStepWrapper
from coplay.core.errors import ConfigError
from coplay.core.types import TimeStep
from coplay.envs.text.vocab import END, VOCAB, Vocabulary


def move_table(move_texts: Sequence[str], max_tokens: int, where: str) -> jax.Array:
    """`[A, T]` token ids of each move's text, `<end>` where it is shorter than T,
    then `<pad>`; refuses a T shorter than the longest move."""
    VOCAB.check(list(move_texts), where)
    longest = max(len(t.split()) for t in move_texts)
    if max_tokens < longest:
        raise ConfigError(f"{where}: max_tokens={max_tokens} is shorter than the longest move "
                          f"({longest} tokens: {', '.join(map(repr, move_texts[:8]))})")
    return jnp.asarray(np.stack([VOCAB.encode(t, max_tokens, end=len(t.split()) < max_tokens)
                                 for t in move_texts]))


class TextEnv(Env):
    """An environment whose observations are views in token ids of `vocab` and whose
    actions are utterances (`MultiDiscrete` token ids, `<end>` stops one early).

    `move_texts` are the moves it understands, written out; `speech_words()`, the
    words they are made of: a policy may be limited to writing those (and `<end>`),
    which leaves the format (which words, in which order, where to stop, which move
    is legal now) to be learned. `move_tokens()` is the same moves as utterances, and
    `move_mask(state)` says which of them each agent may say now: a policy may also be
    limited to those (decoding restricted to legal utterances)."""

    vocab: Vocabulary
    move_texts: tuple[str, ...]

    def speech_words(self) -> tuple[str, ...]:
        """The words this environment's utterances are made of, in first-use order."""
        return tuple(dict.fromkeys(w for text in self.move_texts for w in text.split()))

    def speech_tokens(self) -> np.ndarray:
        """`[V]` bool: the token ids of `speech_words()` and `<end>`."""
        allowed = np.zeros(len(self.vocab), bool)
        allowed[[self.vocab.index[w] for w in self.speech_words()]] = True
        allowed[END] = True
        return allowed

    def move_tokens(self) -> jax.Array:
        """`[A, T]`: `move_texts` as utterances (each move's words, `<end>` where it is
        shorter than T, then `<pad>`), row i for move i."""
        return move_table(self.move_texts, int(self.spec.action_space.shape[-1]), self.spec.name)

    def move_mask(self, state: Any) -> jax.Array:
        """`[N, A]` bool: the rows of `move_tokens()` that each agent may say in `state`
        (for the agent to move: its legal moves). By default every row for every
        agent: any utterance the environment understands."""
        return jnp.ones((self.spec.num_agents, len(self.move_texts)), bool)


class MovesAsMask(TimeStepWrapper):
    """A text environment whose timesteps carry `move_mask(state)` as `action_mask`
    (`[N, A]`, one flag per row of `move_tokens()`), for the evaluation loops of a
    policy that writes only legal utterances: those loops hand the policy the mask.
    It reads as the environment otherwise; its mask is not the contract's (the
    actions stay utterances), so it is not an environment to register."""

    env: TextEnv

    def __init__(self, env: TextEnv):
        super().__init__(env)

    def _view(self, state: State, ts: TimeStep) -> TimeStep:
        return ts.replace(action_mask=self.env.move_mask(state))  # type: ignore[attr-defined]  # flax struct.dataclass
