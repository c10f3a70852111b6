"""Text environments: agents read token ids of a shared word vocabulary and answer
with utterances that the environment parses (`text:kuhn_poker`, `text:leduc_holdem`, `text:nim`,
`text:tic_tac_toe` and `text:connect_four` (in coplay.interop.pgx),
`text:gridworld`, `text:negotiation`, `text:matrix_talk`, `text:lewis`,
`text:twenty_questions`, `text:guess_number`, `text:arithmetic_roles`)."""

from coplay.envs.text.base import TextEnv
from coplay.envs.text.games import TextGame
from coplay.envs.text.gridworld import TextGridworld
from coplay.envs.text.guess_number import TextGuessNumber
from coplay.envs.text.lewis import TextLewis
from coplay.envs.text.matrix_talk import TextMatrixTalk
from coplay.envs.text.negotiation import TextNegotiation
from coplay.envs.text.nim import TextNim
from coplay.envs.text.roles import TextArithmeticRoles
from coplay.envs.text.tree_games import TextTreeGame
from coplay.envs.text.twenty_questions import TextTwentyQuestions
from coplay.envs.text.vocab import END, PAD, UNK, VOCAB, Vocabulary

__all__ = ["END", "PAD", "UNK", "VOCAB", "TextArithmeticRoles", "TextEnv", "TextGame", "TextGridworld",
           "TextGuessNumber", "TextLewis", "TextMatrixTalk", "TextNegotiation", "TextNim", "TextTreeGame",
           "TextTwentyQuestions", "Vocabulary"]
