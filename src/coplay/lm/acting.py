"""A language model as a coplay `Policy`, for tournaments and evaluation loops.

The model runs on the host, so its `act` enters compiled code through
`jax.pure_callback` (vmapped parameters are called one after another): the
callback decodes each agent's view, writes the prompt, samples a reply with a
torch.Generator seeded from the step's key, and returns the replies as
utterances `[..., N, T]` for the text environment to parse. The parameters are
the seed's index (`params [S]` for a run of S seeds), which picks the seed's
adapters; the base model has one "seed".

Who speaks: in a turn-based game whose views end with "your move" for the
agent to move (the text games do), that agent only; otherwise every agent.
Where the evaluation loop hands the policy the legal moves (a text game played
through `coplay.envs.text.scoring.speaker`, or `MovesAsMask`), the prompt names
those moves; where it hands an empty mask (the text environment itself), every
move the environment understands.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.policy import Policy, no_carry
from coplay.envs.text.vocab import PAD, VOCAB
from coplay.lm.policy import LMPlayer


def _speakers(views: list[str], turn_based: bool) -> list[bool]:
    """Who writes a reply: in a turn-based game whose views say whose move it is, the
    agent whose view ends with "your move" (the others' utterances are not read);
    otherwise every agent."""
    mover = [v.endswith("your move") for v in views]
    return mover if turn_based and any(mover) else [True] * len(views)


def lm_policy(player: LMPlayer, select: Any = None) -> Policy:
    """`player` as a Policy of its text environment. `select(seed)`, where given, is
    called with the seed index (the policy's parameter) before each batch, to switch
    adapters (`LMGRPO.use_seed`)."""
    env = player.env
    if env is None:
        raise ValueError("a language model plays as a Policy of a coplay text environment; this one has none")
    n, t_max = env.spec.num_agents, player.max_tokens
    moves = player.moves

    def host(seed: np.ndarray, obs: np.ndarray, mask: np.ndarray, key: np.ndarray) -> np.ndarray:
        import torch

        if select is not None:
            select(int(seed))
        lead = obs.shape[:-2]
        flat_obs = obs.reshape(-1, n, obs.shape[-1])
        flat_mask = mask.reshape(-1, n, mask.shape[-1])
        out = np.full((flat_obs.shape[0], n, t_max), PAD, np.int32)
        generator = torch.Generator().manual_seed(int(np.asarray(key, np.uint32).reshape(-1)[-1]))
        named = flat_mask.shape[-1] == len(moves)
        views = [[VOCAB.decode(flat_obs[b, a]) for a in range(n)] for b in range(flat_obs.shape[0])]
        speaks = np.asarray([_speakers(row, env.spec.turn_based) for row in views]).reshape(-1, n)
        if named:
            speaks &= flat_mask.any(-1)
        for agent in range(n):
            rows = [int(b) for b in np.flatnonzero(speaks[:, agent])]
            if not rows:
                continue
            allowed = [[int(m) for m in np.flatnonzero(flat_mask[b, agent])] if named else list(range(len(moves)))
                       for b in rows]
            prompts = [player.prompt(views[b][agent], agent, [moves[m] for m in ms]) for b, ms in zip(rows, allowed)]
            with player.speaking_as(agent):
                replies = player.sample(prompts, generator, allowed)
            for b, reply in zip(rows, replies):
                out[b, agent] = player.to_utterance(reply)
        return out.reshape(*lead, n, t_max)

    def act(params, obs, mask, key, carry, reset):
        shape = jax.ShapeDtypeStruct(obs.shape[:-1] + (t_max,), jnp.int32)
        tokens = jax.pure_callback(host, shape, params, obs, mask, key, vmap_method="sequential")
        return tokens, carry

    return Policy(act=act, initial_carry=no_carry, env=env)
