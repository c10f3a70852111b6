"""The token-faithful multi-agent rollout record that `algo=lm_grpo` trains from.

One row per reply, in the order the replies were written:

    prompts   the prompt's token ids, as the model read them (the chat template applied
              to the agent's view: the environment's and the other agents' words)
    replies   the reply's token ids as sampled: never decoded and encoded again, so the
              tokens trained on are the tokens the sampler chose
    old       the sampler's log-probability of each reply token (decoding=choose_legal:
              one value, the move's, renormalised over the legal moves)
    agent, role, step (the turn), episode, group   who spoke, as which role, when, in
              which episode, and which episodes started from the same state
    version   the optimiser steps the speaking adapter had taken when it sampled: the
              model version of the reply (on-policy replies of one update share it)
    status    the episode's: `complete` (the game ended by its rules), `truncated` (the
              learner's horizon ended it first: it has no result) or `failed` (the game
              raised); only complete episodes are scored and trained on, the others are
              dropped, never scored as a reward of 0

`mask(i)` marks the tokens a loss may see in prompt + reply: the reply's alone (the
prompt's tokens are the environment's and the other agents'). `to_trl` and `to_verl`
write the record with the field names of TRL's `GRPOTrainer` (`rollout_func`'s
`prompt_ids`, `completion_ids`, `logprobs`, `env_mask`) and of verl's batches (`prompts`,
`responses`, `input_ids`, `attention_mask`, `response_mask`, `old_log_probs`,
`advantages`, `uid`), so either trainer can take coplay's rollouts and advantages."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from coplay.envs.text.host_game import STATUSES, Status


@dataclass
class Rollout:
    """The replies of one batch of episodes (see the module's doc)."""

    prompts: list[list[int]] = field(default_factory=list)
    replies: list[list[int]] = field(default_factory=list)
    old: list[np.ndarray] = field(default_factory=list)
    ref: list[np.ndarray] | None = None          # the KL reference's log-probabilities, where kl_coef > 0
    legal: list[list[int]] = field(default_factory=list)   # the moves legal at the turn
    moves: list[int] = field(default_factory=list)         # decoding=choose_legal: the move drawn
    agent: list[int] = field(default_factory=list)
    role: list[str] = field(default_factory=list)
    episode: list[int] = field(default_factory=list)
    group: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    version: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    status: list[Status] = field(default_factory=list)    # per reply: its episode's, set by `finish`
    per_token: bool = True                       # False: `old` holds a move's log-probability (choose_legal)

    def __len__(self) -> int:
        return len(self.prompts)

    def finish(self, episode_status: list[Status] | np.ndarray) -> None:
        """Set every reply's status from its episode's (`episode_status[e]`)."""
        for s in set(map(str, episode_status)):
            if s not in STATUSES:
                raise ValueError(f"status {s!r} is not one of {', '.join(STATUSES)}")
        self.status = [episode_status[e] for e in self.episode]

    def scored(self) -> np.ndarray:
        """`[M]` bool: the replies of complete episodes (the ones a learner trains on)."""
        if len(self.status) != len(self):
            raise ValueError("the record is not finished: call finish() with each episode's status")
        return np.asarray([s == "complete" for s in self.status], bool)

    def mask(self, i: int) -> np.ndarray:
        """`[len(prompt) + len(reply)]` int8: 1 on reply i's own tokens, 0 on its prompt's."""
        return np.concatenate([np.zeros(len(self.prompts[i]), np.int8), np.ones(len(self.replies[i]), np.int8)])

    def _rows(self, keep_all: bool) -> list[int]:
        if not self.per_token:
            raise ValueError("a record of decoding=choose_legal holds each move's log-probability, not one per "
                             "token: TRL and verl train on tokens (decoding=free)")
        return list(range(len(self))) if keep_all else [int(i) for i in np.flatnonzero(self.scored())]

    def to_trl(self, advantages: np.ndarray | None = None, *, keep_all: bool = False) -> dict[str, list]:
        """What TRL's `GRPOTrainer` takes from a `rollout_func`: `prompt_ids`, `completion_ids`,
        `logprobs` (the sampler's, per token) and `env_mask` (1: the model's token), and as
        extra fields (handed to reward functions) `agent`, `role`, `turn`, `group`, `episode`,
        `model_version`, `status` and, where given, `advantages` (`[M]`, per reply). Replies
        of episodes that are not complete are left out unless `keep_all`."""
        rows = self._rows(keep_all)
        out: dict[str, list] = {
            "prompt_ids": [list(self.prompts[i]) for i in rows],
            "completion_ids": [list(self.replies[i]) for i in rows],
            "logprobs": [[float(x) for x in self.old[i]] for i in rows],
            "env_mask": [[1] * len(self.replies[i]) for i in rows],
            "agent": [self.agent[i] for i in rows], "role": [self.role[i] for i in rows],
            "turn": [self.step[i] for i in rows], "group": [self.group[i] for i in rows],
            "episode": [self.episode[i] for i in rows], "model_version": [self.version[i] for i in rows],
            "status": [self.status[i] for i in rows],
        }
        if advantages is not None:
            out["advantages"] = [float(advantages[i]) for i in rows]
        return out

    def to_verl(self, pad_id: int, advantages: np.ndarray | None = None, *,
                keep_all: bool = False) -> dict[str, np.ndarray]:
        """A verl batch: `prompts [M, P]` left-padded with `pad_id`, `responses [M, R]`
        right-padded, `input_ids [M, P + R]`, `attention_mask`, `response_mask [M, R]`,
        `old_log_probs [M, R]` (0 on padding), `advantages [M, R]` (the reply's advantage
        on each of its tokens, where given), and per row `uid` (the group), `traj_uid` (the
        episode), `agent_id`, `role`, `turn`, `model_version`, `status`."""
        rows = self._rows(keep_all)
        m = len(rows)
        p = max((len(self.prompts[i]) for i in rows), default=0)
        r = max((len(self.replies[i]) for i in rows), default=0)
        prompts = np.full((m, p), pad_id, np.int64)
        responses = np.full((m, r), pad_id, np.int64)
        prompt_mask = np.zeros((m, p), np.int64)
        response_mask = np.zeros((m, r), np.int64)
        old = np.zeros((m, r), np.float32)
        for k, i in enumerate(rows):
            a, b = self.prompts[i], self.replies[i]
            prompts[k, p - len(a):] = a
            prompt_mask[k, p - len(a):] = 1
            responses[k, :len(b)] = b
            response_mask[k, :len(b)] = 1
            old[k, :len(b)] = self.old[i]
        out = {"prompts": prompts, "responses": responses, "input_ids": np.concatenate([prompts, responses], 1),
               "attention_mask": np.concatenate([prompt_mask, response_mask], 1), "response_mask": response_mask,
               "old_log_probs": old,
               "uid": np.asarray([str(self.group[i]) for i in rows]),
               "traj_uid": np.asarray([str(self.episode[i]) for i in rows]),
               "agent_id": np.asarray([self.agent[i] for i in rows], np.int64),
               "role": np.asarray([self.role[i] for i in rows]),
               "turn": np.asarray([self.step[i] for i in rows], np.int64),
               "model_version": np.asarray([self.version[i] for i in rows], np.int64),
               "status": np.asarray([self.status[i] for i in rows])}
        if advantages is not None:
            out["advantages"] = (np.asarray(advantages, np.float32)[rows][:, None] * response_mask).astype(np.float32)
        return out


__all__ = ["Rollout"]
