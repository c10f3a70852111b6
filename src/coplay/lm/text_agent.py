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

from typing import Any

import numpy as np

from coplay.envs.text.host_game import Turn
from coplay.lm.models import LoadedModel, load_model
from coplay.lm.policy import LMPlayer, Reply

SYSTEM = ("You are playing a game with other players. Read the game's messages and reply with your move only, "
          "written exactly in the format the game asks for, for example [4] or [check].")


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
        """The token ids of the prompt for `turn`."""
        text = turn.observation
        if turn.legal:
            text += "\nYour legal moves: " + ", ".join(turn.legal) + "."
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        ids: Any = self.loaded.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        if not isinstance(ids, list):   # a BatchEncoding in some versions
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def __call__(self, turn: Turn, rng: np.random.Generator) -> str:
        del rng   # the model samples from its own generator, seeded at construction
        prompt = self.prompt(turn)
        reply = self.player.sample([prompt], self.generator)[0]
        self.last = (prompt, reply)
        return reply.text.strip().split("\n", 1)[0]


__all__ = ["SYSTEM", "LMTextAgent"]
