"""A language model as a player of free-text games (TextArena's, or coplay's behind
TextArena's loop): it reads the game's observation as the user message of its chat
template and writes its move as the game asks for it.

    agent = LMTextAgent("smollm2", seed=0)      # or "tiny", a saved directory, a .gguf file
    reply = agent(turn, rng)                     # turn: coplay.envs.text.host_game.Turn

The system message says to reply with the move only, in the game's own format; where
the game lists the legal moves, they are named again after the observation. The reply
is the model's text as sampled (free decoding, `temperature`, at most `max_new_tokens`
tokens), up to its first line break: the game parses it, and an unparsable reply is the
game's invalid move. `last` keeps the prompt's and the reply's token ids and the
reply's log-probabilities as they were sampled."""

from __future__ import annotations

import numpy as np

from coplay.envs.text.host_game import Turn
from coplay.lm import prompts
from coplay.lm.models import LoadedModel, load_model
from coplay.lm.policy import LMPlayer, Reply


class LMTextAgent:
    """A `transformers` causal language model writing moves of free-text games."""

    def __init__(self, model: str | LoadedModel = "tiny", *, seed: int = 0, max_new_tokens: int = 24,
                 temperature: float = 1.0, name: str | None = None):
        import torch

        self.loaded = model if isinstance(model, LoadedModel) else load_model(model, seed=seed)
        self.player = LMPlayer(self.loaded, None, max_new_tokens=max_new_tokens, temperature=temperature)
        self.generator = torch.Generator().manual_seed(seed)
        self.name = name or f"lm:{self.loaded.name}"
        self.last: tuple[list[int], Reply] | None = None

    def prompt(self, turn: Turn) -> list[int]:
        """The token ids of the prompt for `turn` (`coplay.lm.prompts.free_text_messages`)."""
        return self.player.chat(prompts.free_text_messages(turn.observation, turn.legal))

    def __call__(self, turn: Turn, rng: np.random.Generator) -> str:
        del rng   # the model samples from its own generator, seeded at construction
        prompt = self.prompt(turn)
        reply = self.player.sample([prompt], self.generator)[0]
        self.last = (prompt, reply)
        return prompts.first_line(reply.text)


__all__ = ["LMTextAgent"]
