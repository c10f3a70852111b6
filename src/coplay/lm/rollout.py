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

import contextlib
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.envs.text.base import TextEnv
from coplay.envs.text.host_game import STATUSES, HostTextEnv, HostTextGame, Status, Turn
from coplay.envs.text.vocab import VOCAB, view_keys
from coplay.lm import prompts
from coplay.lm.policy import LMPlayer, Reply


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

    def add(self, prompt: list[int], reply: Reply, *, agent: int, role: str, episode: int, group: int, step: int,
            version: int, legal: list[int] | None = None) -> None:
        """Append one reply as sampled after `prompt`."""
        self.prompts.append(prompt)
        self.replies.append(reply.tokens)
        self.old.append(reply.log_probs)
        self.legal.append([] if legal is None else legal)
        self.moves.append(reply.move)
        self.agent.append(agent)
        self.role.append(role)
        self.episode.append(episode)
        self.group.append(group)
        self.step.append(step)
        self.version.append(version)
        self.texts.append(reply.text)

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


@dataclass
class Played:
    """A batch of episodes as played: the record of its replies and, per episode, step and agent, what
    the estimators read."""

    turns: Rollout
    reward: np.ndarray    # [E, T, N]
    acted: np.ndarray     # [E, T, N] bool
    state: np.ndarray     # [E, T, N] int32 view keys (GiGPO's anchor states)
    invalid: np.ndarray   # [E] invalid utterances per episode
    group: np.ndarray     # [E]
    complete: np.ndarray  # [E] bool: the game ended within the horizon (the others are truncated: unscored)


def _one_voice(agents: Sequence[int]) -> list[tuple[int, list[int]]]:
    return [(agents[0], list(range(len(agents))))] if len(agents) else []


@contextlib.contextmanager
def _as_is(agent: int) -> Iterator[None]:
    yield


class TextPlay:
    """Self-play of a compiled text environment by a language model: every seat played by
    `player`, batches of episodes stepped together (reset, step and the move mask jitted and
    vmapped), one `Rollout` row per reply."""

    def __init__(self, player: LMPlayer, env: TextEnv):
        self.player, self.env = player, env
        self._reset = jax.jit(jax.vmap(env.reset))
        self._step = jax.jit(jax.vmap(env.step))
        self._mask = jax.jit(jax.vmap(env.move_mask))

    def play(self, key: jax.Array, generator: Any, episodes: int, group_size: int, *,
             groups: Callable[[Sequence[int]], list[tuple[int, list[int]]]] = _one_voice,
             speaking_as: Callable[[int], contextlib.AbstractContextManager] = _as_is,
             version: Callable[[int], int] = lambda agent: 0,
             reference: Callable[[Rollout, int], list[np.ndarray]] | None = None,
             horizon: int | None = None) -> Played:
        """`episodes` episodes in groups of `group_size` that start from one reset key each
        (split from `key`; `generator`, a torch.Generator, draws the replies). `groups(agents)`
        says which replies of a turn are sampled together and `speaking_as(agent)` switches
        to that voice (a trainer's adapters); `version(agent)` is the model version recorded;
        `reference(record, start)`, where given, the KL reference's log-probabilities of the
        replies from `start` on. `horizon` (default the environment's `max_steps`): the steps
        played; an episode still going then is truncated (unscored)."""
        env, player = self.env, self.player
        k_reset, k_step = jax.random.split(key)
        group = np.repeat(np.arange(episodes // group_size), group_size)
        state, ts = self._reset(jax.random.split(k_reset, episodes // group_size)[group])
        n, h = env.spec.num_agents, horizon or env.spec.max_steps
        t_max = int(env.spec.action_space.shape[-1])
        reward = np.zeros((episodes, h, n), np.float32)
        acted = np.zeros((episodes, h, n), bool)
        views = np.zeros((episodes, h, n), np.int32)
        invalid = np.zeros(episodes, np.int64)
        done = np.zeros(episodes, bool)
        turns = Rollout(ref=[] if reference is not None else None, per_token=player.decoding == "free")
        roles = env.spec.roles
        for t in range(h):
            active = np.asarray(ts.active) & ~done[:, None]
            if not active.any():
                break
            obs, legal = np.asarray(ts.obs), np.asarray(self._mask(state))
            views[:, t] = np.asarray(view_keys(ts.obs))
            speakers = list(zip(*np.nonzero(active)))
            allowed = [[int(m) for m in np.flatnonzero(legal[e, a])] for e, a in speakers]
            prompts = [player.prompt(VOCAB.decode(obs[e, a]), int(a), [player.moves[m] for m in ms])
                       for (e, a), ms in zip(speakers, allowed)]
            replies: list[Reply | None] = [None] * len(speakers)
            agents = [int(a) for _, a in speakers]
            for agent, idx in groups(agents):
                with speaking_as(agent):
                    drawn = player.sample([prompts[i] for i in idx], generator, [allowed[i] for i in idx])
                    for i, one in zip(idx, drawn):
                        replies[i] = one
            actions = np.zeros((episodes, n, t_max), np.int32)
            start = len(turns)
            for (e, a), ms, p, r in zip(speakers, allowed, prompts, replies):
                assert r is not None
                actions[e, a] = player.to_utterance(r)
                turns.add(p, r, agent=int(a), role=roles[int(a)], episode=int(e), group=int(group[e]), step=t,
                          version=version(int(a)), legal=ms)
            if reference is not None and turns.ref is not None:   # the reference's log-probabilities
                turns.ref.extend(reference(turns, start))
            state, ts = self._step(state, jnp.asarray(actions), jax.random.split(jax.random.fold_in(k_step, t),
                                                                                episodes))
            live = ~done
            reward[:, t] = np.where(live[:, None], np.asarray(ts.reward, np.float32).reshape(episodes, n), 0.0)
            acted[:, t] = active
            if "invalid_utterance" in ts.info:
                invalid += (np.asarray(ts.info["invalid_utterance"]) & active).sum(-1)
            done |= np.asarray(ts.done)
        turns.finish(["complete" if d else "truncated" for d in done])
        return Played(turns, reward, acted, views, invalid, group, done.copy())


class FreeTextPlay:
    """Self-play of a free-text game (`env=textarena:<id>`, `coplay.envs.text.host_game`) by
    a language model, with `TextPlay.play`'s signature: one copy per episode (kept from call
    to call), the copies of a group reset with one seed; each turn, every live game's
    player to move reads the game's messages (`coplay.lm.prompts.free_text_messages`) and
    replies in free text (its first line goes to the game). A game's rewards are the ones
    it reports at its end, received at its last turn; a game that raised (`failed`) or did
    not end within the horizon (`truncated`) is unscored."""

    def __init__(self, player: LMPlayer, env: HostTextEnv):
        self.player, self.env = player, env
        self.games: list[HostTextGame] = []

    def play(self, key: jax.Array, generator: Any, episodes: int, group_size: int, *,
             groups: Callable[[Sequence[int]], list[tuple[int, list[int]]]] = _one_voice,
             speaking_as: Callable[[int], contextlib.AbstractContextManager] = _as_is,
             version: Callable[[int], int] = lambda agent: 0,
             reference: Callable[[Rollout, int], list[np.ndarray]] | None = None,
             horizon: int | None = None) -> Played:
        """As `TextPlay.play`; the games' seeds are drawn from `key`, one per group."""
        env, player = self.env, self.player
        group = np.repeat(np.arange(episodes // group_size), group_size)
        game_seeds = np.asarray(jax.random.randint(key, (episodes // group_size,), 0, 2**31 - 1))
        while len(self.games) < episodes:
            self.games.append(env.game())
        n, h = env.spec.num_agents, horizon or env.spec.max_steps
        reward = np.zeros((episodes, h, n), np.float32)
        acted = np.zeros((episodes, h, n), bool)
        views = np.zeros((episodes, h, n), np.int32)
        invalid = np.zeros(episodes, np.int64)
        status: list[Status] = ["truncated"] * episodes
        now: list[Turn | None] = []
        for e in range(episodes):
            try:
                now.append(self.games[e].reset(int(game_seeds[group[e]])))
            except Exception:  # noqa: BLE001 - a game that cannot start is a failed episode, not a crash
                now.append(None)
                status[e] = "failed"
        turns = Rollout(ref=[] if reference is not None else None)
        roles = env.spec.roles
        for t in range(h):
            live = [e for e in range(episodes) if now[e] is not None]
            if not live:
                break
            speaking = [u for u in (now[e] for e in live) if u is not None]
            prompts_ = [player.chat(prompts.free_text_messages(u.observation, u.legal)) for u in speaking]
            agents = [u.player for u in speaking]
            replies: list[Reply | None] = [None] * len(live)
            for agent, idx in groups(agents):
                with speaking_as(agent):
                    for i, one in zip(idx, player.sample([prompts_[i] for i in idx], generator)):
                        replies[i] = one
            start = len(turns)
            for e, u, p, r in zip(live, speaking, prompts_, replies):
                assert r is not None
                turns.add(p, r, agent=u.player, role=roles[u.player], episode=e, group=int(group[e]), step=t,
                          version=version(u.player))
                acted[e, t, u.player] = True
                views[e, t, u.player] = zlib.crc32(u.observation.encode()) & 0x7FFFFFFF   # the same in every process
            if reference is not None and turns.ref is not None:
                turns.ref.extend(reference(turns, start))
            for e, r in zip(live, replies):
                assert r is not None
                step = self.games[e].step(prompts.first_line(r.text))
                invalid[e] += int(step.invalid)
                now[e] = step.turn
                if step.turn is None:
                    out = self.games[e].outcome()
                    status[e] = out.status
                    if out.status == "complete":
                        reward[e, t] = out.rewards
        turns.finish(status)
        complete = np.asarray([s == "complete" for s in status])
        return Played(turns, reward, acted, views, invalid, group, complete)


__all__ = ["FreeTextPlay", "Played", "Rollout", "TextPlay"]
