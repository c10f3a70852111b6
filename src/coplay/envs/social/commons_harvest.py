"""Commons Harvest (Perolat et al., 2017; Melting Pot's `commons_harvest__open`,
`__closed`, `__partnership`), in pure JAX: a common-pool resource that regrows only
where enough of it is left.

N agents (7 by default) walk a walled map (`layout`: open, closed or partnership,
Melting Pot's maps) on which apples grow in patches. Stepping onto an apple eats it
(+1). An empty apple cell regrows an apple each step with a probability set by the
number n of apples within distance `radius` (2; a Euclidean disc, the cell itself
excluded): `regrowth[min(n, 3)]`, which is 0 for n = 0, so a patch eaten bare never
comes back. Melting Pot's probabilities are (0, 0.0025, 0.005, 0.025) on the open map
and (0, 0.001, 0.005, 0.025) on the other two; an apple does not grow under an agent.
Agents can zap: a beam `beam_length` cells ahead, `beam_radius` lanes to each side,
stopped by walls, removes every agent it touches for `zap_timeout` steps (Melting
Pot: 4 on the open map, 100 on the others); a removed agent is off the map, then
comes back on a free spawn point. A beam needs `zap_cooldown` steps to recharge.
Zapping costs the zapper `zap_cost` and the zapped `zap_penalty` (0 and 0 in Melting
Pot). On the closed map the orchards are walled in, each with one agent starting
inside (Melting Pot's two inside spawn points); on the partnership map the wall
between two orchards is open (Melting Pot's hidden role-based punishment tiles there
are floor here).

Actions (`grid.MOVE_NAMES` then): 7 zap. Episodes last `max_steps` (1000; Melting
Pot's end at random after 1000 frames).

Observation of agent i: [ahead + behind + 1, 2 side + 1, 4] float32, its window
(`grid.egocentric`; Melting Pot's 11 x 11 by default) of the planes wall, apple,
other agent, and a plane of ones while its beam is ready. Cells past the map read
as wall; a removed agent sees zeros and is inactive (`active` false: its steps
enter no loss). global_state: [H, W, 2 + N] the map's wall and apple planes and
one plane per agent (its cell while on the map).
info: "apples" apples on the map; "eaten" apples eaten this step; "zaps" beams
fired; "zapping" [N] which agents fired one; "zapped" agents removed this step;
"removed" agents off the map; and the social metrics (`coplay.envs.social.metrics`)
on the episode's last step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.social import grid
from coplay.envs.social.grid import need, whole
from coplay.envs.social.metrics import Tally, report

ZAP = 7

LAYOUTS = {
    "open": (
        "WWWWWWWWWWWWWWWWWWWWWWWW",
        "WAAA    A      A    AAAW",
        "WAA    AAA    AAA    AAW",
        "WA    AAAAA  AAAAA    AW",
        "W      AAA    AAA      W",
        "W       A      A       W",
        "W  A                A  W",
        "W AAA  Q        Q  AAA W",
        "WAAAAA            AAAAAW",
        "W AAA              AAA W",
        "W  A                A  W",
        "W                      W",
        "W                      W",
        "W                      W",
        "W  PPPPPPPPPPPPPPPPPP  W",
        "W PPPPPPPPPPPPPPPPPPPP W",
        "WPPPPPPPPPPPPPPPPPPPPPPW",
        "WWWWWWWWWWWWWWWWWWWWWWWW",
    ),
    "closed": (
        "WWWWWWWWWWWWWWWWWWWWWWWW",
        "WAAA    A  WW  A    AAAW",
        "WAA    AAA WW AAA    AAW",
        "WA    AAAAAWWAAAAA    AW",
        "W      AAA WW AAA      W",
        "W       A  WW  A       W",
        "W  A       WW       A  W",
        "W AAA  Q   WW   Q  AAA W",
        "WAAAAA     WW     AAAAAW",
        "W AAA  WWWWWWWWWW  AAA W",
        "W  A       WW       A  W",
        "WWWWWWWWWW WW WWWWWWWWWW",
        "W          WW          W",
        "W  WWWWWWWWWWWWWWWWWW  W",
        "W  PPPPPPPPPPPPPPPPPP  W",
        "W PPPPPPPPPPPPPPPPPPPP W",
        "WPPPPPPPPPPPPPPPPPPPPPPW",
        "WWWWWWWWWWWWWWWWWWWWWWWW",
    ),
    "partnership": (
        "WWWWWWWWWWWWWWWWWWWWWWWW",
        "WAAA    A      A    AAAW",
        "WAA    AAA    AAA    AAW",
        "WA    AAAAA  AAAAA    AW",
        "W      AAA    AAA      W",
        "W       A      A       W",
        "W  A                A  W",
        "W AAA  Q   WW   Q  AAA W",
        "WAAAAA            AAAAAW",
        "W AAA  WWWWWWWWWW  AAA W",
        "W  A       WW       A  W",
        "WWWWWWWWWW WW WWWWWWWWWW",
        "W          WW          W",
        "W  WWWWWWWWWWWWWWWWWW  W",
        "W  PPPPPPPPPPPPPPPPPP  W",
        "W PPPPPPPPPPPPPPPPPPPP W",
        "WPPPPPPPPPPPPPPPPPPPPPPW",
        "WWWWWWWWWWWWWWWWWWWWWWWW",
    ),
}
LEGEND = {"W": "wall", "A": "apple", "P": "spawn", "Q": "inside", " ": "floor"}
REGROWTH = {"open": (0.0, 0.0025, 0.005, 0.025), "closed": (0.0, 0.001, 0.005, 0.025),
            "partnership": (0.0, 0.001, 0.005, 0.025)}
ZAP_TIMEOUT = {"open": 4, "closed": 100, "partnership": 100}
ZAP_COOLDOWN = {"open": 2, "closed": 1, "partnership": 1}
BEAM_LENGTH = {"open": 3, "closed": 4, "partnership": 4}


class HarvestState(struct.PyTreeNode):
    avatars: grid.Avatars
    apples: jax.Array     # [H, W] bool
    tally: Tally
    step: jax.Array       # [] int32


def _neighbours(radius: float) -> np.ndarray:
    """[K, 2] the offsets within Euclidean distance `radius`, (0, 0) excluded."""
    r = int(np.floor(radius))
    return np.array([(dr, dc) for dr in range(-r, r + 1) for dc in range(-r, r + 1)
                     if 0 < dr * dr + dc * dc <= radius * radius], np.int32)


def apples_near(apples: jax.Array, radius: float) -> jax.Array:
    """[H, W] int32: the apples within distance `radius` of each cell, itself excluded."""
    h, w = apples.shape
    r = int(np.floor(radius))
    padded = jnp.pad(apples.astype(jnp.int32), r)
    return jnp.sum(jnp.stack([padded[r + dr:r + dr + h, r + dc:r + dc + w] for dr, dc in _neighbours(radius)]), 0)


class CommonsHarvest(Env):
    def __init__(self, layout: str = "open", n_agents: int = 7, max_steps: int = 1000,
                 regrowth: tuple[float, ...] | None = None, radius: float = 2.0, zap_timeout: int | None = None,
                 zap_cooldown: int | None = None, beam_length: int | None = None, beam_radius: int = 1,
                 zap_cost: float = 0.0, zap_penalty: float = 0.0, view_ahead: int = 9, view_behind: int = 1,
                 view_side: int = 5):
        if layout not in LAYOUTS:
            raise ConfigError(f"layout={layout!r} is not a Commons Harvest map; valid choices: {', '.join(LAYOUTS)}")
        cells = grid.parse_map(LAYOUTS[layout], LEGEND)
        spawn_count = int(cells["spawn"].sum() + cells["inside"].sum())
        regrowth = tuple(REGROWTH[layout] if regrowth is None else regrowth)
        zap_timeout = ZAP_TIMEOUT[layout] if zap_timeout is None else zap_timeout
        zap_cooldown = ZAP_COOLDOWN[layout] if zap_cooldown is None else zap_cooldown
        beam_length = BEAM_LENGTH[layout] if beam_length is None else beam_length

        need("n_agents", n_agents, whole(n_agents, 1, spawn_count), f"an integer in [1, {spawn_count}] (the map's "
             "spawn points)")
        need("max_steps", max_steps, whole(max_steps, 1), "an integer >= 1")
        need("regrowth", regrowth, len(regrowth) == 4 and all(isinstance(p, (int, float)) and 0 <= p <= 1
                                                              for p in regrowth),
             "4 probabilities in [0, 1], for 0, 1, 2 and 3 or more apples near")
        need("radius", radius, isinstance(radius, (int, float)) and 1 <= radius <= 5, "a number in [1, 5]")
        need("zap_timeout", zap_timeout, whole(zap_timeout, 1), "an integer >= 1")
        need("zap_cooldown", zap_cooldown, whole(zap_cooldown, 0), "an integer >= 0")
        need("beam_length", beam_length, whole(beam_length, 0), "an integer >= 0 (0: no zapping)")
        need("beam_radius", beam_radius, whole(beam_radius, 0), "an integer >= 0")
        grid.check_view(view_ahead, view_behind, view_side)
        for name, cost in (("zap_cost", zap_cost), ("zap_penalty", zap_penalty)):
            need(name, cost, isinstance(cost, (int, float)) and cost >= 0, "a number >= 0")
        self.layout, self.n_agents, self.max_steps = layout, n_agents, max_steps
        self.regrowth, self.radius = jnp.asarray(regrowth, jnp.float32), float(radius)
        self.zap_timeout, self.zap_cooldown = zap_timeout, zap_cooldown
        self.beam_length, self.beam_radius = beam_length, beam_radius
        self.zap_cost, self.zap_penalty = float(zap_cost), float(zap_penalty)
        self.view = (view_ahead, view_behind, view_side)
        self.walls = jnp.asarray(cells["wall"])
        self.apple_cells = jnp.asarray(cells["apple"])
        self.spawn_points = cells["spawn"] | cells["inside"]
        self.outer_spawns = cells["spawn"]
        self.inside = np.argwhere(cells["inside"]).astype(np.int32)
        h, w = self.walls.shape
        self.spec = EnvSpec(
            name="commons_harvest", num_agents=n_agents,
            obs_space=Box(0.0, 1.0, (view_ahead + view_behind + 1, 2 * view_side + 1, 4)),
            action_space=Discrete(8), global_state_space=Box(0.0, 1.0, (h, w, 2 + n_agents)),
            max_steps=max_steps, render_text=self.render_text, render_rgb=self.render_rgb,
        )

    # ----- reset --------------------------------------------------------------------------------
    def _reset(self, key: jax.Array) -> tuple[HarvestState, TimeStep]:
        n = self.n_agents
        avatars = grid.start(key, n, self.outer_spawns, self.inside)
        state = HarvestState(avatars=avatars, apples=self.apple_cells, tally=Tally.zeros(n),
                             step=jnp.zeros((), jnp.int32))
        z = jnp.zeros((), jnp.int32)
        return state, self._timestep(state, jnp.zeros((n,), jnp.float32), jnp.zeros((), bool), jnp.zeros((), bool),
                                     z, jnp.zeros((n,), bool), z, z)

    # ----- dynamics -----------------------------------------------------------------------------
    def _step(self, state: HarvestState, actions: jax.Array, key: jax.Array) -> tuple[HarvestState, TimeStep]:
        k_begin, k_grow = jax.random.split(key)
        avatars, actions, invalid, present = grid.begin_step(state.avatars, actions, 8, self.walls,
                                                             self.spawn_points, k_begin)
        pos = avatars.pos
        # eat: an apple under a present agent
        eats = present & state.apples[pos[:, 0], pos[:, 1]]
        apples = state.apples.at[pos[:, 0], pos[:, 1]].min(~present)
        avatars, fired, hit = grid.zap(avatars, (actions == ZAP) & (self.beam_length > 0), self.walls,
                                       self.beam_length, self.beam_radius, self.zap_timeout, self.zap_cooldown)
        struck = jnp.any(hit, axis=0)
        reward = (eats.astype(jnp.float32) - self.zap_cost * fired - self.zap_penalty * struck).astype(jnp.float32)
        # regrowth, from the apples left after eating; never under an agent on the map
        under = jnp.any(grid.occupancy(avatars.pos, avatars.present, apples.shape), axis=0)
        p = self.regrowth[jnp.minimum(apples_near(apples, self.radius), 3)]
        grow = self.apple_cells & ~apples & ~under & (jax.random.uniform(k_grow, apples.shape) < p)
        apples = apples | grow
        step = state.step + 1
        truncated = step >= self.max_steps
        tally = state.tally.add(reward, ~avatars.present)
        new = HarvestState(avatars=avatars, apples=apples, tally=tally, step=step)
        return new, self._timestep(new, reward, truncated, truncated, jnp.sum(eats, dtype=jnp.int32),
                                   fired, jnp.sum(struck, dtype=jnp.int32),
                                   jnp.sum(invalid, dtype=jnp.int32))

    # ----- observation --------------------------------------------------------------------------
    def _timestep(self, state: HarvestState, reward, done, truncated, eaten, zapping, zapped, invalid) -> TimeStep:
        a = state.avatars
        on = grid.occupancy(a.pos, a.present, self.walls.shape)
        items = jnp.stack([self.walls, state.apples], -1)
        obs = grid.observe(a, on, items, (a.cooldown == 0)[:, None], self.view)
        info = {"apples": jnp.sum(state.apples, dtype=jnp.int32), "eaten": eaten,
                "zaps": jnp.sum(zapping, dtype=jnp.int32), "zapping": zapping, "zapped": zapped,
                "removed": jnp.sum(~a.present, dtype=jnp.int32), "invalid_actions": invalid,
                **report(state.tally, done)}
        return TimeStep(obs=obs, reward=reward, done=done, truncated=truncated, active=a.present,
                        action_mask=grid.legal(a, 8), global_state=grid.world(on, items), info=info)

    # ----- rendering ----------------------------------------------------------------------------
    def render_text(self, state: HarvestState) -> str:
        return grid.render(np.asarray(self.walls), [(state.apples, "a")], state.avatars, int(state.step)) + \
            f"; apples {int(state.apples.sum())}"

    def render_rgb(self, state: HarvestState, cell: int = 12) -> np.ndarray:
        return grid.render_image(np.asarray(self.walls), [(state.apples, (60, 170, 60))], state.avatars, cell)
