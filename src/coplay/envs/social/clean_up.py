"""Clean Up (Hughes et al., 2018; Melting Pot's `clean_up`), in pure JAX: a public
good. Apples grow in an orchard only while the river upstream is clean, and
cleaning it rewards nobody.

N agents (7 by default) walk Melting Pot's map: a river at the top whose cells
pollute, an orchard at the bottom. Stepping onto an apple eats it (+1). Each step,
each empty orchard cell grows an apple with probability

    p = apple_rate * clip((depletion - f) / (depletion - restoration), 0, 1)

where f is the river's pollution, the fraction of its dirt-able cells that are
dirty; Melting Pot's values are apple_rate 0.05, depletion 0.4, restoration 0: at
f >= 0.4 no apple grows. After `dirt_delay` steps (50), each step one clean dirt-able
cell, drawn at random, becomes dirty with probability `dirt_rate` (0.5). The river
starts 79 of its 147 dirt-able cells dirty (f = 0.54), so apples grow only once
somebody cleans. An agent cleans with a beam (`clean_length` 3 ahead, 1 lane to each
side, each lane stopped by a wall or by the first dirt it cleans) that recharges in
`clean_cooldown` steps (2) and costs `clean_cost` (0). It can zap: a beam of length
3, radius 1, that removes the agents it touches for `zap_timeout` steps (50) and
recharges in `zap_cooldown` steps (10) (`grid.zap`). Agents walk on the river. An
apple does not grow under an agent.

Actions (`grid.MOVE_NAMES` then): 7 zap, 8 clean. Episodes last `max_steps` (1000).

Observation of agent i: [ahead + behind + 1, 2 side + 1, 7] float32, its window
(Melting Pot's 11 x 11 by default) of the planes wall, apple, dirt, river, other
agent, zap ready, clean ready; a removed agent sees zeros and is inactive.
global_state: [H, W, 4 + N] the wall, apple, dirt and river planes and one plane per
agent.
info: "apples", "dirt" (cells dirty), "pollution" (f), "eaten", "cleaned" (cells
cleaned this step), "cleaners" (agents that fired the cleaning beam), "zaps",
"zapping" ([N] which agents fired the zap beam),
"zapped", "removed", and the social metrics on the episode's last step.
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

ZAP, CLEAN = 7, 8

# Melting Pot's map: W wall, H a clean river cell that can pollute, F one that starts dirty, R river that never
# pollutes, A orchard (an apple can grow), P spawn point, ' ' sand.
MAP = (
    "WWWWWWWWWWWWWWWWWWWWWWWWWWWWWW",
    "WHFFFHFFHFHFHFHFHFHFHHFHFFFHFW",
    "WHFHFHFFHFHFHFHFHFHFHHFHFFFHFW",
    "WHFFHFFHHFHFHFHFHFHFHHFHFFFHFW",
    "WHFHFHFFHFHFHFHFHFHFHHFHFFFHFW",
    "WHFFFFFFHFHFHFHFHFHFHHFHFFFHFW",
    "W               RFHHHHHH     W",
    "W   P    P          RRR      W",
    "W     P     P   P   RR   P   W",
    "W             P   P RR       W",
    "W   P    P          RR    P  W",
    "W               P   RR P     W",
    "W     P           P RR       W",
    "W           P       RR  P    W",
    "W  P             P  RR       W",
    "W A A A A A A A A A RR  A A AW",
    "WAAAAAAAAAAAAAAAAAAA  AAAAAAAW",
    "WAAAAAAAAAAAAAAAAAAAAAAAAAAAAW",
    "WAAAAAAAAAAAAAAAAAAAAAAAAAAAAW",
    "WAAAAAAAAAAAAAAAAAAAAAAAAAAAAW",
    "WWWWWWWWWWWWWWWWWWWWWWWWWWWWWW",
)
LEGEND = {"W": "wall", "H": "clean", "F": "dirty", "R": "river", "A": "orchard", "P": "spawn", " ": "sand"}


class CleanUpState(struct.PyTreeNode):
    avatars: grid.Avatars
    clean_cooldown: jax.Array   # [N] int32 steps until the cleaning beam can fire again
    apples: jax.Array           # [H, W] bool
    dirt: jax.Array             # [H, W] bool
    tally: Tally
    step: jax.Array             # [] int32


def growth_probability(pollution: jax.Array, apple_rate: float, depletion: float, restoration: float) -> jax.Array:
    """Each empty orchard cell's chance of an apple this step (see the module's doc)."""
    return apple_rate * jnp.clip((depletion - pollution) / (depletion - restoration), 0.0, 1.0)


class CleanUp(Env):
    def __init__(self, n_agents: int = 7, max_steps: int = 1000, apple_rate: float = 0.05, depletion: float = 0.4,
                 restoration: float = 0.0, dirt_rate: float = 0.5, dirt_delay: int = 50, clean_length: int = 3,
                 clean_radius: int = 1, clean_cooldown: int = 2, clean_cost: float = 0.0, zap_length: int = 3,
                 zap_radius: int = 1, zap_timeout: int = 50, zap_cooldown: int = 10, view_ahead: int = 9,
                 view_behind: int = 1, view_side: int = 5):
        cells = grid.parse_map(MAP, LEGEND)
        spawns = int(cells["spawn"].sum())

        def number(v, lo, hi):
            return isinstance(v, (int, float)) and lo <= v <= hi

        need("n_agents", n_agents, whole(n_agents, 1, spawns), f"an integer in [1, {spawns}] (the spawn points)")
        need("max_steps", max_steps, whole(max_steps, 1), "an integer >= 1")
        for name, v in (("apple_rate", apple_rate), ("dirt_rate", dirt_rate), ("depletion", depletion),
                        ("restoration", restoration)):
            need(name, v, number(v, 0, 1), "a number in [0, 1]")
        need("restoration", restoration, restoration < depletion, f"below depletion={depletion}")
        for name, v in (("dirt_delay", dirt_delay), ("clean_length", clean_length), ("clean_radius", clean_radius),
                        ("clean_cooldown", clean_cooldown), ("zap_length", zap_length), ("zap_radius", zap_radius),
                        ("zap_cooldown", zap_cooldown)):
            need(name, v, whole(v, 0), "an integer >= 0")
        need("zap_timeout", zap_timeout, whole(zap_timeout, 1), "an integer >= 1")
        need("clean_cost", clean_cost, number(clean_cost, 0, 1e9), "a number >= 0")
        grid.check_view(view_ahead, view_behind, view_side)
        self.n_agents, self.max_steps = n_agents, max_steps
        self.apple_rate, self.depletion, self.restoration = float(apple_rate), float(depletion), float(restoration)
        self.dirt_rate, self.dirt_delay = float(dirt_rate), dirt_delay
        self.clean_length, self.clean_radius, self.clean_cooldown = clean_length, clean_radius, clean_cooldown
        self.clean_cost = float(clean_cost)
        self.zap_length, self.zap_radius = zap_length, zap_radius
        self.zap_timeout, self.zap_cooldown = zap_timeout, zap_cooldown
        self.view = (view_ahead, view_behind, view_side)
        self.walls = jnp.asarray(cells["wall"])
        self.dirtable = jnp.asarray(cells["clean"] | cells["dirty"])
        self.start_dirt = jnp.asarray(cells["dirty"])
        self.river = jnp.asarray(cells["clean"] | cells["dirty"] | cells["river"])
        self.orchard = jnp.asarray(cells["orchard"])
        self.dirt_cells = jnp.asarray(np.argwhere(cells["clean"] | cells["dirty"]).astype(np.int32))
        self.spawn_points = cells["spawn"]
        h, w = self.walls.shape
        self.spec = EnvSpec(
            name="clean_up", num_agents=n_agents,
            obs_space=Box(0.0, 1.0, (view_ahead + view_behind + 1, 2 * view_side + 1, 7)),
            action_space=Discrete(9), global_state_space=Box(0.0, 1.0, (h, w, 4 + n_agents)),
            max_steps=max_steps, render_text=self.render_text, render_rgb=self.render_rgb,
        )

    def pollution(self, dirt: jax.Array) -> jax.Array:
        """[] the fraction of the river's dirt-able cells that are dirty."""
        return jnp.sum(dirt & self.dirtable) / jnp.sum(self.dirtable)

    # ----- reset --------------------------------------------------------------------------------
    def _reset(self, key: jax.Array) -> tuple[CleanUpState, TimeStep]:
        n = self.n_agents
        state = CleanUpState(avatars=grid.start(key, n, self.spawn_points), clean_cooldown=jnp.zeros((n,), jnp.int32),
                             apples=jnp.zeros(self.walls.shape, bool), dirt=self.start_dirt, tally=Tally.zeros(n),
                             step=jnp.zeros((), jnp.int32))
        z = jnp.zeros((), jnp.int32)
        return state, self._timestep(state, jnp.zeros((n,), jnp.float32), jnp.zeros((), bool), z, z, z,
                                     jnp.zeros((n,), bool), z, z)

    # ----- dynamics -----------------------------------------------------------------------------
    def _step(self, state: CleanUpState, actions: jax.Array, key: jax.Array) -> tuple[CleanUpState, TimeStep]:
        k_begin, k_grow, k_dirt, k_where = jax.random.split(key, 4)
        avatars, actions, invalid, present = grid.begin_step(state.avatars, actions, 9, self.walls,
                                                             self.spawn_points, k_begin)
        pos, facing = avatars.pos, avatars.facing
        eats = present & state.apples[pos[:, 0], pos[:, 1]]
        apples = state.apples.at[pos[:, 0], pos[:, 1]].min(~present)
        # cleaning: each lane of a ready beam cleans up to its first dirt
        cleaners = (actions == CLEAN) & present & (state.clean_cooldown == 0) & (self.clean_length > 0)
        swept = grid.beam(pos, facing, self.clean_length, self.clean_radius, self.walls, absorbs=state.dirt)
        swept = jnp.any(swept & cleaners[:, None, None], axis=0)
        cleaned = jnp.sum(swept & state.dirt, dtype=jnp.int32)
        dirt = state.dirt & ~swept
        clean_cooldown = jnp.where(cleaners, self.clean_cooldown, jnp.maximum(state.clean_cooldown - 1, 0))
        avatars, fired, hit = grid.zap(avatars, (actions == ZAP) & (self.zap_length > 0), self.walls,
                                       self.zap_length, self.zap_radius, self.zap_timeout, self.zap_cooldown)
        reward = (eats.astype(jnp.float32) - self.clean_cost * cleaners).astype(jnp.float32)
        # the river pollutes: one clean cell, drawn at random, turns dirty with probability dirt_rate
        step = state.step + 1
        cells = self.dirt_cells                                                     # [K, 2] the dirt-able cells
        clean = ~dirt[cells[:, 0], cells[:, 1]]
        where = cells[jnp.argmax(jnp.where(clean, jax.random.uniform(k_where, clean.shape), -1.0))]
        spawn_dirt = (step > self.dirt_delay) & jnp.any(clean) & (jax.random.uniform(k_dirt) < self.dirt_rate)
        dirt = dirt.at[where[0], where[1]].max(spawn_dirt)
        # apples grow as the river's pollution allows; never under an agent
        under = jnp.any(grid.occupancy(avatars.pos, avatars.present, apples.shape), axis=0)
        p = growth_probability(self.pollution(dirt), self.apple_rate, self.depletion, self.restoration)
        apples = apples | (self.orchard & ~under & (jax.random.uniform(k_grow, apples.shape) < p))
        truncated = step >= self.max_steps
        new = CleanUpState(avatars=avatars, clean_cooldown=clean_cooldown, apples=apples, dirt=dirt,
                           tally=state.tally.add(reward, ~avatars.present), step=step)
        count = lambda x: jnp.sum(x, dtype=jnp.int32)  # noqa: E731
        return new, self._timestep(new, reward, truncated, count(eats), cleaned, count(cleaners), fired,
                                   count(jnp.any(hit, axis=0)), count(invalid))

    # ----- observation --------------------------------------------------------------------------
    def _timestep(self, state: CleanUpState, reward, done, eaten, cleaned, cleaners, zapping, zapped,
                  invalid) -> TimeStep:
        a = state.avatars
        on = grid.occupancy(a.pos, a.present, self.walls.shape)
        items = jnp.stack([self.walls, state.apples, state.dirt, self.river], -1)
        ready = jnp.stack([a.cooldown == 0, state.clean_cooldown == 0], -1)
        obs = grid.observe(a, on, items, ready, self.view)
        info = {"apples": jnp.sum(state.apples, dtype=jnp.int32), "dirt": jnp.sum(state.dirt, dtype=jnp.int32),
                "pollution": self.pollution(state.dirt).astype(jnp.float32), "eaten": eaten, "cleaned": cleaned,
                "cleaners": cleaners, "zaps": jnp.sum(zapping, dtype=jnp.int32), "zapping": zapping, "zapped": zapped,
                "removed": jnp.sum(~a.present, dtype=jnp.int32),
                "invalid_actions": invalid, **report(state.tally, done)}
        return TimeStep(obs=obs, reward=reward, done=done, truncated=done, active=a.present,
                        action_mask=grid.legal(a, 9), global_state=grid.world(on, items), info=info)

    # ----- rendering ----------------------------------------------------------------------------
    def render_text(self, state: CleanUpState) -> str:
        layers = [(self.river, "~"), (state.dirt, "x"), (state.apples, "a")]
        return grid.render(np.asarray(self.walls), layers, state.avatars, int(state.step)) + \
            f"; apples {int(state.apples.sum())}; pollution {float(self.pollution(state.dirt)):.2f}"

    def render_rgb(self, state: CleanUpState, cell: int = 12) -> np.ndarray:
        layers = [(self.river, (120, 170, 230)), (state.dirt, (120, 110, 60)), (state.apples, (60, 170, 60))]
        return grid.render_image(np.asarray(self.walls), layers, state.avatars, cell)
