"""Scripted players for the mixed-motive societies: the background populations of
`coplay scenario` (Melting Pot 2.0's protocol) and fixed opponents anywhere a
`Policy` goes.

A scripted player reads the environment's state (`Policy.observe`), not its
egocentric window, and acts in the moves of `grid`. On a grid it does one thing:
it walks the shortest path (a breadth-first distance field over the walls; other
agents are ignored, and `grid.move` lets a blocked step fail) to the nearest cell of
what it wants, and where a beam is part of it (cleaning, mining, zapping, interacting)
it turns to face a target within the beam's reach in a straight line and fires
once the beam is ready. A small share of its moves (`EXPLORE`, 5%) is uniformly
random, so that two bots never block each other for good.

| substrate | bot | what it does |
|---|---|---|
| commons_harvest | harvester | eats the nearest apple |
| | sustainable_harvester | eats only apples with `KEEP` (8) of the 12 cells within the regrowth radius full |
| | zapper | eats the nearest apple and zaps any agent straight ahead in its beam's reach |
| clean_up | cleaner | walks to the nearest dirt and cleans it, never eats |
| | harvester | eats the nearest apple, never cleans |
| | zapper | eats, and zaps any agent straight ahead |
| coins | cooperator | takes only coins of its own colour |
| | defector | takes the nearest coin of any colour |
| coop_mining | cooperator | mines gold, joining a partly mined gold first |
| | defector | mines iron only |
| pd_arena | cooperator | collects `HOLD` (2) cooperation resources, then interacts with any agent that holds one |
| | defector | the same with defection resources |
| population_dilemma | cooperator | names the partner of highest reputation, cooperates, never punishes |
| | defector | names a partner at random, defects, never punishes |
| | punisher | as the cooperator, and punishes every defection it may (its partner's, the watched game's) |

`random` (uniformly random legal moves) plays every substrate too.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from coplay.algos.common.matches import bare_env
from coplay.core.env import Env, Wrapper
from coplay.core.policy import Policy, no_carry
from coplay.envs.social import clean_up, coins, commons_harvest, coop_mining, grid, pd_arena, population_dilemma

EXPLORE = 0.05   # share of a grid bot's moves drawn uniformly from the seven moves
KEEP = 8         # a sustainable harvester eats an apple with at least this many others (of 12) within the radius
HOLD = 2         # resources a pd_arena bot holds before it seeks a partner

# The absolute direction (grid.HEADINGS) of a step, relative to the facing: -> the move that takes it.
_STEP_MOVE = jnp.array([grid.FORWARD, grid.STEP_RIGHT, grid.BACKWARD, grid.STEP_LEFT], jnp.int32)
# ... and the turn towards it (behind: turn right, twice over two steps).
_TURN = jnp.array([grid.STAY, grid.TURN_RIGHT, grid.TURN_RIGHT, grid.TURN_LEFT], jnp.int32)


def distance(walls: jax.Array, targets: jax.Array) -> jax.Array:
    """[H, W] int32: each cell's number of steps to the nearest cell of `targets`
    ([H, W] bool) through non-wall cells (4-neighbour moves); H * W where none is
    reachable (or there is none)."""
    h, w = walls.shape
    far = h * w
    d = jnp.where(targets & ~walls, 0, far).astype(jnp.int32)

    def relax(c):
        d, _ = c
        p = jnp.pad(d, 1, constant_values=far)
        near = jnp.minimum(jnp.minimum(p[:-2, 1:-1], p[2:, 1:-1]), jnp.minimum(p[1:-1, :-2], p[1:-1, 2:]))
        new = jnp.where(walls, far, jnp.minimum(d, near + 1))
        return new, jnp.any(new != d)

    # relaxed until nothing changes: as many rounds as the farthest reachable cell is away
    return jax.lax.while_loop(lambda c: c[1], relax, (d, jnp.array(True)))[0]


def _lines(pos: jax.Array, length: int, walls: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The cells 1..length away from `pos` in each absolute direction (`grid.lanes` of
    radius 0): (row, col, open), each [4, L], open while before the first wall."""
    r, c, open_ = jax.vmap(lambda d: grid.lanes(pos, d, length, 0, walls))(jnp.arange(4))
    return r[..., 0], c[..., 0], open_[..., 0]


def _toward(d: jax.Array, walls: jax.Array, pos: jax.Array, facing: jax.Array, key: jax.Array) -> jax.Array:
    """The move that steps one agent down the distance field `d` [H, W] (random among
    equally good steps), or a random move where no step is better than staying."""
    r, c, open_ = _lines(pos, 1, walls)
    nd = jnp.where(open_[:, 0], d[r[:, 0], c[:, 0]], d.size)
    k_tie, k_wander = jax.random.split(key)
    best = jnp.argmin(nd + jax.random.uniform(k_tie, (4,), maxval=0.5))
    better = nd[best] < d[pos[0], pos[1]]
    return jnp.where(better, _STEP_MOVE[(best - facing) % 4],
                     jax.random.randint(k_wander, (), grid.FORWARD, grid.TURN_RIGHT + 1))


def _in_line(targets: jax.Array, walls: jax.Array, pos: jax.Array, length: int) -> jax.Array:
    """[4] bool: a cell of `targets` lies 1..length cells away in each absolute direction,
    before the first wall."""
    r, c, open_ = _lines(pos, length, walls)
    return jnp.any(targets[r, c] & open_, axis=1)


class Aim(NamedTuple):
    """A beam a grid bot fires: at cells of `targets` ([H, W], or [N, H, W] one set per
    agent) within `length` straight ahead, with action `action` once `ready` ([N])."""

    targets: jax.Array
    length: int
    action: int
    ready: jax.Array
    turn: bool = True     # turn to face a target beside or behind (else fire only at one ahead)


def grid_actions(walls: jax.Array, avatars: grid.Avatars, goals: jax.Array, key: jax.Array,
                 aim: Aim | None = None) -> jax.Array:
    """[N] the actions of grid bots in one environment: each walks to the nearest cell
    of `goals` ([H, W] for all, or [N, H, W] one set per agent) and fires `aim`'s beam at
    a target straight ahead. Where `aim.turn`, it also turns to face a target in line
    beside or behind it, and waits, facing one, while its beam recharges."""
    n = avatars.pos.shape[0]
    per_agent = goals.ndim == 3
    fields = jax.vmap(distance, in_axes=(None, 0))(walls, goals) if per_agent else distance(walls, goals)
    k_move, k_explore, k_random = jax.random.split(key, 3)

    def one(i, k):
        d = fields[i] if per_agent else fields
        act = _toward(d, walls, avatars.pos[i], avatars.facing[i], k)
        if aim is not None:
            targets = aim.targets[i] if aim.targets.ndim == 3 else aim.targets
            line = _in_line(targets, walls, avatars.pos[i], aim.length)
            f = avatars.facing[i]
            ahead = line[f]
            rel = (jnp.argmax(line) - f) % 4
            # a beam at what it came for: fire, or wait facing it; a beam on the way (turn False): fire
            # when ready, else walk on
            act = jnp.select([ahead & aim.ready[i], ahead & aim.turn, line.any() & aim.turn],
                             [jnp.int32(aim.action), jnp.int32(grid.STAY), _TURN[rel]], act)
        return act

    acts = jax.vmap(one)(jnp.arange(n), jax.random.split(k_move, n))
    explore = jax.random.uniform(k_explore, (n,)) < EXPLORE
    return jnp.where(explore, jax.random.randint(k_random, (n,), 0, grid.TURN_RIGHT + 1), acts).astype(jnp.int32)


def _others(avatars: grid.Avatars, h: int, w: int, also: jax.Array | None = None) -> jax.Array:
    """[N, H, W]: for each agent, the cells of the other present agents (of those where `also` [N])."""
    on = grid.occupancy(avatars.pos, avatars.present if also is None else avatars.present & also, (h, w))
    return jnp.any(on, axis=0)[None] & ~on


# ----- the substrates' bots: (env, state, key) -> [N] actions ------------------------------------------
def _harvest(env, s, key, keep: int = 0, zap: bool = False):
    apples = s.apples
    if keep:
        apples = apples & (commons_harvest.apples_near(apples, env.radius) >= keep)
    h, w = apples.shape
    aim: Aim | None = Aim(_others(s.avatars, h, w), env.beam_length, commons_harvest.ZAP,
                          s.avatars.cooldown == 0, turn=False) if zap else None
    return grid_actions(env.walls, s.avatars, apples, key, aim)


def _clean_up(env, s, key, clean: bool = False, zap: bool = False):
    if clean:
        return grid_actions(env.walls, s.avatars, s.dirt, key, Aim(s.dirt, env.clean_length, clean_up.CLEAN,
                                                                    s.clean_cooldown == 0))
    h, w = s.apples.shape
    aim: Aim | None = Aim(_others(s.avatars, h, w), env.zap_length, clean_up.ZAP, s.avatars.cooldown == 0,
                          turn=False) if zap else None
    return grid_actions(env.walls, s.avatars, s.apples, key, aim)


def _coins(env, s, key, greedy: bool = False):
    n = s.avatars.pos.shape[0]
    # greedy: every coin, one distance field for all; else each agent's own colour
    goals = s.coins != coins.NO_COIN if greedy else s.coins[None] == jnp.arange(n)[:, None, None]
    return grid_actions(env.walls, s.avatars, goals, key)


def _mining(env, s, key, gold: bool = True):
    if gold:
        # a partly mined gold first (it needs a second miner now), else any gold
        started = s.ore == coop_mining.PARTIAL
        targets = jnp.where(started.any(), started, (s.ore == coop_mining.GOLD) | started)
    else:
        targets = s.ore == coop_mining.IRON
    aim = Aim(targets, env.beam_length, coop_mining.MINE, s.avatars.cooldown == 0)
    return grid_actions(env.walls, s.avatars, targets, key, aim)


def _arena(env, s, key, kind: int = 0):
    h, w = env.walls.shape
    holding = s.inventory.sum(-1) > 0
    partners = _others(s.avatars, h, w, also=holding)                          # [N, H, W]
    collect = jnp.broadcast_to(s.full & (s.kind == kind), partners.shape)
    seeking = s.inventory[:, kind] >= HOLD
    goals = jnp.where(seeking[:, None, None], partners, collect)
    aim = Aim(partners, env.beam_length, pd_arena.INTERACT, (s.avatars.cooldown == 0) & seeking)
    return grid_actions(env.walls, s.avatars, goals, key, aim)


def _population(env, s, key, move: int = 0, punish: bool = False, choose: bool = True):
    n = env.n_agents
    kind = jnp.asarray(env.phases)[s.phase]
    others = ~jnp.eye(n, dtype=bool)
    k_rep, k_any = jax.random.split(key)
    noise = jax.random.uniform(k_rep, (n, n), maxval=1e-3)                     # ties between reputations: at random
    best = jnp.argmax(jnp.where(others, s.reputation[None] + noise, -1.0), axis=1)
    anyone = jnp.argmax(jnp.where(others, jax.random.uniform(k_any, (n, n)), -1.0), axis=1)
    name = best if choose else anyone
    direct = env.direct & (s.moves[s.partner] == population_dilemma.DEFECT)
    third = env.third & ((s.moves[s.watched] == population_dilemma.DEFECT)
                         | (s.moves[s.partner[s.watched]] == population_dilemma.DEFECT))
    sanction = jnp.where(punish, direct.astype(jnp.int32) + 2 * third.astype(jnp.int32), 0)
    return jnp.select([kind == population_dilemma.SELECT, kind == population_dilemma.PLAY,
                       kind == population_dilemma.PUNISH],
                      [name, jnp.full((n,), move), sanction], 0).astype(jnp.int32)


def substrate_bots() -> dict[str, dict[str, Callable]]:
    """substrate -> {bot name: its rule `(env, state, key) -> [N] actions`}."""
    return {
        "commons_harvest": {"harvester": _harvest, "sustainable_harvester": partial(_harvest, keep=KEEP),
                            "zapper": partial(_harvest, zap=True)},
        "clean_up": {"cleaner": partial(_clean_up, clean=True), "harvester": _clean_up,
                     "zapper": partial(_clean_up, zap=True)},
        "coins": {"cooperator": _coins, "defector": partial(_coins, greedy=True)},
        "coop_mining": {"cooperator": _mining, "defector": partial(_mining, gold=False)},
        "pd_arena": {"cooperator": _arena, "defector": partial(_arena, kind=1)},
        "population_dilemma": {"cooperator": partial(_population, move=population_dilemma.COOPERATE),
                               "defector": partial(_population, move=population_dilemma.DEFECT, choose=False),
                               "punisher": partial(_population, move=population_dilemma.COOPERATE, punish=True)},
    }


def substrate_of(env: Env) -> str | None:
    """The substrate `env` is (its name), or None where it is none of them (or is one
    seen through a wrapper that changes its state: the bots read the substrate's own)."""
    env = bare_env(env)
    return None if isinstance(env, Wrapper) or env.spec.name not in substrate_bots() else env.spec.name


def bots_for(env: Env) -> tuple[str, ...]:
    """The names of the scripted players of `env`'s substrate (none for other environments)."""
    sub = substrate_of(env)
    return tuple(substrate_bots()[sub]) if sub else ()


def social_bot(name: str, env: Env) -> Policy:
    """The scripted player `name` of `env`'s substrate (`bots_for(env)` lists them)."""
    rule: Callable[[Any, Any, jax.Array], jax.Array] = substrate_bots()[substrate_of(env)][name]  # type: ignore[index]
    env = bare_env(env)

    def act(params, state, mask, key, carry, reset):
        b = mask.shape[0]
        return jax.vmap(lambda s, k: rule(env, s, k))(state, jax.random.split(key, b)), carry

    return Policy(act=act, initial_carry=no_carry, env=env, observe=lambda state, ts: state)
