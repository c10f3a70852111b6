"""Cooperative Mining (Melting Pot's `coop_mining`), in pure JAX: iron that one
miner can mine, and gold, worth more, that needs two.

N agents (6 by default) walk Melting Pot's 25 x 25 mine. Each step, each empty ore
cell grows iron with probability `iron_rate` (0.0002) or else gold with probability
`gold_rate` (0.00008). An agent mines with a beam `beam_length` cells straight ahead
(3), stopped by walls, that hits the first ore in its line; it recharges in
`mine_cooldown` steps (3). Agents are taken one at a time in a random order each step:

- iron: the miner gets `iron_reward` (1) and the cell is empty again;
- gold: the first hit starts it (the cell shows partly mined); a hit by a different
  agent within `gold_window` steps of the first (the same step included; 3) finishes
  it, and both miners get `gold_reward` (8); the cell is empty again. A gold left
  with one miner when its window closes goes back to whole gold, and its first miner
  gets nothing. A second hit by the same agent counts for nothing.

So gold needs exactly two distinct miners within the window. Agents walk over ore.

Actions (`grid.MOVE_NAMES` then): 7 mine. Episodes last `max_steps` (1000).

Observation of agent i: [ahead + behind + 1, 2 side + 1, 6] float32, its window of
the planes wall, iron, gold, gold partly mined, other agent, beam ready.
global_state: [H, W, 4 + N] the wall, iron, gold and partly-mined planes and one
plane per agent.
info: "iron_mined", "gold_mined", "gold_started", "gold_expired" this step,
"mining" ([N] which agents fired the beam), and the social metrics on the last step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.social import grid
from coplay.envs.social.grid import need, whole
from coplay.envs.social.metrics import Tally, report

MINE = 7
EMPTY, IRON, GOLD, PARTIAL = range(4)

MAP = (
    "WWWWWWWWWWWWWWWWWWWWWWWWWWW",
    "WOOOOOOOOOOOOOOOOOOOOOOOOOW",
    "WOPOOOOOOOOOPOOOOOPOOOOOPOW",
    "WOOOOOOOOWOOOOOOOOOOOOOOOOW",
    "WOOOOOOOOWOOOOOOOOOOWOOOOOW",
    "WOOOOOOOOWOOOOOOOOOOWOOOOOW",
    "WOOOOOOOOWWWWWWWOOOOWOOOPOW",
    "WOPOWWOOOOWOOOOOOOOOWOOOOOW",
    "WOOOOOOOOOWOOPOOOOOOOOOOOOW",
    "WOOOOOOOOOWOOOOOWWWOOOOOOOW",
    "WOOOOOOOOOWOOOOOOOOOOOOOOOW",
    "WOOOOOOOOOOOOOOOOOOOOOOOPOW",
    "WOPOOOWWWOOOOOOWWWWWWWWOOOW",
    "WOOWWWWOOOOOOOOOOOOOOOOOOOW",
    "WOOOOOWOOOOWOOOOOPOOOOOOOOW",
    "WOOOOOWOOOOWOOOOOOOOOOOOPOW",
    "WOOOOOWOOOOOWOOOOOOOOWOOOOW",
    "WOOOOOOWOOOOOWWWWOOOOWOOOOW",
    "WOPOOOOOWOOOOOOOOOOOOWOOOOW",
    "WOOOOOOOOWOOOPOOOOOOOOOOPOW",
    "WOOOOOOOOOWOOOOOOOOWOOOOOOW",
    "WOOOOWOOOOOOOOOOOOOWOOOOOOW",
    "WOOOOWOOOOOOOOOWWWWWWWWOOOW",
    "WOOOOWOOOOOOOOOOOOWOOOOOOOW",
    "WOPOOOOOOPOOOOOOOPOOOOOOPOW",
    "WOOOOOOOOOOOOOOOOOOOOOOOOOW",
    "WWWWWWWWWWWWWWWWWWWWWWWWWWW",
)
LEGEND = {"W": "wall", "O": "ore", "P": "spawn"}


class MiningState(struct.PyTreeNode):
    avatars: grid.Avatars
    ore: jax.Array            # [H, W] int32: EMPTY, IRON, GOLD or PARTIAL
    first_miner: jax.Array    # [H, W] int32: who started a partly mined gold (-1 otherwise)
    window_left: jax.Array    # [H, W] int32: steps left to finish it, this one included
    tally: Tally
    step: jax.Array           # [] int32


def first_ore_ahead(pos: jax.Array, facing: jax.Array, length: int, walls: jax.Array,
                    ore: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(cell [2], found []) the first cell with ore within `length` cells straight
    ahead of one agent, before any wall (a beam of radius 0: `grid.lanes`)."""
    r, c, open_ = grid.lanes(pos, facing, length, 0, walls)
    r, c, hit = r[:, 0], c[:, 0], open_[:, 0] & (ore[r[:, 0], c[:, 0]] != EMPTY)
    k = jnp.argmax(hit)
    return jnp.stack([r[k], c[k]]), jnp.any(hit)


class CoopMining(Env):
    def __init__(self, n_agents: int = 6, max_steps: int = 1000, iron_rate: float = 0.0002,
                 gold_rate: float = 0.00008, iron_reward: float = 1.0, gold_reward: float = 8.0, gold_window: int = 3,
                 beam_length: int = 3, mine_cooldown: int = 3, view_ahead: int = 9, view_behind: int = 1,
                 view_side: int = 5):
        cells = grid.parse_map(MAP, LEGEND)
        spawns = int(cells["spawn"].sum())

        need("n_agents", n_agents, whole(n_agents, 2, spawns), f"an integer in [2, {spawns}] (the spawn points)")
        need("max_steps", max_steps, whole(max_steps, 1), "an integer >= 1")
        for name, v in (("iron_rate", iron_rate), ("gold_rate", gold_rate)):
            need(name, v, isinstance(v, (int, float)) and 0 <= v <= 1, "a probability in [0, 1]")
        for name, v in (("iron_reward", iron_reward), ("gold_reward", gold_reward)):
            need(name, v, isinstance(v, (int, float)), "a number")
        need("gold_window", gold_window, whole(gold_window, 1), "an integer >= 1 (1: both miners in one step)")
        need("beam_length", beam_length, whole(beam_length, 1), "an integer >= 1")
        need("mine_cooldown", mine_cooldown, whole(mine_cooldown, 0), "an integer >= 0")
        grid.check_view(view_ahead, view_behind, view_side)
        self.n_agents, self.max_steps = n_agents, max_steps
        self.iron_rate, self.gold_rate = float(iron_rate), float(gold_rate)
        self.iron_reward, self.gold_reward, self.gold_window = float(iron_reward), float(gold_reward), gold_window
        self.beam_length, self.mine_cooldown = beam_length, mine_cooldown
        self.view = (view_ahead, view_behind, view_side)
        self.walls = jnp.asarray(cells["wall"])
        self.ore_cells = jnp.asarray(cells["ore"])
        self.spawn_points = cells["spawn"]
        h, w = self.walls.shape
        self.spec = EnvSpec(
            name="coop_mining", num_agents=n_agents,
            obs_space=Box(0.0, 1.0, (view_ahead + view_behind + 1, 2 * view_side + 1, 6)),
            action_space=Discrete(8), global_state_space=Box(0.0, 1.0, (h, w, 4 + n_agents)),
            max_steps=max_steps, render_text=self.render_text, render_rgb=self.render_rgb,
        )

    # ----- reset --------------------------------------------------------------------------------
    def _reset(self, key: jax.Array) -> tuple[MiningState, TimeStep]:
        n = self.n_agents
        shape = self.walls.shape
        state = MiningState(avatars=grid.start(key, n, self.spawn_points), ore=jnp.zeros(shape, jnp.int32),
                            first_miner=jnp.full(shape, -1, jnp.int32), window_left=jnp.zeros(shape, jnp.int32),
                            tally=Tally.zeros(n), step=jnp.zeros((), jnp.int32))
        z = jnp.zeros((), jnp.int32)
        return state, self._timestep(state, jnp.zeros((n,), jnp.float32), jnp.zeros((), bool), z, z, z, z,
                                     jnp.zeros((n,), bool), z)

    # ----- dynamics -----------------------------------------------------------------------------
    def _step(self, state: MiningState, actions: jax.Array, key: jax.Array) -> tuple[MiningState, TimeStep]:
        n = self.n_agents
        k_begin, k_order, k_grow = jax.random.split(key, 3)
        moved, actions, invalid, _ = grid.begin_step(state.avatars, actions, 8, self.walls, None, k_begin)
        a, pos, facing = state.avatars, moved.pos, moved.facing
        mining = (actions == MINE) & a.present & (a.cooldown == 0)

        def hit(carry, i):
            ore, first, left, reward, counts = carry
            cell, found = first_ore_ahead(pos[i], facing[i], self.beam_length, self.walls, ore)
            kind, r, c = ore[cell[0], cell[1]], cell[0], cell[1]
            go = mining[i] & found
            iron = go & (kind == IRON)
            start = go & (kind == GOLD)
            finish = go & (kind == PARTIAL) & (first[r, c] != i)
            partner = jnp.maximum(first[r, c], 0)
            reward = reward.at[i].add(self.iron_reward * iron + self.gold_reward * finish)
            reward = reward.at[partner].add(self.gold_reward * finish)
            ore = ore.at[r, c].set(jnp.select([iron | finish, start], [EMPTY, PARTIAL], kind))
            first = first.at[r, c].set(jnp.select([iron | finish, start], [-1, i], first[r, c]))
            left = left.at[r, c].set(jnp.select([iron | finish, start], [0, self.gold_window], left[r, c]))
            return (ore, first, left, reward, counts + jnp.stack([iron, finish, start]).astype(jnp.int32)), None

        init = (state.ore, state.first_miner, state.window_left, jnp.zeros(n, jnp.float32), jnp.zeros(3, jnp.int32))
        (ore, first, left, reward, counts), _ = jax.lax.scan(hit, init, jax.random.permutation(k_order, n))
        # the windows close: a gold with one miner goes back to whole gold
        partial = ore == PARTIAL
        left = jnp.where(partial, left - 1, 0)
        expired = partial & (left <= 0)
        ore = jnp.where(expired, GOLD, ore)
        first = jnp.where(expired | (ore != PARTIAL), -1, first)
        # ore grows on empty ore cells, not under an agent
        under = jnp.any(grid.occupancy(pos, a.present, ore.shape), axis=0)
        u = jax.random.uniform(k_grow, ore.shape)
        grows = self.ore_cells & (ore == EMPTY) & ~under
        ore = jnp.where(grows & (u < self.iron_rate), IRON, ore)
        ore = jnp.where(grows & (u >= self.iron_rate) & (u < self.iron_rate + self.gold_rate), GOLD, ore)
        avatars = a.replace(pos=pos, facing=facing,
                            cooldown=jnp.where(mining, self.mine_cooldown, jnp.maximum(a.cooldown - 1, 0)))
        step = state.step + 1
        truncated = step >= self.max_steps
        new = MiningState(avatars=avatars, ore=ore, first_miner=first, window_left=left,
                          tally=state.tally.add(reward, ~avatars.present), step=step)
        return new, self._timestep(new, reward, truncated, counts[0], counts[1], counts[2],
                                   jnp.sum(expired, dtype=jnp.int32), mining, jnp.sum(invalid, dtype=jnp.int32))

    # ----- observation --------------------------------------------------------------------------
    def _timestep(self, state: MiningState, reward, done, iron, gold, started, expired, mining,
                  invalid) -> TimeStep:
        a = state.avatars
        on = grid.occupancy(a.pos, a.present, self.walls.shape)
        items = jnp.stack([self.walls, state.ore == IRON, state.ore == GOLD, state.ore == PARTIAL], -1)
        obs = grid.observe(a, on, items, (a.cooldown == 0)[:, None], self.view)
        info = {"iron_mined": iron, "gold_mined": gold, "gold_started": started, "gold_expired": expired,
                "mining": mining, "invalid_actions": invalid, **report(state.tally, done)}
        return TimeStep(obs=obs, reward=reward, done=done, truncated=done, active=a.present,
                        action_mask=grid.legal(a, 8), global_state=grid.world(on, items), info=info)

    # ----- rendering ----------------------------------------------------------------------------
    def render_text(self, state: MiningState) -> str:
        ore = np.asarray(state.ore)
        layers = [(ore == IRON, "i"), (ore == GOLD, "g"), (ore == PARTIAL, "p")]
        return grid.render(np.asarray(self.walls), layers, state.avatars, int(state.step))

    def render_rgb(self, state: MiningState, cell: int = 12) -> np.ndarray:
        ore = np.asarray(state.ore)
        layers = [(ore == IRON, (150, 150, 160)), (ore == GOLD, (230, 190, 40)), (ore == PARTIAL, (240, 120, 40))]
        return grid.render_image(np.asarray(self.walls), layers, state.avatars, cell)
