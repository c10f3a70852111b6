"""Round-robin tournaments between any policies of one two-player game.

    players = [Player("ppo", trainer.policy(), params),
               Player("random", bots.random_policy(env)),
               Player("minimax", bots.tic_tac_toe_minimax(env))]
    results = round_robin(env, players, games=200, key=jax.random.PRNGKey(0))
    print(format_table(ratings_table(results)))

Every ordered pair of distinct players plays `games` games with the first in
seat 0, so each pairing is played from both seats. The outcome is a
`ratings.Results` (wins, draws and losses per seated pair), from which the
win/draw/loss table with Wilson intervals, Elo and openskill ratings follow.

Players that share one `Policy` object (snapshots of one run, seeds of one
run) differ only in their parameters; their games are compiled once and
`vmap`ped over the stacked parameters, so a tournament of many snapshots costs
one compilation per pair of policy kinds, not per pair of players.

Each pair of policy kinds is one call of `play_grid`, whose random key follows from
the pair's place in the list of players, not from when it is played; `dispatch=`
(`coplay.core.dispatch`) decides where the calls run: here, one after the other (the
default), or as Ray tasks over a cluster's nodes (`coplay.scale.ray_tasks`), with the
same counts, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.common.matches import bare_env, check_same_env, make_match, outcomes, seated
from coplay.core.compile import jit
from coplay.core.dispatch import Dispatch, in_process
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.eval.ratings import Results


@dataclass(frozen=True)
class Player:
    """A named policy with its parameters (`None` for scripted players)."""

    name: str
    policy: Policy
    params: Any = None


def _groups(players: Sequence[Player]) -> list[tuple[Policy, list[int], Any]]:
    """Players grouped by their Policy object: (policy, player indices, stacked params or None)."""
    by_policy: dict[int, tuple[Policy, list[int]]] = {}
    for k, p in enumerate(players):
        by_policy.setdefault(id(p.policy), (p.policy, []))[1].append(k)
    groups = []
    for policy, members in by_policy.values():
        params = [players[k].params for k in members]
        if any(x is None for x in params):
            if not all(x is None for x in params):
                names = [players[k].name for k in members]
                raise ConfigError(f"players {names} share one policy but only some have parameters")
            stacked = None
        else:
            try:
                stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *params)
            except ValueError as e:
                names = [players[k].name for k in members]
                raise ConfigError(f"players {names} share one policy but their parameters differ in shape") from e
        groups.append((policy, members, stacked))
    return groups


# A grid of matches runs once. Up to this many games it compiles without machine-code
# optimisation (`coplay.core.compile`): about 0.5 s less to compile a policy against a bot,
# against up to 75 us more per game played (connect four; 9 us on tic-tac-toe).
FEW_GAMES = 5000


def play_grid(env: Env, policy_a: Policy, policy_b: Policy, params_a: Any, params_b: Any, games: int,
              opening_moves: int, keys: jax.Array) -> dict[str, np.ndarray]:
    """Every member of one policy kind (seat 0) against every member of another (seat 1),
    `games` games each: one compiled grid of matches, the unit of work of a round robin.

    params_a: every leaf stacked [A, ...], or None for a scripted policy (A = 1), and
    likewise params_b; keys: [A, B, ...], a key per pair of members. Returns
    `wdl` [A, B, 3] (seat 0's wins, draws and losses) and `illegal` [A, B, 2] (games
    each seat lost by an illegal move), as int64."""
    play = make_match(env, [policy_a, policy_b], games, opening_moves)

    def one(pa, pb, k):
        out = play([pa, pb], k)
        return {**outcomes(out["return"], 0), "illegal": out["illegal"].sum(0)}

    in_a, in_b = (None if params_a is None else 0), (None if params_b is None else 0)
    grid = jit(jax.vmap(jax.vmap(one, in_axes=(None, in_b, 0)), in_axes=(in_a, None, 0)),
               once=keys.shape[0] * keys.shape[1] * games <= FEW_GAMES)
    out = jax.device_get(grid(params_a, params_b, keys))        # [A, B, games]
    wdl = np.stack([out["win"].sum(-1), out["draw"].sum(-1), out["loss"].sum(-1)], axis=-1)
    return {"wdl": wdl.astype(np.int64), "illegal": np.asarray(out["illegal"], np.int64)}


def round_robin(env: Env, players: Sequence[Player], games: int, key: jax.Array,
                opening_moves: int = 0, dispatch: Dispatch = in_process) -> Results:
    """Play every ordered pair of distinct players `games` times (first player in seat 0).

    Refuses players built for another environment, duplicate names, fewer than
    two players, and games of more or fewer than two seats. `dispatch` makes the
    calls of `play_grid`, one per ordered pair of policy kinds (see the module's doc)."""
    env = bare_env(env)
    if env.spec.num_agents != 2:
        raise ConfigError(f"a round-robin needs a two-player game; {env.spec.name!r} has "
                          f"{env.spec.num_agents} players")
    names = [p.name for p in players]
    if len(players) < 2:
        raise ConfigError(f"a tournament needs at least two players, got {names}")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"player names must be unique; repeated: {dupes}")
    if isinstance(games, bool) or not isinstance(games, int) or games < 1:
        raise ConfigError(f"games={games!r} must be an integer >= 1")
    # a policy built over view-only wrappers (a learner's agent ids) plays through them; players that
    # share a policy (the seeds of a run) keep sharing one
    seats: dict[int, Policy] = {}
    players = [Player(p.name, seats.setdefault(id(p.policy), seated(p.policy, env)), p.params) for p in players]
    check_same_env(env, {p.name: p.policy for p in players})

    counts = np.zeros((len(players), len(players), 3), np.int64)
    illegal = np.zeros((len(players), len(players)), np.int64)
    groups = _groups(players)
    blocks = [(ga, gb) for ga in range(len(groups)) for gb in range(len(groups))
              if ga != gb or len(groups[ga][1]) > 1]
    calls = []
    for ga, gb in blocks:
        (pol_a, members_a, params_a), (pol_b, members_b, params_b) = groups[ga], groups[gb]
        keys = jax.random.split(jax.random.fold_in(key, ga * len(groups) + gb),
                                len(members_a) * len(members_b)).reshape(len(members_a), len(members_b), -1)
        calls.append((env, pol_a, pol_b, params_a, params_b, games, opening_moves, keys))
    for (ga, gb), out in zip(blocks, dispatch(play_grid, calls)):
        for i, a in enumerate(groups[ga][1]):
            for j, b in enumerate(groups[gb][1]):
                if a != b:
                    counts[a, b] += out["wdl"][i, j]
                    illegal[a, b] += int(out["illegal"][i, j, 0])
                    illegal[b, a] += int(out["illegal"][i, j, 1])
    return Results(tuple(names), counts, illegal)
