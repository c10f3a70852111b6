"""Coins (Lerer & Peysakhovich, 2017; Melting Pot's `coins`), for 2 or N players,
in pure JAX: each agent has a colour; taking a coin of another's colour pays the
taker and costs the coin's owner more.

N agents (2 by default) walk a walled `height` x `width` room. Each step, each empty
cell grows a coin with probability `regrow_rate` per colour (Melting Pot: 0.0005),
its colour drawn uniformly from the agents'. Stepping onto a coin takes it: the
taker gets `own_reward` for a coin of its own colour and `other_reward` for one of
another's (Melting Pot: 1 and 1), and that coin's owner gets `owner_penalty` (-2).
Taking only one's own coins is the cooperative policy; taking every coin is each
agent's greedy one, and two greedy agents score less than two cooperative ones.

Actions: `grid.MOVE_NAMES`. Episodes last `max_steps` (500; Melting Pot's end at
random after 300 frames).

Observation of agent i: [ahead + behind + 1, 2 side + 1, 4] float32, its window
(`grid.egocentric`; 11 x 11 by default) of the planes wall, coin of its own
colour, coin of another's colour, other agent. global_state: [H, W, 1 + 2 N] the
wall plane, one coin plane per colour, one plane per agent.
info: "coins" on the map, "own_coins" and "other_coins" taken this step (of the
taker's colour and of another's), and the social metrics on the episode's last step.
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

NO_COIN = -1


class CoinsState(struct.PyTreeNode):
    avatars: grid.Avatars
    coins: jax.Array      # [H, W] int32: the colour (an agent's index) of the coin on each cell, or NO_COIN
    tally: Tally
    step: jax.Array       # [] int32


class Coins(Env):
    def __init__(self, n_agents: int = 2, height: int = 10, width: int = 10, max_steps: int = 500,
                 regrow_rate: float = 0.0005, own_reward: float = 1.0, other_reward: float = 1.0,
                 owner_penalty: float = -2.0, view_ahead: int = 9, view_behind: int = 1, view_side: int = 5):
        need("height", height, whole(height, 3, 64), "an integer in [3, 64]")
        need("width", width, whole(width, 3, 64), "an integer in [3, 64]")
        need("n_agents", n_agents, whole(n_agents, 2, min(16, height * width // 2)),
             f"an integer in [2, {min(16, height * width // 2)}] for a {height} x {width} room")
        need("max_steps", max_steps, whole(max_steps, 1), "an integer >= 1")
        need("regrow_rate", regrow_rate, isinstance(regrow_rate, (int, float)) and 0 <= regrow_rate * n_agents <= 1,
             f"a number in [0, 1/n_agents = {1 / n_agents:g}]")
        for name, v in (("own_reward", own_reward), ("other_reward", other_reward), ("owner_penalty", owner_penalty)):
            need(name, v, isinstance(v, (int, float)), "a number")
        grid.check_view(view_ahead, view_behind, view_side)
        self.n_agents, self.max_steps, self.regrow_rate = n_agents, max_steps, float(regrow_rate)
        self.own_reward, self.other_reward, self.owner_penalty = float(own_reward), float(other_reward), \
            float(owner_penalty)
        self.view = (view_ahead, view_behind, view_side)
        walls = np.ones((height + 2, width + 2), bool)
        walls[1:-1, 1:-1] = False
        self.walls = jnp.asarray(walls)
        self.floor = ~walls
        self.spec = EnvSpec(
            name="coins", num_agents=n_agents,
            obs_space=Box(0.0, 1.0, (view_ahead + view_behind + 1, 2 * view_side + 1, 4)),
            action_space=Discrete(7), global_state_space=Box(0.0, 1.0, (height + 2, width + 2, 1 + 2 * n_agents)),
            max_steps=max_steps, render_text=self.render_text, render_rgb=self.render_rgb,
        )

    # ----- reset --------------------------------------------------------------------------------
    def _reset(self, key: jax.Array) -> tuple[CoinsState, TimeStep]:
        n = self.n_agents
        state = CoinsState(avatars=grid.start(key, n, self.floor), tally=Tally.zeros(n),
                           coins=jnp.full(self.walls.shape, NO_COIN, jnp.int32), step=jnp.zeros((), jnp.int32))
        z = jnp.zeros((), jnp.int32)
        return state, self._timestep(state, jnp.zeros((n,), jnp.float32), jnp.zeros((), bool), z, z, z)

    # ----- dynamics -----------------------------------------------------------------------------
    def _step(self, state: CoinsState, actions: jax.Array, key: jax.Array) -> tuple[CoinsState, TimeStep]:
        n = self.n_agents
        k_begin, k_grow, k_colour = jax.random.split(key, 3)
        avatars, actions, invalid, _ = grid.begin_step(state.avatars, actions, 7, self.walls, None, k_begin)
        pos = avatars.pos
        taken = state.coins[pos[:, 0], pos[:, 1]]                                   # [N] colour under each agent
        got = taken != NO_COIN
        own = got & (taken == jnp.arange(n))
        other = got & ~own
        # the owners of the coins others took
        robbed = jnp.sum(other[:, None] & (taken[:, None] == jnp.arange(n)[None, :]), axis=0)        # [N]
        reward = (self.own_reward * own + self.other_reward * other + self.owner_penalty * robbed).astype(jnp.float32)
        coins = state.coins.at[pos[:, 0], pos[:, 1]].set(NO_COIN)
        under = jnp.any(grid.occupancy(avatars.pos, avatars.present, coins.shape), axis=0)
        grow = ~self.walls & (coins == NO_COIN) & ~under & \
            (jax.random.uniform(k_grow, coins.shape) < self.regrow_rate * n)
        coins = jnp.where(grow, jax.random.randint(k_colour, coins.shape, 0, n), coins)
        step = state.step + 1
        truncated = step >= self.max_steps
        new = CoinsState(avatars=avatars, coins=coins, tally=state.tally.add(reward, ~avatars.present), step=step)
        return new, self._timestep(new, reward, truncated, jnp.sum(own, dtype=jnp.int32),
                                   jnp.sum(other, dtype=jnp.int32), jnp.sum(invalid, dtype=jnp.int32))

    # ----- observation --------------------------------------------------------------------------
    def _timestep(self, state: CoinsState, reward, done, own, other, invalid) -> TimeStep:
        n = self.n_agents
        a = state.avatars
        present = state.coins != NO_COIN
        mine = state.coins[None] == jnp.arange(n)[:, None, None]                        # [N, H, W]
        walls = jnp.broadcast_to(self.walls, mine.shape)
        items = jnp.stack([walls, mine, present[None] & ~mine], -1)                     # [N, H, W, 3]
        on = grid.occupancy(a.pos, a.present, self.walls.shape)
        obs = grid.observe(a, on, items, jnp.zeros((n, 0), bool), self.view)
        colours = jnp.moveaxis(mine, 0, -1)                                             # [H, W, N]
        world = grid.world(on, jnp.concatenate([self.walls[..., None], colours], -1))
        info = {"coins": jnp.sum(present, dtype=jnp.int32), "own_coins": own, "other_coins": other,
                "invalid_actions": invalid, **report(state.tally, done)}
        return TimeStep(obs=obs, reward=reward, done=done, truncated=done, active=a.present,
                        action_mask=grid.legal(a, 7), global_state=world, info=info)

    # ----- rendering ----------------------------------------------------------------------------
    def render_text(self, state: CoinsState) -> str:
        coins = np.asarray(state.coins)
        layers = [(coins == i, chr(ord("a") + i)) for i in range(self.n_agents)]
        return grid.render(np.asarray(self.walls), layers, state.avatars, int(state.step)) + \
            "; a coin's letter is its owner's"

    def render_rgb(self, state: CoinsState, cell: int = 12) -> np.ndarray:
        coins = np.asarray(state.coins)
        palette = [(220, 60, 60), (60, 170, 60), (230, 180, 40), (170, 80, 200), (40, 180, 200)]
        layers = [(coins == i, palette[i % len(palette)]) for i in range(self.n_agents)]
        return grid.render_image(np.asarray(self.walls), layers, state.avatars, cell)
