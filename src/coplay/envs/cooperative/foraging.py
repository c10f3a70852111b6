"""Level-based foraging (Albrecht & Ramamoorthy, 2013; the lbforaging benchmark
of Papoudakis et al., 2021), in pure JAX.

Agents and food sit on a `grid_size` x `grid_size` grid, each with a level. A
food is collected when the agents next to it (up, down, left or right) that
choose LOAD have levels adding up to at least the food's level. Each of them is
rewarded `agent_level * food_level / (sum of their levels * total food level
spawned)`, so the team's rewards over an episode add up to 1 when every food is
eaten. The episode ends when all food is gone (done) or after `max_steps`
(truncated).

Spawning follows lbforaging: agent levels are uniform in 1..max_agent_level;
food is placed off the border, never in the 3x3 square around other food nor
two cells from it in a straight line (when the grid has room); its level is
uniform in 1..(sum of the three highest agent levels - 1), or exactly that sum
with `force_coop` (then every food needs several agents). Agents start on free
cells.

Actions: 0 none, 1 north (row - 1), 2 south (row + 1), 3 west (col - 1),
4 east (col + 1), 5 load. Moving off the grid or onto food or another agent,
and loading with no food adjacent, are illegal: `action_mask` marks them, and
an illegal action is carried out as "none". Two agents moving onto the same
cell both stay. A LOAD that fails (levels too low) costs `penalty`.

Observation of agent i (float32, 3 * (n_food + n_agents)): for every food
(row, col, level), then for every agent (row, col, level) with agent i first
and the others in index order; things outside the agent's `sight` (Chebyshev
distance; None = the whole grid) and eaten food read (-1, -1, 0).
global_state: every food (row, col, level, present) and agent (row, col, level).

Several objectives (`food_types` = T > 1): food f is of type f mod T (so the
observations, which list the food in index order, show each one's type by its
place), and the reward is a vector of T, one objective per type (`food0`,
`food1`, ...): a food's share is paid in its type's objective, normalised by the
total level spawned of that type, so each objective's team total is 1 when every
food of its type is eaten. A failed LOAD's `penalty` is paid in every objective,
and the reference point is -penalty * max_steps in each (0 without penalty).
info: "food_collected" (int32) foods eaten this step; "invalid_actions" (int32) agents
whose action was out of range (they do nothing).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box, Discrete, outside
from coplay.core.types import EnvSpec, TimeStep

NONE, NORTH, SOUTH, WEST, EAST, LOAD = range(6)
_MOVES = jnp.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1], [0, 0]], jnp.int32)
_NEIGHBOURS = jnp.array([[-1, 0], [1, 0], [0, -1], [0, 1]], jnp.int32)


class ForagingState(struct.PyTreeNode):
    agent_pos: jax.Array     # [N, 2] int32 (row, col)
    agent_level: jax.Array   # [N] int32
    food_pos: jax.Array      # [F, 2] int32
    food_level: jax.Array    # [F] int32
    food_alive: jax.Array    # [F] bool
    food_total: jax.Array    # [] float32, total level spawned
    step: jax.Array          # [] int32


class Foraging(Env):
    def __init__(self, grid_size: int = 8, n_agents: int = 2, n_food: int = 2, max_agent_level: int = 2,
                 sight: int | None = None, force_coop: bool = False, max_steps: int = 50, penalty: float = 0.0,
                 food_types: int = 1):
        def need(name, value, ok, what):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok:
                raise ConfigError(f"{name}={value!r} is out of range; it must be {what}")

        need("grid_size", grid_size, isinstance(grid_size, int) and 3 <= grid_size <= 64, "an integer in [3, 64]")
        need("n_agents", n_agents, isinstance(n_agents, int) and 1 <= n_agents <= 16, "an integer in [1, 16]")
        interior = (grid_size - 2) ** 2
        max_food = max(1, interior // 2)
        need("n_food", n_food, isinstance(n_food, int) and 1 <= n_food <= max_food,
             f"an integer in [1, {max_food}] for grid_size={grid_size} (food needs space between)")
        need("max_agent_level", max_agent_level, isinstance(max_agent_level, int) and max_agent_level >= 1,
             "an integer >= 1")
        if sight is not None:
            need("sight", sight, isinstance(sight, int) and sight >= 1, "an integer >= 1, or None for the whole grid")
        need("max_steps", max_steps, isinstance(max_steps, int) and max_steps >= 1, "an integer >= 1")
        need("penalty", penalty, penalty >= 0, "a number >= 0")
        need("food_types", food_types, isinstance(food_types, int) and 1 <= food_types <= n_food,
             f"an integer in [1, n_food={n_food}] (every type needs a food)")
        if grid_size * grid_size < n_agents + n_food:
            raise ConfigError(f"grid_size={grid_size} has no room for {n_agents} agents and {n_food} food")
        self.grid_size, self.n_agents, self.n_food = grid_size, n_agents, n_food
        self.max_agent_level, self.sight, self.force_coop = max_agent_level, sight, bool(force_coop)
        self.max_steps, self.penalty = max_steps, float(penalty)
        self.food_types = food_types
        self.food_type = np.arange(n_food) % food_types                                   # [F]
        self.type_onehot = np.eye(food_types, dtype=np.float32)[self.food_type]           # [F, T]
        if food_types > 1:
            self.reference_point = np.full(food_types, 0.0 - self.penalty * max_steps)
        obs_dim = 3 * (n_food + n_agents)
        self.spec = EnvSpec(
            name="foraging", num_agents=n_agents, obs_space=Box(-1.0, float(max(grid_size, 3 * max_agent_level)),
                                                                (obs_dim,)),
            action_space=Discrete(6), global_state_space=Box(-1.0, float(grid_size * 3 * max_agent_level),
                                                             (4 * n_food + 3 * n_agents,)),
            max_steps=max_steps, render_rgb=self.render_rgb, render_text=self.render_text,
            reward_dim=food_types, reward_names=tuple(f"food{t}" for t in range(food_types)) if food_types > 1 else (),
        )

    # ----- spawning ---------------------------------------------------------------------------
    def _reset(self, key: jax.Array) -> tuple[ForagingState, TimeStep]:
        s, n, f = self.grid_size, self.n_agents, self.n_food
        k_lvl, k_food, k_flvl, k_agent = jax.random.split(key, 4)
        levels = jax.random.randint(k_lvl, (n,), 1, self.max_agent_level + 1)
        top = jnp.sum(jnp.sort(levels)[::-1][:3])
        rows, cols = jnp.meshgrid(jnp.arange(s), jnp.arange(s), indexing="ij")
        interior = (rows > 0) & (rows < s - 1) & (cols > 0) & (cols < s - 1)

        def place(free, k):
            idx = jax.random.categorical(k, jnp.where(free.reshape(-1), 0.0, -jnp.inf))
            return jnp.stack([idx // s, idx % s]).astype(jnp.int32)

        def food_body(carry, k):
            free, taken = carry
            # In a crowded grid the spacing rule can leave no cell: then any free interior cell.
            pos = place(jnp.where(jnp.any(free), free, interior & ~taken), k)
            dr, dc = jnp.abs(rows - pos[0]), jnp.abs(cols - pos[1])
            near = (jnp.maximum(dr, dc) <= 1) | ((dr == 0) & (dc <= 2)) | ((dc == 0) & (dr <= 2))
            return (free & ~near, taken.at[pos[0], pos[1]].set(True)), pos

        _, food_pos = jax.lax.scan(food_body, (interior, jnp.zeros((s, s), bool)), jax.random.split(k_food, f))
        if self.force_coop:
            food_level = jnp.full((f,), top, jnp.int32)
        else:
            food_level = jax.random.randint(k_flvl, (f,), 1, jnp.maximum(top, 2))
        occupied = jnp.zeros((s, s), bool).at[food_pos[:, 0], food_pos[:, 1]].set(True)

        def agent_body(free, k):
            pos = place(free, k)
            return free.at[pos[0], pos[1]].set(False), pos

        _, agent_pos = jax.lax.scan(agent_body, ~occupied, jax.random.split(k_agent, n))
        state = ForagingState(agent_pos=agent_pos, agent_level=levels.astype(jnp.int32), food_pos=food_pos,
                              food_level=food_level.astype(jnp.int32), food_alive=jnp.ones((f,), bool),
                              food_total=jnp.sum(food_level).astype(jnp.float32), step=jnp.zeros((), jnp.int32))
        zeros = jnp.zeros(self.spec.reward_shape, jnp.float32)
        return state, self._timestep(state, zeros, jnp.zeros((), bool), jnp.zeros((), bool), jnp.zeros((), jnp.int32))

    def state_from(self, agent_pos, agent_level, food_pos, food_level, step: int = 0) -> ForagingState:
        """A state with explicit positions (row, col) and levels, for tests and demos."""
        food_level = jnp.asarray(food_level, jnp.int32)
        return ForagingState(agent_pos=jnp.asarray(agent_pos, jnp.int32),
                             agent_level=jnp.asarray(agent_level, jnp.int32),
                             food_pos=jnp.asarray(food_pos, jnp.int32), food_level=food_level,
                             food_alive=jnp.ones(food_level.shape, bool),
                             food_total=jnp.sum(food_level).astype(jnp.float32), step=jnp.asarray(step, jnp.int32))

    # ----- dynamics -----------------------------------------------------------------------------
    def _adjacent(self, state: ForagingState) -> jax.Array:
        """[N, F] agent i is next to live food f."""
        d = jnp.abs(state.agent_pos[:, None, :] - state.food_pos[None, :, :]).sum(-1)
        return (d == 1) & state.food_alive[None, :]

    def _action_mask(self, state: ForagingState) -> jax.Array:
        s = self.grid_size
        target = state.agent_pos[:, None, :] + _MOVES[None, :, :]                  # [N, 6, 2]
        inside = jnp.all((target >= 0) & (target < s), axis=-1)
        on_food = jnp.any(jnp.all(target[:, :, None, :] == state.food_pos[None, None], -1)
                          & state.food_alive[None, None, :], axis=-1)
        on_agent = jnp.any(jnp.all(target[:, :, None, :] == state.agent_pos[None, None], -1), axis=-1)
        move_ok = inside & ~on_food & ~on_agent
        can_load = jnp.any(self._adjacent(state), axis=-1)
        mask = move_ok.at[:, NONE].set(True).at[:, LOAD].set(can_load)
        return mask

    def _step(self, state: ForagingState, actions: jax.Array, key: jax.Array) -> tuple[ForagingState, TimeStep]:
        n = self.n_agents
        invalid = outside(self.spec.action_space, actions)  # out of range: such agents do nothing
        actions = jnp.where(invalid, NONE, actions).astype(jnp.int32)
        legal = jnp.take_along_axis(self._action_mask(state), actions[:, None], 1)[:, 0]
        actions = jnp.where(legal, actions, NONE)
        # loading uses positions before anyone moves (as lbforaging does)
        adjacent = self._adjacent(state)                                            # [N, F]
        loading = (actions == LOAD)[:, None] & adjacent
        load_sum = jnp.sum(loading * state.agent_level[:, None], axis=0)            # [F]
        eaten = jnp.any(loading, axis=0) & (load_sum >= state.food_level)           # [F]
        failed = jnp.any(loading & ~eaten[None, :], axis=1)
        if self.food_types == 1:
            share = state.agent_level[:, None] * state.food_level[None, :] / (
                jnp.maximum(load_sum, 1)[None, :] * state.food_total)
            reward = jnp.sum(jnp.where(loading & eaten[None, :], share, 0.0), axis=1)
            reward = (reward - self.penalty * failed).astype(jnp.float32)
        else:   # each food's share in its type's objective, over the level spawned of that type
            onehot = jnp.asarray(self.type_onehot)                                          # [F, T]
            type_total = state.food_level.astype(jnp.float32) @ onehot                      # [T]
            share = state.agent_level[:, None] * state.food_level[None, :] / (
                jnp.maximum(load_sum, 1)[None, :] * (onehot @ type_total)[None, :])         # [N, F]
            reward = jnp.where(loading & eaten[None, :], share, 0.0) @ onehot               # [N, T]
            reward = (reward - self.penalty * failed[:, None]).astype(jnp.float32)
        # movement: agents aiming at the same cell all stay
        target = state.agent_pos + _MOVES[actions]
        same = jnp.all(target[:, None, :] == target[None, :, :], -1) & ~jnp.eye(n, dtype=bool)
        moves = jnp.where(jnp.any(same, axis=1)[:, None], state.agent_pos, target)
        alive = state.food_alive & ~eaten
        new = state.replace(agent_pos=moves, food_alive=alive, step=state.step + 1)
        all_gone = ~jnp.any(alive)
        truncated = (new.step >= self.max_steps) & ~all_gone
        done = all_gone | truncated
        return new, self._timestep(new, reward, done, truncated, jnp.sum(eaten).astype(jnp.int32),
                                   jnp.sum(invalid, dtype=jnp.int32))

    # ----- observation --------------------------------------------------------------------------
    def _timestep(self, state, reward, done, truncated, collected, invalid=None) -> TimeStep:
        n = self.n_agents
        foods = jnp.concatenate([state.food_pos, state.food_level[:, None]], -1).astype(jnp.float32)   # [F, 3]
        agents = jnp.concatenate([state.agent_pos, state.agent_level[:, None]], -1).astype(jnp.float32)
        idx = jnp.concatenate([jnp.arange(n)[:, None], _others(n)], 1)                       # [N, N]
        unseen = jnp.array([-1.0, -1.0, 0.0])
        if self.sight is None:
            food_seen = jnp.broadcast_to(state.food_alive[None, :], (n, self.n_food))
            agent_seen = jnp.ones((n, n), bool)
        else:
            dist_f = jnp.max(jnp.abs(state.agent_pos[:, None] - state.food_pos[None]), -1)
            dist_a = jnp.max(jnp.abs(state.agent_pos[:, None] - state.agent_pos[None]), -1)
            food_seen = (dist_f <= self.sight) & state.food_alive[None, :]
            agent_seen = dist_a <= self.sight
        food_obs = jnp.where(food_seen[..., None], foods[None], unseen)                       # [N, F, 3]
        agent_obs = jnp.where(agent_seen[..., None], agents[None], unseen)                    # [N, N, 3]
        agent_obs = jnp.take_along_axis(agent_obs, idx[..., None], axis=1)
        obs = jnp.concatenate([food_obs.reshape(n, -1), agent_obs.reshape(n, -1)], -1)
        global_state = jnp.concatenate([
            jnp.concatenate([foods, state.food_alive[:, None].astype(jnp.float32)], -1).reshape(-1),
            agents.reshape(-1)])
        return TimeStep(obs=obs, reward=reward, done=done, truncated=truncated, active=jnp.ones((n,), bool),
                        action_mask=self._action_mask(state), global_state=global_state,
                        info={"food_collected": collected,
                              "invalid_actions": jnp.zeros((), jnp.int32) if invalid is None else invalid})

    # ----- rendering -----------------------------------------------------------------------------
    def render_text(self, state: ForagingState) -> str:
        s = self.grid_size
        grid = [["." for _ in range(s)] for _ in range(s)]
        for (r, c), lvl, alive in zip(np.asarray(state.food_pos), np.asarray(state.food_level),
                                      np.asarray(state.food_alive)):
            if alive:
                grid[r][c] = str(int(lvl)) if lvl < 10 else "F"
        for i, (r, c) in enumerate(np.asarray(state.agent_pos)):
            grid[r][c] = chr(ord("A") + i)
        levels = ", ".join(f"{chr(ord('A') + i)}:{int(v)}" for i, v in enumerate(np.asarray(state.agent_level)))
        return "\n".join(" ".join(row) for row in grid) + f"\nstep {int(state.step)}; agent levels {levels}"

    def render_rgb(self, state: ForagingState, cell: int = 40) -> np.ndarray:
        from PIL import Image, ImageDraw

        s = self.grid_size
        img = Image.new("RGB", (s * cell, s * cell), (245, 245, 240))
        draw = ImageDraw.Draw(img)
        for i in range(s + 1):
            draw.line([(0, i * cell), (s * cell, i * cell)], fill=(200, 200, 200))
            draw.line([(i * cell, 0), (i * cell, s * cell)], fill=(200, 200, 200))
        for (r, c), lvl, alive in zip(np.asarray(state.food_pos), np.asarray(state.food_level),
                                      np.asarray(state.food_alive)):
            if alive:
                box = [c * cell + 6, r * cell + 6, (c + 1) * cell - 6, (r + 1) * cell - 6]
                draw.rectangle(box, fill=(230, 160, 40))
                draw.text((c * cell + cell // 2 - 3, r * cell + cell // 2 - 6), str(int(lvl)), fill=(0, 0, 0))
        for (r, c), lvl in zip(np.asarray(state.agent_pos), np.asarray(state.agent_level)):
            box = [c * cell + 4, r * cell + 4, (c + 1) * cell - 4, (r + 1) * cell - 4]
            draw.ellipse(box, fill=(60, 110, 200))
            draw.text((c * cell + cell // 2 - 3, r * cell + cell // 2 - 6), str(int(lvl)), fill=(255, 255, 255))
        return np.asarray(img, np.uint8)


def _others(n: int) -> jax.Array:
    """[N, N-1]: for agent i, the other agents' indices in order."""
    rows = [[j for j in range(n) if j != i] for i in range(n)]
    return jnp.asarray(np.array(rows, np.int32).reshape(n, n - 1))
