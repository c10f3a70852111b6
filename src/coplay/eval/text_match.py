"""Matches of free-text games: language models, scripted bots and any other text agent
seated in the same game (a TextArena game, or a coplay text game behind TextArena's
loop), scored by the game's own rewards.

    env = coplay.make("textarena:TicTacToe-v0")
    result = play_matches(env, [LMTextAgent("smollm2"), random_legal, first_legal], games=60, seed=0)
    print("\\n".join(result.table()))

An agent is a callable `agent(turn, rng) -> str` (a `coplay.envs.text.host_game.Turn`,
a NumPy generator) with an optional `name`. With P seats and A agents, game g seats the
g-th of the ordered P-tuples of distinct agents (all A!/(A-P)! of them, in turn; every
agent meets every other in every seat as often as the number of games allows), so no
agent keeps the first move. Each agent's row: games played, mean reward with a normal
95% interval over its games, wins (a reward above every other seat's), invalid moves per
reply, and the games that ended truncated or failed, which are dropped from the
rewards (never scored as 0)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coplay.core.errors import ConfigError
from coplay.envs.text.host_game import HostTextEnv, HostTextGame, Turn
from coplay.interop.textarena import random_legal_reply

TextAgent = Callable[[Turn, np.random.Generator], str]


def random_legal(turn: Turn, rng: np.random.Generator) -> str:
    """A scripted bot: a uniformly drawn legal move (see `random_legal_reply`)."""
    return random_legal_reply(turn, rng)


def first_legal(turn: Turn, rng: np.random.Generator) -> str:
    """A scripted bot: the first legal move the game lists (`[pass]` where it lists none)."""
    del rng
    return turn.legal[0] if turn.legal else "[pass]"


class PolicyTextAgent:
    """A coplay text policy (a `Policy` of a coplay text environment: a token-level policy
    trained by `algo=grpo`, or any other) seated in a coplay text game played through
    TextArena's loop (`coplay.interop.textarena.coplay_game`): it reads the view the game
    wrote for its player (the observation's lines before `Available moves:`, encoded in
    coplay's vocabulary), is handed the legal moves listed there as its mask, and its
    utterance is the reply, in brackets."""

    def __init__(self, policy: Any, params: Any, env: Any, name: str = "coplay text policy"):
        import jax

        self.policy, self.params, self.env, self.name = policy, params, env, name
        self.length = int(env.spec.obs_space.shape[-1])
        self.moves = tuple(env.move_texts)
        self._act = jax.jit(lambda p, obs, mask, key: policy.act(p, obs, mask, key, policy.initial_carry((1,)),
                                                                 jax.numpy.ones((1,), bool))[0])

    def __call__(self, turn: Turn, rng: np.random.Generator) -> str:
        import jax

        from coplay.envs.text.vocab import VOCAB

        lines = turn.observation.splitlines()
        view = "\n".join(line for line in lines if not line.startswith("Available moves:"))
        n = self.env.spec.num_agents
        obs = np.zeros((1, n, self.length), np.int32)
        obs[0, turn.player] = VOCAB.encode(view, self.length)
        legal = {m.strip("[]") for m in (turn.legal or ())}
        mask = np.zeros((1, n, len(self.moves)), bool)
        mask[0, turn.player] = [m in legal for m in self.moves] if legal else True
        key = jax.random.PRNGKey(int(rng.integers(2**31 - 1)))
        tokens = np.asarray(self._act(self.params, obs, mask, key))[0, turn.player]
        return "[" + VOCAB.decode(tokens) + "]"


def agent_name(agent: Any) -> str:
    return str(getattr(agent, "name", None) or getattr(agent, "__name__", type(agent).__name__))


@dataclass
class MatchResult:
    """Per agent (in the order given): rewards of its complete games, invalid moves, replies, dropped games."""

    names: list[str]
    rewards: list[list[float]] = field(default_factory=list)
    wins: list[int] = field(default_factory=list)
    invalid: list[int] = field(default_factory=list)
    replies: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)

    def mean(self, i: int) -> tuple[float, float]:
        """Agent i's mean reward over its complete games and the half-width of its 95% interval."""
        r = np.asarray(self.rewards[i], np.float64)
        if r.size == 0:
            return float("nan"), float("nan")
        half = 1.96 * r.std(ddof=1) / np.sqrt(r.size) if r.size > 1 else float("nan")
        return float(r.mean()), float(half)

    def table(self) -> list[str]:
        lines = ["| agent | games | reward (95% CI) | wins | invalid per reply | dropped |",
                 "|---|---|---|---|---|---|"]
        for i, name in enumerate(self.names):
            m, h = self.mean(i)
            lines.append(f"| {name} | {len(self.rewards[i])} | {m:+.3f} ± {h:.3f} | {self.wins[i]} | "
                         f"{self.invalid[i] / max(1, self.replies[i]):.3f} | {self.dropped[i]} |")
        return lines


def play_matches(env: HostTextEnv | Callable[[], HostTextGame], agents: Sequence[TextAgent], games: int,
                 seed: int = 0) -> MatchResult:
    """`games` games of `env` (a registered free-text game, or a function that builds a
    `HostTextGame`) among `agents` (see the module's doc); game g is reset with seed
    `seed + g` and its agents draw from a generator of that seed."""
    make = env.game if isinstance(env, HostTextEnv) else env
    game = make()
    seats = game.num_players
    if games < 1:
        raise ConfigError(f"games={games} must be at least 1")
    if len(agents) < seats and seats > 1:
        raise ConfigError(f"the game has {seats} seats and {len(agents)} agents were given; give at least {seats} "
                          "(the same agent may be given twice)")
    names = [agent_name(a) for a in agents]
    result = MatchResult(names, [[] for _ in agents], [0] * len(agents), [0] * len(agents), [0] * len(agents),
                         [0] * len(agents))
    orders = list(itertools.permutations(range(len(agents)), seats))
    try:
        for g in range(games):
            seated = orders[g % len(orders)]
            rng = np.random.default_rng(seed + g)
            turn: Turn | None = game.reset(seed + g)
            while turn is not None:
                who = seated[turn.player]
                step = game.step(agents[who](turn, rng))
                result.replies[who] += 1
                result.invalid[who] += int(step.invalid)
                turn = step.turn
            out = game.outcome()
            result.statuses[out.status] = result.statuses.get(out.status, 0) + 1
            for seat, who in enumerate(seated):
                if out.status != "complete":
                    result.dropped[who] += 1
                    continue
                result.rewards[who].append(float(out.rewards[seat]))
                others = np.delete(out.rewards, seat)
                result.wins[who] += int(others.size > 0 and out.rewards[seat] > others.max())
    finally:
        game.close()
    return result


__all__ = ["MatchResult", "PolicyTextAgent", "TextAgent", "agent_name", "first_legal", "play_matches",
           "random_legal"]
