"""The self-play arena: who sits in the seats of a learner's games, shared by the
trainers that play against themselves (`selfplay_ppo`, `grpo`).

    self      the learner in every seat, learning from every seat
    latest, uniform, pfsp
              the learner in one seat, snapshots of itself from the opponent
              pool (`algos.common.opponent_pool`) in the others, drawn per game
              (prioritised fictitious self-play weighs them by the learner's
              results against each)
    a bot     a scripted player (`algos.common.bots`) in the others, playing
              the game under a text game's words

A share of the groups can be played against a scripted bot instead (`bot_share`,
the learner in one seat): self-play that also sees the mistakes a weaker player
makes. Exploration (`explore=eps`, `exploratory_moves`): at each turn the learner
is to speak in a group not against a scripted bot, with probability eps it plays
a uniformly random legal move instead of its own: the exploratory moves of
self-play systems (AlphaZero's root noise, the epsilon-greedy moves of
TD-Gammon-style self-play), which put the game in positions a settled self-play
would never reach and let the policy in the other seat show what punishes them.
A random move is not the policy's, so its turn is not trained and takes no part
in any group's statistics; the turns before and after it are trained on the
outcome it led to (a bias). After the games, the learner's results against each snapshot
feed PFSP, and on schedule the learner joins the pool (`after_games`).

Seats are per game (`Seats`: the learner's seat, the pool slot, whether a bot
plays); arrays with the agents on an axis are read at a seat with `seat_row` /
`seat_rows`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import jax
import jax.numpy as jnp
from flax import struct

from coplay.algos.common import opponent_pool
from coplay.algos.common.bots import BOTS, Bot, make_bot
from coplay.algos.common.matches import make_match, outcomes, random_policy
from coplay.algos.common.opponent_pool import Pool
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Evaluator, Policy
from coplay.envs.text.games import TextGame
from coplay.nets.token_policy import Speakers, Utterance, scripted

PoolOpponent = Literal["latest", "uniform", "pfsp"]
Opponent = Literal["self", PoolOpponent, Bot]
POOL_OPPONENTS: tuple[str, ...] = get_args(PoolOpponent)
OPPONENTS: tuple[str, ...] = ("self", *POOL_OPPONENTS, *get_args(Bot))


@dataclass(frozen=True)
class PoolConfig:
    """The fields of an opponent pool of the learner's snapshots."""

    pool_size: int = param(8, "snapshots kept in the opponent pool (the oldest leaves first)", min=1)
    snapshot_every: int = param(10, "updates between snapshots of the learner joining the pool", min=1)
    pfsp_power: float = param(2.0, "PFSP weight (1 - score rate) ** power; larger favours harder opponents",
                              min=0.0)
    pfsp_decay: float = param(0.99, "per-update decay of the results PFSP weighs by", min=0.0, max=1.0)


@dataclass(frozen=True)
class ArenaConfig(PoolConfig):
    """Who plays the other seats of a group-RL learner's games (see the module's doc)."""

    opponent: Opponent = param("self", "who plays the other seats: self (the learner, every seat learns), a "
                                  "snapshot from the pool drawn latest, uniform or by pfsp, or a scripted bot "
                                  "(random, minimax) playing the game under a text game's words (the learner "
                                  "takes one seat per group)", choices=OPPONENTS)
    bot_share: float = param(0.0, "share of the groups in which a scripted bot (algo.bot) takes every seat but "
                                  "the learner's (one seat per group, drawn); the other groups are played as "
                                  "algo.opponent says. Needs a text game", min=0.0, max=1.0)
    bot: Bot = param("random", "the scripted bot of the bot_share groups", choices=tuple(BOTS))
    explore: float = param(0.0, "epsilon: each learner turn outside the bot groups is, with this probability, "
                                "a uniformly random legal move instead of the policy's, and is not trained", min=0.0,
                           max=1.0)


# ----- reading arrays at seats --------------------------------------------------------------------


def seat_rows(x: jax.Array, seats: jax.Array) -> jax.Array:
    """x [E, N, ...], seats [E, K] -> [E, K, ...]: each game's rows at its seats."""
    idx = seats.reshape(*seats.shape, *([1] * (x.ndim - 2)))
    return jnp.take_along_axis(x, idx, axis=1)


def seat_row(x: jax.Array, seat: jax.Array) -> jax.Array:
    """x [..., N, ...] with the seats on axis `seat.ndim`, seat [...] -> the row at `seat` [..., ...]."""
    idx = seat.reshape(*seat.shape, 1, *([1] * (x.ndim - seat.ndim - 1)))
    return jnp.take_along_axis(x, idx, axis=seat.ndim).squeeze(seat.ndim)


def choose(where: jax.Array, a: Any, b: Any) -> Any:
    """Pytrees `a` and `b` of leaves [E, K, ...] taken from `a` where `where` [E, K], else `b`."""
    return jax.tree.map(lambda x, y: jnp.where(where.reshape(*where.shape, *([1] * (x.ndim - where.ndim))), x, y),
                        a, b)


# ----- who sits where ------------------------------------------------------------------------------


class Seats(struct.PyTreeNode):
    """The seats of a batch of games [E]."""

    seat: jax.Array       # [E] int32 the learner's seat; -1: every seat (self-play)
    opponent: jax.Array   # [E] int32 the pool slot playing the other seats (0 where none plays)
    vs_bot: jax.Array     # [E] bool: a scripted bot plays the other seats


def check_opponents(opponent: str, bot_share: float, bot: str, env: Env) -> Policy | None:
    """Refuse seatings `env` cannot have, and return the scripted bot the games need
    (playing the game under a text game's words), or None."""
    spec = env.spec
    n = spec.num_agents
    if opponent != "self" and n < 2:
        raise ConfigError(f"algo.opponent={opponent} needs another seat, and {spec.name!r} has one agent; "
                          f"use algo.opponent=self")
    if bot_share > 0 and opponent in BOTS:
        raise ConfigError(f"algo.bot_share={bot_share} mixes a scripted bot into self-play or pool play, and "
                          f"algo.opponent={opponent} is a bot in every group already; use algo.bot_share=0, "
                          f"or algo.opponent=self or one of {', '.join(POOL_OPPONENTS)}")
    if bot_share > 0 and n < 2:
        raise ConfigError(f"algo.bot_share={bot_share} gives a scripted bot another seat, and {spec.name!r} "
                          f"has one agent; use algo.bot_share=0")
    if opponent not in BOTS and bot_share == 0:
        return None
    name, setting = (opponent, "algo.opponent") if opponent in BOTS else (bot, "algo.bot")
    if not isinstance(env, TextGame):
        raise ConfigError(f"{setting}={name} is a scripted bot, which plays the game under a text "
                          f"game's words, and {spec.name!r} is not a text game (a TextGame: text:kuhn_poker, "
                          f"text:leduc_holdem, text:tic_tac_toe, text:connect_four); use "
                          + ("algo.bot_share=0" if setting == "algo.bot" else
                             f"algo.opponent=self or one of {', '.join(POOL_OPPONENTS)}"))
    try:
        return make_bot(name, env.game, shown=spec.name)
    except ConfigError as e:
        raise ConfigError(f"{setting}={name}: {e}") from None


def draw_seats(seat_key: jax.Array, pool_key: jax.Array, groups: int, group_size: int, num_agents: int,
               opponent: str, bot_share: float, pool: Pool | None, pfsp_power: float) -> Seats:
    """The seats of `groups` groups of `group_size` games (a group's games share their draws):
    against a bot in a `bot_share` of the groups and everywhere with a bot `opponent`; the
    learner in one seat unless the group is self-play; a pool slot with a pool opponent."""
    per_game = lambda x: jnp.repeat(x, group_size, axis=0)  # noqa: E731
    vs_bot = jnp.full((groups * group_size,), opponent in BOTS)
    if bot_share > 0:
        vs_bot = per_game(jax.random.uniform(jax.random.fold_in(seat_key, 1), (groups,)) < bot_share)
    seat = jnp.full((groups * group_size,), -1, jnp.int32)
    if opponent != "self" or bot_share > 0:
        seat = per_game(jax.random.randint(seat_key, (groups,), 0, num_agents, jnp.int32))
        if opponent == "self":
            seat = jnp.where(vs_bot, seat, -1)     # self-play groups: the learner in every seat
    slot = jnp.zeros((groups * group_size,), jnp.int32)
    if opponent in POOL_OPPONENTS:
        assert pool is not None, "a pool opponent needs the pool"
        slot = per_game(opponent_pool.sample(pool, pool_key, groups, opponent, pfsp_power))
    return Seats(seat=seat, opponent=slot, vs_bot=vs_bot)


def redraw_ended(seat_key: jax.Array, pool_key: jax.Array, done: jax.Array, seat: jax.Array, slot: jax.Array,
                 pool: Pool, num_agents: int, sampling: str, pfsp_power: float) -> tuple[jax.Array, jax.Array]:
    """Games that just ended (`done` [E]) start again with a new seat and pool slot."""
    e = done.shape[0]
    seat = jnp.where(done, jax.random.randint(seat_key, (e,), 0, num_agents, jnp.int32), seat)
    slot = jnp.where(done, opponent_pool.sample(pool, pool_key, e, sampling, pfsp_power), slot)
    return seat, slot


def exploratory_moves(key: jax.Array, eligible: jax.Array, legal: jax.Array,
                      epsilon: float) -> tuple[jax.Array, jax.Array]:
    """With probability `epsilon` at each `eligible` [..] turn with a legal move (`legal`
    [.., A]), a uniformly random legal move: `(move [..], explored [..])`."""
    k_coin, k_move = jax.random.split(key)
    move = jax.random.categorical(k_move, jnp.where(legal, 0.0, -jnp.inf))
    explored = eligible & legal.any(-1) & (jax.random.uniform(k_coin, eligible.shape) < epsilon)
    return move, explored


def opponents_say(speakers: Speakers, pool: Pool | None, bot: Policy | None, env: Env, env_state: Any,
                  views: jax.Array, agents: jax.Array, seats: Seats, key: jax.Array,
                  legal: jax.Array | None) -> Utterance:
    """What the opponents would say at this step in every game [E] of the text environment
    `env`, for the speakers `agents` [E, K] reading `views` [E, K, L] (kept by the caller
    where an opponent is to speak): the scripted `bot`'s move in `env`'s words where
    `seats.vs_bot` (`env` a text game: the bot reads `env_state.obs` and `.legal`, the game's
    underneath), else the utterance of the `pool` snapshot in `seats.opponent`, each game
    with its own parameters."""
    e = agents.shape[0]
    pooled = None
    if pool is not None:
        def against(p, v, a, kk, ok):   # one game's opponent, with its own parameters (ok: None passes)
            one = jax.tree.map(lambda x: x[None], ok)
            return jax.tree.map(lambda x: x[0], speakers.generate(p, v[None], a[None], kk, one))

        pooled = jax.vmap(against)(opponent_pool.gather(pool, seats.opponent), views, agents,
                                   jax.random.split(key, e), legal)
    if bot is None:
        assert pooled is not None, "opponents are a pool, a bot or both"
        return pooled
    assert isinstance(env, TextGame), "check_opponents gives a bot to text games only"
    k_bot = key if pooled is None else jax.random.fold_in(key, 1)
    moves, _ = bot.act(None, env_state.obs, env_state.legal, k_bot, bot.initial_carry((e,)),
                       jnp.zeros((e,), bool))                                              # [E, N]
    said = scripted(env.utterance_of(seat_rows(moves, agents)))                           # [E, K, ...]
    if pooled is None:
        return said
    return choose(jnp.broadcast_to(seats.vs_bot[:, None], agents.shape), said, pooled)


# ----- after the games ----------------------------------------------------------------------------


def after_games(pool: Pool, slots: jax.Array, points: jax.Array, ended: jax.Array, decay: float, params: Any,
                updates: jax.Array, snapshot_every: int, snapshots: bool = True) -> Pool:
    """The learner's `points` against the pool `slots` where a game `ended` (any shape)
    recorded for PFSP; then, every `snapshot_every` updates, the learner's `params` join
    the pool (unless `snapshots` is off: a fixed population)."""
    pool = opponent_pool.record(pool, slots, points, ended, decay)
    if snapshots:
        pool = opponent_pool.add(pool, params, updates, updates % snapshot_every == 0)
    return pool


def after_group_games(config: ArenaConfig, pool: Pool, seats: Seats, returns: jax.Array, ended: jax.Array,
                      params: Any, updates: jax.Array) -> tuple[Pool, dict[str, jax.Array]]:
    """After an update's games (`returns` [E, N], `ended` [E]): the pool with the learner's
    results and, on schedule, its snapshot (a pool opponent), and the learner's outcomes
    against `algo.opponent` and, where a share of the groups met a bot, against the bot
    (`bot/...`)."""
    c, stats = config, {}
    result = outcomes(returns, jnp.maximum(seats.seat, 0))              # (self-play groups: not read)
    if c.opponent != "self":
        pooled = c.opponent in POOL_OPPONENTS
        theirs = ~seats.vs_bot if pooled else seats.vs_bot              # the groups against algo.opponent
        if pooled:
            pool = after_games(pool, seats.opponent, result["points"], ended & theirs, c.pfsp_decay, params, updates,
                               c.snapshot_every)
        stats.update(outcome_means(result, theirs))
    if c.bot_share > 0:
        stats.update(outcome_means(result, seats.vs_bot, "bot/"))
        stats["bot/share"] = jnp.mean(seats.vs_bot.astype(jnp.float32))
    return pool, stats


def outcome_means(result: dict[str, jax.Array], games: jax.Array, prefix: str = "") -> dict[str, jax.Array]:
    """The learner's mean return, win, draw and loss (`matches.outcomes`) over the games
    where `games` [E] (0 where there are none)."""
    n = jnp.maximum(jnp.sum(games), 1)
    return {prefix + k: jnp.sum(jnp.where(games, result[k], 0.0)) / n for k in ("return", "win", "draw", "loss")}


def against_random(env: Env, me: Policy, episodes: int) -> Evaluator:
    """`evaluate(params, key) -> dict of [episodes']`: `me` (with `params`) in each seat of
    `env` in turn, for an equal share of the games (episodes' >= episodes), against
    uniformly random legal moves in the others: its `return`, `win`, `draw` and `loss`,
    the game's `length`, whether it `finished`, and whether `me` `moved_first`."""
    n = env.spec.num_agents
    per_seat = -(-episodes // n)
    rand = random_policy(env)
    matches = [make_match(env, [me if i == s else rand for i in range(n)], per_seat) for s in range(n)]

    def evaluate(params, key):
        parts = []
        for s, (play, k) in enumerate(zip(matches, jax.random.split(key, n))):
            out = play([params if i == s else None for i in range(n)], k)
            res = outcomes(out["return"], s)
            del res["points"]
            res.update({"length": out["length"].astype(jnp.float32), "finished": out["finished"],
                        "moved_first": (out["first"] == s).astype(jnp.float32)})
            parts.append(res)
        return jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)

    return evaluate
