"""Deep-sea salvage: two submarines, two objectives, a Pareto front computed in code.

A two-agent version of Deep Sea Treasure (Vamplew et al., 2011): a grid whose
seabed falls like a staircase from left to right, with a chest resting on the
bottom of every column, and the deeper chests worth more. Both submarines
start at the surface in the top-left corner. Each step costs the team time, and
the team wants treasure. Reward, the same for both agents, `[2, 2]` (objectives
`treasure`, `time`): the value of the chests lifted on the step, and -1 every
step until the episode ends. An episode's return is (treasure lifted, -steps).

    column j:   0   1    2    3
    depth:      2   2    3    4
    steps:      2   3    5    7      (the fewest to reach the chest: j + depth)
    convex:     1   5    7   7.5     every chest is the best of some linear utility
    concave:    1  1.5   3   7.5     only the first and the last are

Two crews (`crew`):
- `alone` (default): each submarine lifts a chest on its own by reaching it, and
  then stays with it (inactive) while the other is still diving; the
  episode ends when both have lifted one, or at `max_steps`. The team is best
  off when both take the same column, so the front is (2 v_j, -t_j).
- `together`: a chest is so heavy that it is lifted only when both submarines
  are on its cell at the end of a step, which ends the episode; the front is
  (v_j, -t_j). The submarines must agree on a chest, and a submarine that goes
  alone wastes the episode: a coordination game, in which policy-gradient teams
  tend to settle on the nearest chest (the risk-dominant choice) whatever the
  weights say.

`true_front()` computes the front in code (shortest paths through the water
to each chest; the outcomes no other outcome dominates), and `reference_point`
is (0, -max_steps): no treasure, and the whole episode spent. With
`values=convex` every point of the front is the best of some linear utility,
so a linear weight sweep can find the whole front; with `concave` a linear
utility prefers an end of the front for every weight, the textbook case for a
non-linear (Chebyshev) utility.

Actions: stay, up, down, left, right; a move into rock or off the grid stays.
Observation of each agent: its own (row, column) and the other submarine's,
scaled to [0, 1], and the fraction of the episode gone; `global_state` is
agent 0's observation. `info["lifted"]` counts the chests lifted on the step.
"""

from __future__ import annotations

from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError, unknown_name
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep

DEPTHS = (2, 2, 3, 4)                 # the chest of column j lies at row DEPTHS[j] (row 0 is the surface)
VALUES = {"convex": (1.0, 5.0, 7.0, 7.5), "concave": (1.0, 1.5, 3.0, 7.5)}
CREWS = ("alone", "together")
MOVES = np.array([(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)], np.int32)   # stay, up, down, left, right
ACTION_NAMES = ("stay", "up", "down", "left", "right")


@struct.dataclass
class TreasureState:
    pos: jax.Array      # [2, 2] int32 (row, column) of each submarine
    lifted: jax.Array   # [2] bool: the submarine has lifted its chest (crew alone)
    t: jax.Array        # [] int32 steps taken


class Treasure(Env):
    def __init__(self, values: str = "convex", crew: str = "alone", max_steps: int = 10):
        if values not in VALUES:
            raise unknown_name("treasure values", values, VALUES)
        if crew not in CREWS:
            raise unknown_name("crew", crew, CREWS)
        deepest = max(j + d for j, d in enumerate(DEPTHS))
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < deepest:
            raise ConfigError(f"max_steps={max_steps!r} is out of range; it must be an integer >= {deepest}, the "
                              "steps to the deepest chest")
        self.values_name, self.crew, self.max_steps = values, crew, max_steps
        self.rows, self.cols = max(DEPTHS) + 1, len(DEPTHS)
        depth = np.asarray(DEPTHS)
        self.water = np.arange(self.rows)[:, None] <= depth[None, :]       # [R, C]
        chest = np.full((self.rows, self.cols), -1, np.int32)
        chest[depth, np.arange(self.cols)] = np.arange(self.cols)
        self.chest = chest                                                  # [R, C] chest index, or -1
        self.values = np.asarray(VALUES[values], np.float32)
        self.reference_point = np.array([0.0, -float(max_steps)])
        self.spec = EnvSpec(
            name="treasure", num_agents=2, obs_space=Box(0.0, 1.0, (5,)), action_space=Discrete(len(MOVES)),
            global_state_space=Box(0.0, 1.0, (5,)), max_steps=max_steps, reward_dim=2,
            reward_names=("treasure", "time"), roles=("submarine", "submarine"), render_text=self.render_text,
        )

    # ----- the front, computed on the host --------------------------------------------------
    def steps_to_chests(self) -> np.ndarray:
        """`[C]`: the fewest steps from the start to each chest, through the water."""
        dist = np.full((self.rows, self.cols), -1)
        dist[0, 0] = 0
        queue = deque([(0, 0)])
        while queue:
            r, c = queue.popleft()
            for dr, dc in MOVES[1:]:
                nr, nc = r + dr, c + dc
                if 0 <= nr < self.rows and 0 <= nc < self.cols and self.water[nr, nc] and dist[nr, nc] < 0:
                    dist[nr, nc] = dist[r, c] + 1
                    queue.append((nr, nc))
        return dist[np.asarray(DEPTHS), np.arange(self.cols)]

    def true_front(self) -> np.ndarray:
        """`[F, 2]`: the Pareto front of the episode returns (treasure, -steps). Alone,
        each submarine takes a chest by its shortest way, (v_i + v_j, -max(t_i, t_j));
        together, both take one, (v_j, -t_j). Outcomes another outcome dominates
        (a submarine that lifts nothing among them) are left out."""
        steps = self.steps_to_chests().astype(np.float64)
        v = self.values.astype(np.float64)
        if self.crew == "together":
            points = np.stack([v, -steps], axis=1)
        else:
            points = np.array([(v[i] + v[j], -max(steps[i], steps[j]))
                               for i in range(self.cols) for j in range(self.cols)])
        keep = [not any(np.all(q >= p) and np.any(q > p) for q in points) for p in points]
        return np.unique(points[keep], axis=0)

    # ----- dynamics -------------------------------------------------------------------------------
    def _observe(self, state: TreasureState, reward: jax.Array, done: jax.Array, truncated: jax.Array,
                 lifted: jax.Array) -> TimeStep:
        scale = jnp.array([self.rows - 1, self.cols - 1], jnp.float32)
        me, other = state.pos[0] / scale, state.pos[1] / scale
        clock = jnp.reshape(state.t / self.max_steps, (1,)).astype(jnp.float32)
        obs = jnp.stack([jnp.concatenate([me, other, clock]), jnp.concatenate([other, me, clock])])
        return TimeStep(
            obs=obs, reward=reward, done=done, truncated=truncated, active=~state.lifted,
            action_mask=jnp.ones((2, len(MOVES)), bool), global_state=obs[0],
            info={"lifted": lifted.astype(jnp.int32)},
        )

    def _reset(self, key: jax.Array) -> tuple[TreasureState, TimeStep]:
        state = TreasureState(pos=jnp.zeros((2, 2), jnp.int32), lifted=jnp.zeros(2, bool), t=jnp.zeros((), jnp.int32))
        no = jnp.zeros((), bool)
        return state, self._observe(state, jnp.zeros((2, 2), jnp.float32), no, no, jnp.zeros((), jnp.int32))

    def _step(self, state: TreasureState, actions: jax.Array, key: jax.Array) -> tuple[TreasureState, TimeStep]:
        moved = state.pos + jnp.asarray(MOVES)[actions]                       # [2, 2]
        inside = (moved[:, 0] >= 0) & (moved[:, 0] < self.rows) & (moved[:, 1] >= 0) & (moved[:, 1] < self.cols)
        clipped = jnp.clip(moved, 0, jnp.array([self.rows - 1, self.cols - 1]))
        free = inside & jnp.asarray(self.water)[clipped[:, 0], clipped[:, 1]] & ~state.lifted
        pos = jnp.where(free[:, None], clipped, state.pos)                    # a submarine that has lifted stays
        chest = jnp.asarray(self.chest)[pos[:, 0], pos[:, 1]]                 # [2]
        value = jnp.asarray(self.values)[jnp.maximum(chest, 0)]
        if self.crew == "alone":
            lifts = (chest >= 0) & ~state.lifted                              # [2]
            lifted = state.lifted | lifts
            treasure = jnp.sum(jnp.where(lifts, value, 0.0))
            finished = jnp.all(lifted)
        else:
            together = jnp.all(pos[0] == pos[1]) & (chest[0] >= 0)
            lifts = jnp.stack([together, jnp.zeros((), bool)])               # one chest, counted once
            lifted = state.lifted
            treasure = jnp.where(together, value[0], 0.0)
            finished = together
        t = state.t + 1
        reward = jnp.broadcast_to(jnp.stack([treasure, jnp.float32(-1.0)]), (2, 2)).astype(jnp.float32)
        out_of_time = t >= self.max_steps
        new = TreasureState(pos=pos, lifted=lifted, t=t)
        return new, self._observe(new, reward, finished | out_of_time, out_of_time & ~finished, jnp.sum(lifts))

    def render_text(self, state: TreasureState) -> str:
        """The grid, four characters a cell: submarines 0 and 1, the chests' values,
        water `.` and rock `#`."""
        pos = np.asarray(state.pos)
        lines = []
        for r in range(self.rows):
            cells = []
            for c in range(self.cols):
                subs = "".join(str(i) for i in range(2) if tuple(pos[i]) == (r, c))
                if subs:
                    cells.append(subs.rjust(4))
                elif self.chest[r, c] >= 0:
                    cells.append(f"{self.values[self.chest[r, c]]:4g}")
                else:
                    cells.append("   ." if self.water[r, c] else "####")
            lines.append("".join(cells))
        return (f"treasure ({self.values_name}, {self.crew}), step {int(state.t)}/{self.max_steps}\n"
                + "\n".join(lines))
