"""coplay's text games as the environment of TRL's `GRPOTrainer` (`pip install coplay[trl]`),
the trainer that takes a model to many GPUs and nodes with accelerate.

    from trl import GRPOConfig, GRPOTrainer
    from coplay.scale.trl import GameRollout

    game = GameRollout("text:kuhn_poker", tokenizer, max_new_tokens=4)   # estimator="turn_rloo"
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=game.reward,
                          train_dataset=game.dataset(512), rollout_func=game,
                          args=GRPOConfig(num_generations=8, scale_rewards="none", ...))
    trainer.train()

How a game of several players and several turns enters TRL's GRPO, which groups the
completions of one prompt:

- **A dataset row names a decision**: `"<env> seed=S seat=P turn=K"`, the K-th reply
  (from 0) of seat P in games dealt from seed S (`dataset(n)` writes every seat and turn
  of n deals). TRL asks for `num_generations` completions of it; `GameRollout` plays that
  many self-play episodes from the deal (the trainer's model in every seat, the episodes
  of one deal shared by the rows of one batch) and returns, from each, seat P's K-th reply:
  its prompt's and its reply's token ids as sampled and the sampler's log-probabilities
  (the rollout record of `coplay.lm.rollout`, never decoded and encoded again).
- **The reward is coplay's advantage** of that reply (`estimator`, by default `turn_rloo`:
  the return from the turn on, minus the mean of the same seat's at the same turn in the
  group's other episodes; unbiased however many turns a player chose to take). With
  `scale_rewards="none"` TRL's own centring within the group leaves it unchanged (a
  leave-one-out advantage averages to zero over the episodes that reached the decision),
  so TRL's update uses coplay's estimator; a decision that only one episode of the group
  reached keeps its return in coplay (no other episode to compare with) and gets 0 in TRL.
  `estimator=None` gives the raw return from the turn on, for TRL to normalise.
- **A decision that did not happen** (the seat's game ended before its K-th reply, or the
  episode did not end within the horizon) is a one-token placeholder with reward None,
  which TRL treats as unscorable: no advantage, no part of the group's baseline.

What TRL cannot express that `algo=lm_grpo` does: an adapter per role on one base model
(TRL trains one set of weights: every seat speaks with it), and every reply of an
episode in the same update with its own per-turn advantage (TRL takes one completion per
row: an episode's replies are spread over rows of different prompts). The row names its
seat, so roles never share a group's statistics.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.group_advantages import Episodes, turn_returns
from coplay.algos.common.group_advantages import estimator as find_estimator
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.envs.text.base import TextEnv
from coplay.interop.extras import require
from coplay.lm.models import LoadedModel, stop_ids
from coplay.lm.policy import LMPlayer
from coplay.lm.rollout import Played, TextPlay

_ROW = re.compile(r"seed=(\d+) seat=(\d+) turn=(\d+)")


class GameRollout:
    """TRL's `rollout_func` and reward function for coplay text game `env` (see the module's doc)."""

    def __init__(self, env: str | TextEnv, tokenizer: Any, *, estimator: str | None = "turn_rloo",
                 max_new_tokens: int = 8, temperature: float = 1.0, turns: int | None = None, seed: int = 0,
                 **estimator_options: Any):
        self.env = ENVS.make(env) if isinstance(env, str) else env
        if not isinstance(self.env, TextEnv):
            raise ConfigError(f"GameRollout plays coplay's text games (text:...), not {self.env.spec.name!r}")
        spec = self.env.spec
        self.estimate = find_estimator(estimator) if estimator is not None else None
        if self.estimate is not None and self.estimate.stateful:
            raise ConfigError(f"estimator={estimator} carries a baseline from batch to batch, which TRL's rollouts "
                              "do not keep; give one of the others")
        self.options = estimator_options
        self.tokenizer, self.max_new_tokens, self.temperature = tokenizer, max_new_tokens, temperature
        self.turns = turns or (-(-spec.max_steps // spec.num_agents) if spec.turn_based else spec.max_steps)
        self.seed = seed
        self._play: TextPlay | None = None
        self.last: Played | None = None

    # ----- the dataset ----------------------------------------------------------------------------
    def prompts(self, deals: int, first: int = 0, seats: Sequence[int] | None = None,
                turns: Sequence[int] | None = None) -> list[str]:
        """Each seat's each turn (default: all of them) of deals `first .. first + deals - 1`,
        as dataset prompts."""
        name, n = self.env.spec.name, self.env.spec.num_agents
        seats = list(range(n)) if seats is None else list(seats)
        bad = [p for p in seats if not 0 <= p < n]
        if bad:
            raise ConfigError(f"seats {bad}: {name} has seats 0 to {n - 1}")
        return [f"{name} seed={s} seat={p} turn={k}" for s in range(first, first + deals)
                for p in seats for k in (range(self.turns) if turns is None else turns)]

    def dataset(self, deals: int, first: int = 0, seats: Sequence[int] | None = None,
                turns: Sequence[int] | None = None) -> Any:
        """A `datasets.Dataset` with a `prompt` column of `prompts(...)`."""
        datasets = require("datasets", "trl", "coplay.scale.trl")
        return datasets.Dataset.from_dict({"prompt": self.prompts(deals, first, seats, turns)})

    # ----- TRL's rollout_func ---------------------------------------------------------------------
    def _player(self, model: Any) -> TextPlay:
        if self._play is None or self._play.player.model is not model:
            loaded = LoadedModel(model, self.tokenizer, stop_ids(self.tokenizer, model), type(model).__name__)
            player = LMPlayer(loaded, self.env, max_new_tokens=self.max_new_tokens, temperature=self.temperature)
            self._play = TextPlay(player, self.env)
        return self._play

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        """TRL's `rollout_func(prompts, trainer)`: one row per prompt (see the module's doc)."""
        import torch

        rows = [self._parse(p) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model
        play = self._player(model)
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0))
        runs: list[tuple[int, int]] = []   # consecutive identical prompts: (first index, count)
        for i, p in enumerate(prompts):
            if runs and prompts[runs[-1][0]] == p:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((i, 1))
        out: dict[str, list] = {k: [None] * len(prompts) for k in
                                ("prompt_ids", "completion_ids", "logprobs", "coplay_reward", "coplay_return",
                                 "role", "status")}
        cache: dict[tuple[int, int, int], tuple[Played, np.ndarray]] = {}
        training = model.training
        model.eval()
        try:
            for first, count in runs:
                seed, seat, turn = rows[first]
                # the rows of one deal share its episodes; a prompt asked for again gets episodes of its own
                occurrence = sum(1 for f, c in runs if f < first and rows[f] == rows[first] and c == count)
                if (seed, count, occurrence) not in cache:
                    key = jax.random.PRNGKey(seed)   # the deal: the same for every step of training
                    torch_seed = int(np.random.SeedSequence([self.seed, seed, step, occurrence]).generate_state(1)[0])
                    generator = torch.Generator().manual_seed(torch_seed)
                    with torch.no_grad():
                        played = play.play(key, generator, count, count)
                    cache[(seed, count, occurrence)] = (played, self._scores(played))
                played, scores = cache[(seed, count, occurrence)]
                self._rows(out, range(first, first + count), played, scores, seat, turn, model)
                self.last = played
        finally:
            model.train(training)
        return out

    def _parse(self, prompt: Any) -> tuple[int, int, int]:
        text = prompt if isinstance(prompt, str) else str(prompt[-1]["content"] if prompt else "")
        m = _ROW.search(text)
        if not m:
            raise ConfigError(f"the prompt {text[:80]!r} names no decision; GameRollout's prompts read "
                              f"'{self.env.spec.name} seed=<deal> seat=<player> turn=<reply from 0>' "
                              "(GameRollout.dataset writes them)")
        seed, seat, turn = map(int, m.groups())
        if seat >= self.env.spec.num_agents:
            raise ConfigError(f"seat={seat} in {text[:80]!r}: {self.env.spec.name} has seats 0 to "
                              f"{self.env.spec.num_agents - 1}")
        return seed, seat, turn

    def _scores(self, played: Played) -> np.ndarray:
        """`[E, T, N]`: coplay's advantage of each reply, or its return from the turn on."""
        reward = np.where(played.complete[:, None, None], played.reward, np.nan).astype(np.float32)
        if self.estimate is None:
            return np.asarray(turn_returns(jnp.asarray(np.nan_to_num(reward)), self.options.get("gamma", 1.0)))
        ep = Episodes(jnp.asarray(reward), jnp.asarray(played.acted), jnp.asarray(played.group),
                      state=jnp.asarray(played.state) if self.estimate.needs_state else None)
        return np.asarray(self.estimate.fn(ep, **self.options), np.float64)

    def _rows(self, out: dict[str, list], indices: range, played: Played, scores: np.ndarray, seat: int, turn: int,
              model: Any) -> None:
        rec = played.turns
        where = {(e, t, a): i for i, (e, t, a) in enumerate(zip(rec.episode, rec.step, rec.agent))}
        returns = np.asarray(turn_returns(jnp.asarray(played.reward), 1.0))
        end = int(self.tokenizer.eos_token_id)
        for e, row in enumerate(indices):
            steps = np.flatnonzero(played.acted[e, :, seat])
            if len(steps) > turn and played.complete[e]:
                t = int(steps[turn])
                i = where[(e, t, seat)]
                out["prompt_ids"][row] = list(rec.prompts[i])
                out["completion_ids"][row] = list(rec.replies[i])
                out["logprobs"][row] = [float(x) for x in rec.old[i]]
                out["coplay_reward"][row] = float(scores[e, t, seat])
                out["coplay_return"][row] = float(returns[e, t, seat])
                out["status"][row] = "complete"
            else:   # the decision did not happen: a placeholder TRL scores as unscorable
                out["prompt_ids"][row] = list(rec.prompts[0]) if len(rec) else [end]
                out["completion_ids"][row] = [end]
                out["logprobs"][row] = [0.0]
                out["status"][row] = "complete" if played.complete[e] else "truncated"
            out["role"][row] = self.env.spec.roles[seat]

    # ----- TRL's reward function --------------------------------------------------------------------
    def reward(self, completions: Any = None, coplay_reward: Sequence[float | None] | None = None,
               **kwargs: Any) -> list[float | None]:
        """TRL's reward function: each row's score from the rollout (None where unscorable)."""
        if coplay_reward is None:
            raise ConfigError("GameRollout.reward scores rollouts of GameRollout: pass the GameRollout itself as "
                              "GRPOTrainer's rollout_func")
        return list(coplay_reward)

    __name__ = "coplay_game"   # the name TRL logs the reward under


__all__ = ["GameRollout"]
