"""What every text environment has beyond the environment contract."""

from __future__ import annotations

import abc

import numpy as np

from coplay.core.env import Env
from coplay.envs.text.vocab import END, Vocabulary


class TextEnv(Env):
    """An environment whose observations are views in token ids of `vocab` and whose
    actions are utterances (`MultiDiscrete` token ids, `<end>` stops one early).

    `speech_words()` names the words its utterances are made of: a policy may be
    limited to writing those (and `<end>`), which leaves the format (which words,
    in which order, where to stop, which move is legal now) to be learned."""

    vocab: Vocabulary

    @abc.abstractmethod
    def speech_words(self) -> tuple[str, ...]:
        """The words this environment's utterances are made of."""

    def speech_tokens(self) -> np.ndarray:
        """`[V]` bool: the token ids of `speech_words()` and `<end>`."""
        allowed = np.zeros(len(self.vocab), bool)
        allowed[[self.vocab.index[w] for w in self.speech_words()]] = True
        allowed[END] = True
        return allowed
