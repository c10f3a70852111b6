"""A gridworld in words: `coplay.make("text:gridworld", size=3, walls=1)`.

One agent walks a square grid with walls to a goal. It reads the grid, row by
row from the top, "/" between rows ("x" is the agent, "_" an empty cell), and
writes one move:

    view    "grid : _ _ wall / _ x _ / _ _ goal , your move"
    move    "right <end>"          (one of "up", "down", "left", "right")

"up" goes one row towards the top, "left" one column towards the start of a row.
A move into a wall or off the grid leaves the agent where it is (a legal move).

Layouts are drawn from the reset key: the start uniformly, `walls` wall cells
uniformly among the others, and the goal uniformly among the cells that the
start reaches in 1 to `max_steps` moves (a start walled in on every side drops
its walls first), so every drawn goal is reachable in time. With `layouts=K`
only K layouts exist, the ones drawn from K fixed keys, and the reset key picks
one; with `layouts=0` (the default) every reset key draws its own. Either way
the episodes of a group, which share their reset key, start alike. The defaults
(3x3, 1 wall, 6 moves) are small on purpose: from scratch, `algo=grpo` with a
small token policy (width 32, one block, lr 3e-3) reaches 80% success in about
60-200 updates of 64 episodes (benchmarks/grpo_gigpo.py); a 4x4 grid it learns
far more slowly.

    obs           [1, L] int32  the view, token ids of coplay's vocabulary (L = size^2 + size + 4)
    action        [1, T] int32  the utterance
    reward        [1]           1 - step_cost on reaching the goal, -step_cost on any other move,
                                -1 on a forfeit
    info          invalid_utterance [1] bool: the utterance named no move
                  reached           []  bool: the agent reached the goal with this step

An episode ends at the goal, after `max_steps` moves (truncated), or on a
forfeit. An utterance that names no move forfeits the episode (`invalid=
"forfeit"`, the default: reward -1, the only negative one with step_cost=0) or
is replaced by a uniformly random move (`invalid="random"`).

The view is the whole board, so equal boards are one state: GiGPO's anchor
states recur within an episode (a bump into a wall repeats the view) and across
the episodes of a group. The step counter is not in the view. The exact optimum
from a state is its breadth-first shortest path (`shortest_path`): an optimal
policy reaches the goal in exactly that many moves, for the return
1 - step_cost * shortest_path; `optimal_moves` names the moves that keep to one.
"""

from __future__ import annotations

from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.errors import ConfigError, unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, MultiDiscrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.text.base import TextEnv
from coplay.envs.text.games import read_move
from coplay.envs.text.tree_games import INVALID_OUTCOMES
from coplay.envs.text.vocab import VOCAB
from coplay.envs.trees.tree import GAME_OVER, YOUR_MOVE

MOVES = ("up", "down", "left", "right")
STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1))      # (row, column) of each move
EMPTY, AGENT, WALL, GOAL = 0, 1, 2, 3            # cell codes (global_state), written "_", "x", "wall", "goal"
CELL_WORDS = ("_", "x", "wall", "goal")
MIN_SIZE, MAX_SIZE = 2, 8


@struct.dataclass
class GridState:
    walls: jax.Array    # [size * size] bool
    pos: jax.Array      # [] int32 the agent's cell (row * size + column)
    goal: jax.Array     # [] int32 the goal's cell
    t: jax.Array        # [] int32 moves made
    done: jax.Array     # [] bool


class TextGridworld(TextEnv):
    """A gridworld with walls, played in words (see the module's doc)."""

    views_are_states = True

    def __init__(self, size: int = 3, walls: int = 1, max_steps: int = 6, layouts: int = 0,
                 step_cost: float = 0.0, max_tokens: int = 2, invalid: str = "forfeit"):
        if invalid not in INVALID_OUTCOMES:
            raise unknown_name("invalid-utterance outcome", invalid, INVALID_OUTCOMES)
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise ConfigError(f"size={size}: the grid's side must be {MIN_SIZE} to {MAX_SIZE}")
        if not 0 <= walls <= size * size - 2:
            raise ConfigError(f"walls={walls}: a {size}x{size} grid takes 0 to {size * size - 2} walls "
                              "(the start and the goal need a cell each)")
        if max_steps < 1:
            raise ConfigError(f"max_steps={max_steps}: an episode needs at least 1 move")
        if layouts < 0:
            raise ConfigError(f"layouts={layouts}: give 0 (every reset key draws its own layout) or a number "
                              "of fixed layouts >= 1")
        if not 0.0 <= step_cost < 1.0:
            raise ConfigError(f"step_cost={step_cost}: the cost of a move must be in [0, 1)")
        if max_tokens < 1:
            raise ConfigError(f"max_tokens={max_tokens} is shorter than a move (1 token: 'up')")
        self.size, self.walls, self.layouts, self.step_cost = size, walls, layouts, float(step_cost)
        self.invalid, self.vocab, self.move_texts = invalid, VOCAB, MOVES
        self._moves = jnp.asarray(np.stack([VOCAB.encode(m, max_tokens, end=1 < max_tokens) for m in MOVES]))
        self._steps = jnp.asarray(STEPS, jnp.int32)
        self._cells = jnp.asarray([VOCAB.index[w] for w in CELL_WORDS], jnp.int32)
        self._head = jnp.asarray(VOCAB.encode("grid :"))
        self._slash, self._comma = jnp.int32(VOCAB.index["/"]), jnp.int32(VOCAB.index[","])
        self._status = jnp.asarray(np.stack([VOCAB.encode(s, 2) for s in (YOUR_MOVE, GAME_OVER)]))
        length = len(self._head) + size * size + (size - 1) + 3
        self.spec = EnvSpec(
            name="text:gridworld", num_agents=1, obs_space=MultiDiscrete((len(VOCAB),) * length),
            action_space=MultiDiscrete((len(VOCAB),) * max_tokens),
            global_state_space=Box(0.0, float(max(GOAL, max_steps)), (size * size + 1,)), max_steps=max_steps,
            render_text=self.render_text,
        )

    # ----- layouts -------------------------------------------------------------------------------
    def _neighbours(self, cells: jax.Array) -> jax.Array:
        """[size^2] bool -> the cells one move from any of them (walls not excluded)."""
        g = cells.reshape(self.size, self.size)
        pad = jnp.pad(g, 1)
        near = pad[:-2, 1:-1] | pad[2:, 1:-1] | pad[1:-1, :-2] | pad[1:-1, 2:]
        return near.reshape(-1)

    def _within_reach(self, start: jax.Array, walls: jax.Array) -> jax.Array:
        """[size^2] bool: the cells that `start` reaches in at most max_steps moves."""
        reach = jnp.arange(self.size * self.size) == start
        grow = lambda _, r: r | (self._neighbours(r) & ~walls)  # noqa: E731
        return jax.lax.fori_loop(0, min(self.spec.max_steps, self.size * self.size), grow, reach)

    def _layout(self, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(walls [size^2] bool, start [], goal []) drawn from `key` (see the module's doc)."""
        cells = self.size * self.size
        k_cells, k_goal = jax.random.split(key)
        order = jax.random.permutation(k_cells, cells)
        start = order[0]
        walls = jnp.zeros(cells, bool).at[order[1:1 + self.walls]].set(True)
        others = jnp.arange(cells) != start
        walled_in = ~jnp.any(self._within_reach(start, walls) & others)
        walls = walls & ~walled_in
        reach = self._within_reach(start, walls) & others
        goal = jax.random.categorical(k_goal, jnp.where(reach, 0.0, -jnp.inf)).astype(jnp.int32)
        return walls, start.astype(jnp.int32), goal

    # ----- views ---------------------------------------------------------------------------------
    def cell_codes(self, state: GridState) -> jax.Array:
        """[size^2] int32: each cell's code (EMPTY, AGENT, WALL, GOAL); the agent covers the goal."""
        cells = jnp.arange(self.size * self.size)
        code = jnp.where(state.walls, WALL, jnp.where(cells == state.goal, GOAL, EMPTY))
        return jnp.where(cells == state.pos, AGENT, code).astype(jnp.int32)

    def _views(self, state: GridState) -> jax.Array:
        """[1, L]: "grid : <row> / <row> ... , <status>"."""
        rows = self._cells[self.cell_codes(state)].reshape(self.size, self.size)
        rows = jnp.concatenate([rows, jnp.full((self.size, 1), self._slash)], axis=1).reshape(-1)[:-1]
        view = jnp.concatenate([self._head, rows, self._comma[None], self._status[state.done.astype(jnp.int32)]])
        return view[None]

    def _timestep(self, state: GridState, reward: jax.Array, truncated: jax.Array, invalid: jax.Array,
                  reached: jax.Array) -> TimeStep:
        return TimeStep(
            obs=self._views(state), reward=reward, done=state.done, truncated=truncated, active=~state.done[None],
            action_mask=jnp.ones((1, 0), bool),
            global_state=jnp.concatenate([self.cell_codes(state), state.t[None]]).astype(jnp.float32),
            info={"invalid_utterance": invalid, "reached": reached},
        )

    def _reset(self, key):
        if self.layouts:
            key = jax.random.fold_in(jax.random.PRNGKey(0), jax.random.randint(key, (), 0, self.layouts))
        walls, start, goal = self._layout(key)
        state = GridState(walls=walls, pos=start, goal=goal, t=jnp.int32(0), done=jnp.bool_(False))
        no = jnp.bool_(False)
        return state, self._timestep(state, jnp.zeros(1, jnp.float32), no, jnp.zeros(1, bool), no)

    def _step(self, state: GridState, actions, key):
        move, invalid, forfeit = read_move(jnp.asarray(actions)[0], self._moves, jnp.ones(len(MOVES), bool),
                                           ~state.done, self.invalid, key)
        row, col = state.pos // self.size + self._steps[move, 0], state.pos % self.size + self._steps[move, 1]
        inside = (row >= 0) & (row < self.size) & (col >= 0) & (col < self.size)
        target = jnp.clip(row, 0, self.size - 1) * self.size + jnp.clip(col, 0, self.size - 1)
        moves = ~state.done & ~forfeit & inside & ~state.walls[target]
        pos = jnp.where(moves, target, state.pos).astype(jnp.int32)
        reached = moves & (pos == state.goal)
        t = state.t + (~state.done).astype(jnp.int32)
        truncated = ~state.done & ~forfeit & ~reached & (t >= self.spec.max_steps)
        reward = jnp.where(state.done, 0.0,
                           jnp.where(forfeit, -1.0, reached.astype(jnp.float32) - self.step_cost))
        new = GridState(walls=state.walls, pos=pos, goal=state.goal, t=t,
                        done=state.done | forfeit | reached | truncated)
        return new, self._timestep(new, reward.astype(jnp.float32)[None], truncated, invalid[None], reached)

    # ----- the exact optimum (on the host) ----------------------------------------------------------
    def distances(self, state: GridState) -> np.ndarray:
        """[size^2] int: each cell's breadth-first number of moves to the goal (-1: it cannot get there)."""
        walls, goal, n = np.asarray(state.walls), int(state.goal), self.size
        dist = np.full(n * n, -1)
        dist[goal], queue = 0, deque([goal])
        while queue:
            cell = queue.popleft()
            r, c = divmod(cell, n)
            for dr, dc in STEPS:
                rr, cc = r + dr, c + dc
                if 0 <= rr < n and 0 <= cc < n and not walls[rr * n + cc] and dist[rr * n + cc] < 0:
                    dist[rr * n + cc] = dist[cell] + 1
                    queue.append(rr * n + cc)
        return dist

    def shortest_path(self, state: GridState) -> int:
        """The fewest moves from the agent's cell to the goal (-1 where there is no way)."""
        return int(self.distances(state)[int(state.pos)])

    def optimal_moves(self, state: GridState) -> tuple[str, ...]:
        """The moves that take the agent one move closer to the goal (none at the goal)."""
        dist, n = self.distances(state), self.size
        r, c = divmod(int(state.pos), n)
        here = dist[r * n + c]
        return tuple(m for m, (dr, dc) in zip(MOVES, STEPS)
                     if here > 0 and 0 <= r + dr < n and 0 <= c + dc < n and dist[(r + dr) * n + c + dc] == here - 1)

    def render_text(self, state: GridState, viewer: int | None = None) -> str:
        if viewer is not None:
            return self.vocab.decode(np.asarray(self._views(state)[viewer]))
        marks = ".A#G"
        codes = np.asarray(self.cell_codes(state)).reshape(self.size, self.size)
        rows = ["".join(marks[k] for k in row) for row in codes]
        end = "; game over" if bool(state.done) else ""
        return "\n".join([f"gridworld, move {int(state.t)} of {self.spec.max_steps}{end}", *rows])


ENVS.register("text:gridworld", TextGridworld, kind="cooperative",
              description="One agent walks a grid with walls to a goal, in words ('up', 'left', ...); "
                          "breadth-first shortest paths are its exact optimum")
