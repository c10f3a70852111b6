"""The prisoner's dilemma in a grid arena (Melting Pot's
`prisoners_dilemma_in_the_matrix__arena`), in pure JAX: agents collect resources of
two kinds, cooperation and defection, and play the dilemma with whom they meet,
each with the mixed strategy its inventory makes.

N agents (8 by default) walk Melting Pot's arena. Stepping onto a resource adds one
of its kind to the agent's inventory (capped at `max_inventory`); a taken resource
cell regrows with probability `regrow_rate` (0.04) per step once `regrow_delay`
steps (10) have passed. An agent holding at least one resource can interact: a beam
`beam_length` cells ahead (3), `beam_radius` lanes to each side (1), stopped by
walls, meets the nearest other agent in it that holds a resource too. Agents are
taken one at a time in a random order; each is in at most one interaction a step.
With inventories c_i (cooperate, defect) and strategies s_i = c_i / sum(c_i),
the two players get

    r_i = s_i^T A s_j,   r_j = s_j^T A s_i,   A = payoff = ((3, 0), (5, 1))

(Melting Pot's matrix: rows the player's own move, cooperate then defect). Both
inventories empty and both players leave the map for `interaction_timeout` steps
(50). The beam recharges in `interact_cooldown` steps (2).

Actions (`grid.MOVE_NAMES` then): 7 interact. Episodes last `max_steps` (1000).

Observation of agent i: [ahead + behind + 1, 2 side + 1, 7] float32, its window of
the planes wall, cooperation resource, defection resource, other agent, ready to
interact, and its inventory of each kind over max_inventory (two constant planes).
global_state: [H, W, 3 + N] the wall and resource planes and one plane per agent.
info: "interactions" this step, "cooperation" the sum of the interacting players'
cooperative shares s_i[0] (over an episode, divided by twice the interactions:
the cooperation rate), "collected" resources picked up, "interacting" ([N] which
agents fired the beam), and the social metrics on the episode's last step.
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

INTERACT = 7

# Melting Pot's arena: '1' a cooperation resource, '2' a defection one, 'a' either (drawn at each reset).
MAP = (
    "WWWWWWWWWWWWWWWWWWWWWWWWW",
    "WPPPP      W W      PPPPW",
    "WPPPP               PPPPW",
    "WPPPP               PPPPW",
    "WPPPP               PPPPW",
    "W                       W",
    "W        11             W",
    "W        11             W",
    "W        aa             W",
    "W    WW     W  222      W",
    "WW    1a    W  222      W",
    "WWW   1a  WWWWWWWWW     W",
    "W     1a    111       WWW",
    "W           111         W",
    "W       aa W            W",
    "W       22 W   WW       W",
    "W       22     Waaa     W",
    "W               222     W",
    "W                       W",
    "WPPPP               PPPPW",
    "WPPPP               PPPPW",
    "WPPPP               PPPPW",
    "WPPPP         W     PPPPW",
    "WWWWWWWWWWWWWWWWWWWWWWWWW",
)
LEGEND = {"W": "wall", "P": "spawn", "1": "cooperate", "2": "defect", "a": "either", " ": "floor"}


class ArenaState(struct.PyTreeNode):
    avatars: grid.Avatars
    kind: jax.Array         # [H, W] int32: 0 cooperation, 1 defection, -1 no resource cell
    full: jax.Array         # [H, W] bool: the resource is there
    since: jax.Array        # [H, W] int32: steps since it was taken
    inventory: jax.Array    # [N, 2] int32
    tally: Tally
    step: jax.Array         # [] int32


class PDArena(Env):
    def __init__(self, n_agents: int = 8, max_steps: int = 1000, payoff: tuple = ((3.0, 0.0), (5.0, 1.0)),
                 regrow_rate: float = 0.04, regrow_delay: int = 10, max_inventory: int = 20, beam_length: int = 3,
                 beam_radius: int = 1, interact_cooldown: int = 2, interaction_timeout: int = 50,
                 view_ahead: int = 9, view_behind: int = 1, view_side: int = 5):
        cells = grid.parse_map(MAP, LEGEND)
        spawns = int(cells["spawn"].sum())

        need("n_agents", n_agents, whole(n_agents, 2, spawns), f"an integer in [2, {spawns}] (the spawn points)")
        need("max_steps", max_steps, whole(max_steps, 1), "an integer >= 1")
        matrix = np.asarray(payoff, dtype=float) if np.ndim(payoff) == 2 else np.zeros(0)
        need("payoff", payoff, matrix.shape == (2, 2), "a 2 x 2 matrix ((CC, CD), (DC, DD)), the row player's")
        need("regrow_rate", regrow_rate, isinstance(regrow_rate, (int, float)) and 0 <= regrow_rate <= 1,
             "a probability in [0, 1]")
        for name, v, lo in (("regrow_delay", regrow_delay, 0), ("max_inventory", max_inventory, 1),
                            ("beam_length", beam_length, 1), ("beam_radius", beam_radius, 0),
                            ("interact_cooldown", interact_cooldown, 0),
                            ("interaction_timeout", interaction_timeout, 1)):
            need(name, v, whole(v, lo), f"an integer >= {lo}")
        grid.check_view(view_ahead, view_behind, view_side)
        self.n_agents, self.max_steps = n_agents, max_steps
        self.payoff = jnp.asarray(matrix, jnp.float32)
        self.regrow_rate, self.regrow_delay, self.max_inventory = float(regrow_rate), regrow_delay, max_inventory
        self.beam_length, self.beam_radius = beam_length, beam_radius
        self.interact_cooldown, self.interaction_timeout = interact_cooldown, interaction_timeout
        self.view = (view_ahead, view_behind, view_side)
        self.walls = jnp.asarray(cells["wall"])
        self.spawn_points = cells["spawn"]
        self.fixed_kind = jnp.asarray(np.where(cells["cooperate"], 0, np.where(cells["defect"], 1, -1)), jnp.int32)
        self.either = jnp.asarray(cells["either"])
        h, w = self.walls.shape
        self.spec = EnvSpec(
            name="pd_arena", num_agents=n_agents,
            obs_space=Box(0.0, 1.0, (view_ahead + view_behind + 1, 2 * view_side + 1, 7)),
            action_space=Discrete(8), global_state_space=Box(0.0, 1.0, (h, w, 3 + n_agents)),
            max_steps=max_steps, render_text=self.render_text, render_rgb=self.render_rgb,
        )

    # ----- reset --------------------------------------------------------------------------------
    def _reset(self, key: jax.Array) -> tuple[ArenaState, TimeStep]:
        n = self.n_agents
        k_pos, k_kind = jax.random.split(key)
        kind = jnp.where(self.either, jax.random.randint(k_kind, self.walls.shape, 0, 2), self.fixed_kind)
        state = ArenaState(avatars=grid.start(k_pos, n, self.spawn_points), kind=kind, full=kind >= 0,
                           since=jnp.zeros(self.walls.shape, jnp.int32), inventory=jnp.zeros((n, 2), jnp.int32),
                           tally=Tally.zeros(n), step=jnp.zeros((), jnp.int32))
        z = jnp.zeros((), jnp.int32)
        return state, self._timestep(state, jnp.zeros((n,), jnp.float32), jnp.zeros((), bool), z,
                                     jnp.zeros((), jnp.float32), z, jnp.zeros((n,), bool), z)

    # ----- dynamics -----------------------------------------------------------------------------
    def _step(self, state: ArenaState, actions: jax.Array, key: jax.Array) -> tuple[ArenaState, TimeStep]:
        n = self.n_agents
        k_begin, k_order, k_grow = jax.random.split(key, 3)
        a, actions, invalid, present = grid.begin_step(state.avatars, actions, 8, self.walls, self.spawn_points,
                                                       k_begin)
        pos, facing = a.pos, a.facing
        # collect
        picked = present & state.full[pos[:, 0], pos[:, 1]]
        kind_here = state.kind[pos[:, 0], pos[:, 1]]
        gain = picked[:, None] & (kind_here[:, None] == jnp.arange(2)[None])
        inventory = jnp.minimum(state.inventory + gain, self.max_inventory)
        full = state.full.at[pos[:, 0], pos[:, 1]].min(~picked)
        since = jnp.where(state.full, 0, state.since + 1)          # a resource taken now starts its wait at 0
        # interact, one initiator at a time
        holding = jnp.sum(inventory, axis=1) > 0
        firing = (actions == INTERACT) & present & (a.cooldown == 0) & holding
        cells = grid.beam(pos, facing, self.beam_length, self.beam_radius, self.walls)           # [N, H, W]
        seen = cells[:, pos[:, 0], pos[:, 1]] & present[None] & holding[None] & ~jnp.eye(n, dtype=bool)
        reach = jnp.abs(pos[None, :, :] - pos[:, None, :]).sum(-1)                              # [i, j] distance
        strategy = inventory / jnp.maximum(jnp.sum(inventory, axis=1, keepdims=True), 1)        # [N, 2]

        def meet(carry, i):
            busy, reward, coop = carry
            candidates = seen[i] & ~busy & ~busy[i] & firing[i]
            j = jnp.argmin(jnp.where(candidates, reach[i] * (n + 1) + jnp.arange(n), 1 << 30))
            met = jnp.any(candidates)
            r_i = strategy[i] @ self.payoff @ strategy[j]
            r_j = strategy[j] @ self.payoff @ strategy[i]
            reward = reward.at[i].add(met * r_i).at[j].add(met * r_j)
            busy = busy.at[i].max(met).at[j].max(met)
            return (busy, reward, coop + met * (strategy[i, 0] + strategy[j, 0])), None

        init = (jnp.zeros(n, bool), jnp.zeros(n, jnp.float32), jnp.zeros((), jnp.float32))
        (met, reward, cooperation), _ = jax.lax.scan(meet, init, jax.random.permutation(k_order, n))
        inventory = jnp.where(met[:, None], 0, inventory)
        a = a.replace(removed=jnp.where(met, self.interaction_timeout, a.removed),
                      cooldown=jnp.where(firing, self.interact_cooldown, jnp.maximum(a.cooldown - 1, 0)))
        # resources regrow after the delay, not under an agent
        under = jnp.any(grid.occupancy(a.pos, a.present, full.shape), axis=0)
        grow = (state.kind >= 0) & ~full & (since >= self.regrow_delay) & ~under & \
            (jax.random.uniform(k_grow, full.shape) < self.regrow_rate)
        full = full | grow
        step = state.step + 1
        truncated = step >= self.max_steps
        new = ArenaState(avatars=a, kind=state.kind, full=full, since=jnp.where(full, 0, since),
                         inventory=inventory, tally=state.tally.add(reward, ~a.present), step=step)
        return new, self._timestep(new, reward, truncated, jnp.sum(met, dtype=jnp.int32) // 2, cooperation,
                                   jnp.sum(picked, dtype=jnp.int32), firing, jnp.sum(invalid, dtype=jnp.int32))

    # ----- observation --------------------------------------------------------------------------
    def _timestep(self, state: ArenaState, reward, done, interactions, cooperation, collected, interacting,
                  invalid) -> TimeStep:
        a = state.avatars
        on = grid.occupancy(a.pos, a.present, self.walls.shape)
        items = jnp.stack([self.walls, state.full & (state.kind == 0), state.full & (state.kind == 1)], -1)
        holding = jnp.sum(state.inventory, axis=1) > 0
        seen = grid.observe(a, on, items, ((a.cooldown == 0) & holding)[:, None], self.view)      # [N, V, W, 5]
        own = (state.inventory / self.max_inventory * a.present[:, None]).astype(jnp.float32)   # [N, 2]
        obs = jnp.concatenate([seen, jnp.broadcast_to(own[:, None, None, :], (*seen.shape[:3], 2))], -1)
        info = {"interactions": interactions, "cooperation": cooperation, "collected": collected,
                "interacting": interacting, "invalid_actions": invalid, **report(state.tally, done)}
        return TimeStep(obs=obs, reward=reward, done=done, truncated=done, active=a.present,
                        action_mask=grid.legal(a, 8), global_state=grid.world(on, items), info=info)

    # ----- rendering ----------------------------------------------------------------------------
    def render_text(self, state: ArenaState) -> str:
        full, kind = np.asarray(state.full), np.asarray(state.kind)
        layers = [(full & (kind == 0), "c"), (full & (kind == 1), "d")]
        inv = ", ".join(f"{chr(ord('A') + i)}:{c}/{d}" for i, (c, d) in enumerate(np.asarray(state.inventory)))
        return grid.render(np.asarray(self.walls), layers, state.avatars, int(state.step)) + f"; inventories {inv}"

    def render_rgb(self, state: ArenaState, cell: int = 12) -> np.ndarray:
        full, kind = np.asarray(state.full), np.asarray(state.kind)
        layers = [(full & (kind == 0), (60, 170, 60)), (full & (kind == 1), (200, 60, 60))]
        return grid.render_image(np.asarray(self.walls), layers, state.avatars, cell)
