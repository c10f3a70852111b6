"""Text environments: agents read token ids of a shared word vocabulary and answer
with utterances that the environment parses (`text:kuhn_poker`, `text:leduc_holdem`, `text:nim`)."""

from coplay.envs.text.base import TextEnv
from coplay.envs.text.nim import TextNim
from coplay.envs.text.tree_games import TextTreeGame
from coplay.envs.text.vocab import END, PAD, UNK, VOCAB, Vocabulary

__all__ = ["END", "PAD", "UNK", "VOCAB", "TextEnv", "TextNim", "TextTreeGame", "Vocabulary"]
