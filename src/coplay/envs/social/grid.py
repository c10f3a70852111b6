"""What the sequential social dilemmas share: a walled grid, agents with a position
and a facing, moves relative to the facing, an egocentric window, and beams.

Facing: 0 north (row - 1), 1 east (col + 1), 2 south (row + 1), 3 west (col - 1).
Every substrate's actions start with the seven moves below (Melting Pot's order);
a substrate appends its own (zap, clean, ...).

    0 stay   1 forward   2 backward   3 step left   4 step right   5 turn left   6 turn right

Moves are taken one agent at a time in a random order each step (`move`): an agent
moves only onto a free floor cell, so no two agents ever share a cell, whatever
they choose; an agent that is removed (zapped, `present` false) is off the grid and
blocks nobody.

An agent sees a window of its surroundings (`egocentric`): `ahead` rows in front
of it, `behind` rows behind, `side` columns to each side, rotated so that its
facing is up; it stands at row `ahead`, column `side` of its window. Melting Pot's
11 x 11 window is ahead 9, behind 1, side 5. Cells past the map's edge read as wall.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.errors import ConfigError

STAY, FORWARD, BACKWARD, STEP_LEFT, STEP_RIGHT, TURN_LEFT, TURN_RIGHT = range(7)
MOVE_NAMES = ("stay", "forward", "backward", "step_left", "step_right", "turn_left", "turn_right")
HEADINGS = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]], jnp.int32)   # facing -> (d_row, d_col)


class Avatars(struct.PyTreeNode):
    """The agents on a grid."""

    pos: jax.Array        # [N, 2] int32 (row, col); meaningless while removed
    facing: jax.Array     # [N] int32
    removed: jax.Array    # [N] int32 steps left off the map (0: on it)
    cooldown: jax.Array   # [N] int32 steps until the agent's beam can fire again

    @property
    def present(self) -> jax.Array:
        return self.removed == 0


def need(name: str, value: Any, ok: bool, what: str) -> None:
    """A constructor's check: ConfigError naming the value and what it must be unless `ok`
    (a bool is never a number here)."""
    if isinstance(value, bool) or not ok:
        raise ConfigError(f"{name}={value!r} is out of range; it must be {what}")


def whole(value: Any, lo: int, hi: int = 10**9) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def check_view(ahead: int, behind: int, side: int) -> None:
    for name, v in (("view_ahead", ahead), ("view_behind", behind), ("view_side", side)):
        need(name, v, whole(v, 0, 32), "an integer in [0, 32]")


def parse_map(rows: tuple[str, ...] | list[str], legend: dict[str, str]) -> dict[str, np.ndarray]:
    """ASCII map -> {name: [H, W] bool} for every name of `legend` (char -> name);
    ragged rows or a character outside the legend are a ValueError naming it."""
    h, w = len(rows), len(rows[0])
    out = {name: np.zeros((h, w), bool) for name in set(legend.values())}
    for r, row in enumerate(rows):
        if len(row) != w:
            raise ValueError(f"map row {r} has {len(row)} cells, row 0 has {w}")
        for c, ch in enumerate(row):
            if ch not in legend:
                raise ValueError(f"map cell ({r}, {c}) is {ch!r}; valid characters: {sorted(legend)}")
            out[legend[ch]][r, c] = True
    return out


def move(pos: jax.Array, facing: jax.Array, actions: jax.Array, present: jax.Array, blocked: jax.Array,
         key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each present agent's move, taken one agent at a time in a random order: a
    step onto a cell that is neither `blocked` nor held by another agent (as the
    earlier agents of the order left it) is taken, any other step is not. Turns
    always happen.

    pos: [N, 2], facing: [N], actions: [N] (any action >= 7 stays), present: [N] bool,
    blocked: [H, W] bool -> (pos [N, 2], facing [N])."""
    n = pos.shape[0]
    ahead, right = HEADINGS[facing], HEADINGS[(facing + 1) % 4]
    a = actions[:, None]
    delta = jnp.select([a == FORWARD, a == BACKWARD, a == STEP_LEFT, a == STEP_RIGHT],
                       [ahead, -ahead, -right, right], jnp.zeros_like(ahead))
    target = pos + delta
    h, w = blocked.shape
    facing = (facing + (actions == TURN_RIGHT) - (actions == TURN_LEFT)) % 4

    def one(pos, i):
        t = target[i]
        inside = (t[0] >= 0) & (t[0] < h) & (t[1] >= 0) & (t[1] < w)
        held = jnp.any(jnp.all(pos == t, -1) & present & (jnp.arange(n) != i))
        ok = present[i] & inside & ~blocked[jnp.clip(t[0], 0, h - 1), jnp.clip(t[1], 0, w - 1)] & ~held
        return pos.at[i].set(jnp.where(ok, t, pos[i])), None

    pos, _ = jax.lax.scan(one, pos, jax.random.permutation(key, n))
    return pos, facing.astype(jnp.int32)


def window_cells(pos: jax.Array, facing: jax.Array, ahead: int, behind: int, side: int) -> jax.Array:
    """[N, V, W, 2] the map cell under each cell of each agent's window (V = ahead +
    behind + 1 rows, row 0 farthest ahead; W = 2 side + 1 columns, column 0 leftmost)."""
    rows = np.arange(ahead + behind + 1)
    cols = np.arange(2 * side + 1)
    forward = jnp.asarray(ahead - rows)[:, None, None]           # [V, 1, 1] cells ahead of the agent
    lateral = jnp.asarray(cols - side)[None, :, None]            # [1, W, 1] cells to its right
    ahead_dir = HEADINGS[facing][:, None, None, :]               # [N, 1, 1, 2]
    right_dir = HEADINGS[(facing + 1) % 4][:, None, None, :]
    return pos[:, None, None, :] + forward * ahead_dir + lateral * right_dir


def egocentric(image: jax.Array, pos: jax.Array, facing: jax.Array, ahead: int, behind: int, side: int,
               outside: jax.Array | None = None) -> jax.Array:
    """Each agent's window of `image` ([H, W, C] for all, or [N, H, W, C] one per
    agent): [N, V, W, C]. A cell past the map's edge reads `outside` ([C]; zeros if
    None)."""
    cells = window_cells(pos, facing, ahead, behind, side)                      # [N, V, W, 2]
    h, w = image.shape[-3], image.shape[-2]
    inside = (cells[..., 0] >= 0) & (cells[..., 0] < h) & (cells[..., 1] >= 0) & (cells[..., 1] < w)
    r, c = jnp.clip(cells[..., 0], 0, h - 1), jnp.clip(cells[..., 1], 0, w - 1)
    if image.ndim == 3:
        seen = image[r, c]                                                      # [N, V, W, C]
    else:
        seen = jax.vmap(lambda im, rr, cc: im[rr, cc])(image, r, c)
    fill = jnp.zeros(image.shape[-1], image.dtype) if outside is None else outside.astype(image.dtype)
    return jnp.where(inside[..., None], seen, fill)


def lanes(pos: jax.Array, facing: jax.Array, length: int, radius: int,
          walls: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One agent's beam lanes: `length` cells ahead in each of the 2 radius + 1 lanes
    centred on it. Returns (row, col, open), each [L, 2r+1]: the cells (clipped to the
    map) and whether each lies before its lane's first wall (or the map's edge)."""
    h, w = walls.shape
    steps = jnp.arange(1, length + 1)[:, None, None]                             # [L, 1, 1]
    across = jnp.arange(-radius, radius + 1)[None, :, None]                      # [1, 2r+1, 1]
    cells = pos[None, None] + steps * HEADINGS[facing] + across * HEADINGS[(facing + 1) % 4]   # [L, 2r+1, 2]
    inside = (cells[..., 0] >= 0) & (cells[..., 0] < h) & (cells[..., 1] >= 0) & (cells[..., 1] < w)
    r, c = jnp.clip(cells[..., 0], 0, h - 1), jnp.clip(cells[..., 1], 0, w - 1)
    return r, c, jnp.cumsum(walls[r, c] | ~inside, axis=0) == 0


def beam(pos: jax.Array, facing: jax.Array, length: int, radius: int, walls: jax.Array,
         absorbs: jax.Array | None = None) -> jax.Array:
    """[N, H, W] bool: the cells each agent's beam reaches (`lanes`), each lane
    stopped by the first wall in it (not reached) or the first cell of `absorbs`
    ([H, W] bool; reached)."""
    h, w = walls.shape

    def one(p, f):
        r, c, reached = lanes(p, f, length, radius, walls)
        if absorbs is not None:
            caught = absorbs[r, c] & reached
            reached &= (jnp.cumsum(caught, axis=0) - caught) == 0               # up to its first absorber
        return jnp.zeros((h, w), bool).at[r, c].max(reached)

    return jax.vmap(one)(pos, facing)


def occupancy(pos: jax.Array, present: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """[N, H, W] bool: agent i stands on the cell (false everywhere while removed)."""
    return jnp.zeros((pos.shape[0], *shape), bool).at[jnp.arange(pos.shape[0]), pos[:, 0], pos[:, 1]].set(present)


def spawn(key: jax.Array, points: np.ndarray, holders: jax.Array, held: jax.Array, who: jax.Array,
          pos: jax.Array) -> tuple[jax.Array, jax.Array]:
    """New positions for the agents `who` ([N] bool), each on a spawn point (`points`
    [H, W] bool, a constant) drawn uniformly from those no agent holds (`holders`
    [M, 2] the cells of the agents that stand where `held` [M] is true; each agent
    placed holds its point for the next): (pos [N, 2], placed [N] bool). The others
    keep `pos`; an agent of `who` finds no free point only when every one is held,
    and then is not placed (the caller keeps it off the map a step longer)."""
    coords = jnp.asarray(np.argwhere(np.asarray(points)).astype(np.int32))                 # [K, 2]
    free = ~jnp.any(jnp.all(coords[:, None, :] == holders[None, :, :], -1) & held[None, :], axis=1)
    # one uniform priority per point: taking the free point of highest priority, agent after
    # agent, gives each a uniform draw among the free points, without replacement
    priority = jax.random.uniform(key, (coords.shape[0],))

    def one(carry, i):
        free, out = carry
        j = jnp.argmax(jnp.where(free, priority, -1.0))
        place = who[i] & free[j]
        return (free.at[j].set(free[j] & ~place), out.at[i].set(jnp.where(place, coords[j], out[i]))), place

    (_, pos), placed = jax.lax.scan(one, (free, pos), jnp.arange(pos.shape[0]))
    return pos, placed


def zap(avatars: Avatars, firing: jax.Array, walls: jax.Array, length: int, radius: int, timeout: int,
        cooldown: int) -> tuple[Avatars, jax.Array, jax.Array]:
    """The present agents of `firing` ([N] bool) whose beam is ready fire it (`beam`);
    every present agent in a beam but the firer's own is removed for `timeout` steps.
    Returns (avatars, fired [N] bool, hit [N, N] bool: i's beam hit j)."""
    fired = firing & avatars.present & (avatars.cooldown == 0)
    cells = beam(avatars.pos, avatars.facing, length, radius, walls) & fired[:, None, None]      # [N, H, W]
    n = avatars.pos.shape[0]
    hit = cells[:, avatars.pos[:, 0], avatars.pos[:, 1]] & avatars.present[None, :] & ~jnp.eye(n, dtype=bool)
    struck = jnp.any(hit, axis=0)
    avatars = avatars.replace(removed=jnp.where(struck, timeout, avatars.removed),
                              cooldown=jnp.where(fired, cooldown, jnp.maximum(avatars.cooldown - 1, 0)))
    return avatars, fired, hit


def begin_step(avatars: Avatars, actions: jax.Array, num_actions: int, walls: jax.Array,
               spawn_points: np.ndarray | None, key: jax.Array) -> tuple[Avatars, jax.Array, jax.Array, jax.Array]:
    """What every grid step starts with: actions out of range become stay (and are
    counted), removed agents whose time is up come back (`return_removed`, where
    agents can be removed: `spawn_points` given), then everyone moves (`move`).
    Returns (avatars, actions, invalid [N] bool, present [N] bool: on the map for
    this step)."""
    k_back, k_move = jax.random.split(key)
    invalid = (actions < 0) | (actions >= num_actions)
    actions = jnp.where(invalid, STAY, actions).astype(jnp.int32)
    if spawn_points is not None:
        avatars = return_removed(avatars, k_back, spawn_points)
    present = avatars.present
    pos, facing = move(avatars.pos, avatars.facing, actions, present, walls, k_move)
    return avatars.replace(pos=pos, facing=facing), actions, invalid, present


def return_removed(avatars: Avatars, key: jax.Array, spawn_points: np.ndarray) -> Avatars:
    """Count down the removed agents' time off the map; each whose time is up comes
    back on a free spawn point ([H, W] bool, a constant), facing a random way (or
    waits a step if none is free)."""
    k_place, k_face = jax.random.split(key)
    due = avatars.removed == 1
    pos, placed = spawn(k_place, spawn_points, avatars.pos, avatars.present, due, avatars.pos)
    facing = jnp.where(placed, jax.random.randint(k_face, due.shape, 0, 4), avatars.facing)
    removed = jnp.where(due & ~placed, 1, jnp.maximum(avatars.removed - 1, 0))
    return avatars.replace(pos=pos, facing=facing.astype(jnp.int32), removed=removed.astype(jnp.int32))


def start(key: jax.Array, n: int, spawn_points: np.ndarray, first: np.ndarray | None = None) -> Avatars:
    """N agents on distinct spawn points ([H, W] bool, a constant), facing random
    ways; the agents 0..k-1 on the cells `first` ([k, 2]) when given (Melting Pot's
    inside spawn points)."""
    k_pos, k_face = jax.random.split(key)
    k = 0 if first is None else min(n, len(first))
    pos = jnp.zeros((n, 2), jnp.int32)
    if first is not None and k:
        pos = pos.at[:k].set(jnp.asarray(np.asarray(first[:k], np.int32)))
    pos, _ = spawn(k_pos, spawn_points, pos, jnp.arange(n) < k, jnp.arange(n) >= k, pos)
    return Avatars(pos=pos, facing=jax.random.randint(k_face, (n,), 0, 4).astype(jnp.int32),
                   removed=jnp.zeros((n,), jnp.int32), cooldown=jnp.zeros((n,), jnp.int32))


def observe(avatars: Avatars, on: jax.Array, items: jax.Array, ready: jax.Array,
            view: tuple[int, int, int]) -> jax.Array:
    """Each agent's window: [N, V, W, K + 1 + B] float32, the map's item planes
    (`items` [H, W, K], plane 0 the wall, which cells past the edge read as), a plane
    of the other agents (`on`, the agents' `occupancy`), and B planes of ones for
    `ready` ([N, B] bool: a beam that can fire). `items` may be [N, H, W, K], each
    agent's own. A removed agent sees zeros."""
    present = avatars.present
    others = jnp.any(on, axis=0)[None] & ~on
    n, h, w = on.shape
    planes = jnp.concatenate([jnp.broadcast_to(items, (n, h, w, items.shape[-1])), others[..., None],
                              jnp.broadcast_to((ready & present[:, None])[:, None, None, :],
                                               (n, h, w, ready.shape[-1]))], -1).astype(jnp.float32)
    edge = jnp.zeros(planes.shape[-1]).at[0].set(1.0)
    obs = egocentric(planes, avatars.pos, avatars.facing, *view, outside=edge)
    return jnp.where(present[:, None, None, None], obs, 0.0)


def world(on: jax.Array, items: jax.Array) -> jax.Array:
    """The global state: [H, W, K + N] float32, the item planes and one plane per
    agent (`on`, the agents' `occupancy`: its cell while on the map)."""
    return jnp.concatenate([items, jnp.moveaxis(on, 0, -1)], -1).astype(jnp.float32)


def legal(avatars: Avatars, num_actions: int) -> jax.Array:
    """[N, A] every action for an agent on the map; only stay for a removed one."""
    return avatars.present[:, None] | (jnp.arange(num_actions) == STAY)[None]


def render(walls: np.ndarray, layers: list[tuple[Any, str]], avatars: Avatars, step: int) -> str:
    """The map as text: '#' walls, each layer's character where it is set (later
    layers over earlier), agents as A, B, ...; removed agents listed."""
    rows = [["#" if walls[r, c] else "." for c in range(walls.shape[1])] for r in range(walls.shape[0])]
    for mask, ch in layers:
        for r, c in np.argwhere(np.asarray(mask)):
            rows[r][c] = ch
    removed = np.asarray(avatars.removed)
    for i, (r, c) in enumerate(np.asarray(avatars.pos)):
        if not removed[i]:
            rows[r][c] = chr(ord("A") + i) if i < 26 else "@"
    off = [chr(ord("A") + i) for i in np.flatnonzero(removed)]
    return "\n".join("".join(r) for r in rows) + f"\nstep {step}" + (f"; removed {' '.join(off)}" if off else "")


def render_image(walls: np.ndarray, layers: list[tuple[Any, tuple[int, int, int]]], avatars: Avatars,
                 cell: int = 12) -> np.ndarray:
    """The map as an RGB image [H * cell, W * cell, 3] uint8: walls grey, each layer in
    its colour, agents blue."""
    img = np.full((*walls.shape, 3), 235, np.uint8)
    img[walls] = (90, 90, 90)
    for mask, colour in layers:
        img[np.asarray(mask)] = colour
    for (r, c), gone in zip(np.asarray(avatars.pos), np.asarray(avatars.removed)):
        if not gone:
            img[r, c] = (50, 90, 210)
    return np.repeat(np.repeat(img, cell, 0), cell, 1)
