"""The word-level vocabulary that coplay's text environments share.

One fixed list of words, so that one model can play every text environment,
and a person (or a pretrained model's tokenizer) can read exactly what an
agent reads: `VOCAB.decode(obs)` turns token ids back into the text, and
`VOCAB.encode(text)` turns text into ids. Words are split on spaces; the
punctuation marks below are words of their own.

Ids are stable: words are only ever appended, never reordered or removed, so
that a checkpoint's embedding rows keep their meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.errors import ConfigError

PAD, END, UNK = 0, 1, 2

_WORDS = (
    "<pad>", "<end>", "<unk>",
    ",", ".", ":", "?",
    # numbers
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10",
    # people and turns
    "you", "are", "player", "your", "move", "turn", "wait", "is", "the", "to", "of", "and", "or", "none", "so", "far",
    "game", "over", "won", "lost", "draw", "forfeit", "forfeited",
    # cards and betting (Kuhn poker, Leduc hold'em)
    "kuhn", "poker", "leduc", "holdem", "card", "public", "hidden", "jack", "queen", "king",
    "pass", "bet", "fold", "call", "raise", "round", "first", "second", "actions",
    # nim
    "nim", "piles", "take", "from",
    # more numbers
    "11", "12", "13", "14", "15", "16", "17", "18", "19", "20",
    # words several games share
    "yes", "no", "i", "we", "they", "it", "a", "an", "this", "that", "what", "which", "not", "say", "said", "ask",
    "answer", "guess", "question", "rounds", "last", "next", "with", "for", "in", "on", "at", "my", "their", "has",
    "have", "will", "do", "did", "be", "end", "score", "reward", "points", "value", "values", "total", "each",
    # boards (tic-tac-toe, connect four, grids)
    "tic", "tac", "toe", "connect", "four", "x", "o", "_", "/", "row", "column", "up", "down", "left", "right",
    "wall", "goal", "box", "grid",
    # negotiation
    "negotiation", "offer", "propose", "accept", "reject", "deal", "book", "books", "hat", "hats", "ball", "balls",
    "give", "keep", "want", "item", "items",
    # roles (proposer, solver, verifier)
    "proposer", "solver", "verifier", "problem", "plus", "minus", "times", "equals", "correct", "wrong", "true",
    "false",
    # matrix games with talk, signalling, guessing
    "prisoners", "dilemma", "stag", "hunt", "hare", "cooperate", "defect", "message", "sender", "receiver", "signal",
    "object", "state", "choose", "chose", "higher", "lower", "number", "between", "twenty", "questions",
    # twenty questions: the objects' attributes
    "red", "blue", "big", "small", "square", "soft", "hard", "heavy", "light",
)


@dataclass(frozen=True)
class Vocabulary:
    """Word <-> id. `decode` stops at the first `<end>` and drops `<pad>`."""

    words: tuple[str, ...]
    index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(set(self.words)) != len(self.words):
            raise ConfigError("a vocabulary's words must be distinct")
        object.__setattr__(self, "index", {w: i for i, w in enumerate(self.words)})

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str, length: int | None = None, *, end: bool = False) -> np.ndarray:
        """`[len]` int32 ids of `text`'s words (unknown words are refused, naming them);
        `end=True` appends `<end>`; `length` pads with `<pad>` (and refuses longer text)."""
        self.check([text])
        ids = [self.index[w] for w in text.split()] + ([END] if end else [])
        if length is not None:
            if len(ids) > length:
                raise ConfigError(f"text of {len(ids)} tokens does not fit in {length}: {text!r}")
            ids = ids + [PAD] * (length - len(ids))
        return np.asarray(ids, np.int32)

    def decode(self, ids: Iterable[int] | np.ndarray) -> str:
        out = []
        for i in np.asarray(ids).reshape(-1).tolist():
            if i == END:
                break
            if i != PAD:
                out.append(self.words[i] if 0 <= i < len(self.words) else self.words[UNK])
        return " ".join(out)

    def check(self, texts: Sequence[str], where: str = "") -> None:
        """Refuse texts with words outside the vocabulary, naming the words (and `where`)."""
        missing = sorted({w for t in texts for w in t.split() if w not in self.index})
        if missing:
            raise ConfigError(f"{where + ': ' if where else ''}words not in coplay's text vocabulary: "
                              f"{', '.join(map(repr, missing))}")


def spoken(tokens: jax.Array) -> jax.Array:
    """`[..., T]` bool: the tokens that belong to an utterance `[..., T]`, up to and
    including its first `<end>` (all T where there is none); the ones after it are
    not read."""
    ends = jnp.cumsum(tokens == END, axis=-1)
    return (ends == 0) | ((ends == 1) & (tokens == END))


VOCAB = Vocabulary(_WORDS)

_STRIP = "\"'`*[]()<>"


def reply_words(text: str) -> list[str]:
    """The words of a reply's first line, lower-cased, with quotes, brackets and a final
    full stop or exclamation mark taken off ("Bet." -> ["bet"], "[call]" -> ["call"])."""
    line = text.strip().split("\n", 1)[0].strip().lower()
    line = "".join(c for c in line if c not in _STRIP).strip().rstrip(".!").strip()
    return line.split()


def utterance(text: str, max_tokens: int) -> np.ndarray:
    """`[max_tokens]` int32: the reply as an utterance of coplay's vocabulary, for the
    environment to parse; a reply with words outside the vocabulary, or longer than
    `max_tokens`, is `<unk>` (it names no move)."""
    words = reply_words(text)
    if not words or len(words) > max_tokens or any(w not in VOCAB.index for w in words):
        out = np.full(max_tokens, PAD, np.int32)
        out[0] = UNK
        return out
    return VOCAB.encode(" ".join(words), max_tokens, end=len(words) < max_tokens)


def view_keys(views: jax.Array) -> jax.Array:
    """`[..., L]` token ids -> `[...]` int32 keys, equal for equal views: the state keys
    of GiGPO's anchor-state groups where an environment's views are its states (a
    polynomial hash modulo 2^32: distinct views of one batch collide with negligible
    chance)."""
    powers = jnp.asarray(np.cumprod(np.full(views.shape[-1], 1_000_003, np.uint64)) % (1 << 32), jnp.uint32)
    key = jnp.sum(views.astype(jnp.uint32) * powers, axis=-1, dtype=jnp.uint32)
    return jax.lax.bitcast_convert_type(key, jnp.int32)
