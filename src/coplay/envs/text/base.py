"""What every text environment has beyond the environment contract."""

from __future__ import annotations

import numpy as np

from coplay.core.env import Env
from coplay.envs.text.vocab import END, Vocabulary


class TextEnv(Env):
    """An environment whose observations are views in token ids of `vocab` and whose
    actions are utterances (`MultiDiscrete` token ids, `<end>` stops one early).

    `move_texts` are the moves it understands, written out; `speech_words()`, the
    words they are made of: a policy may be limited to writing those (and `<end>`),
    which leaves the format (which words, in which order, where to stop, which move
    is legal now) to be learned."""

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
