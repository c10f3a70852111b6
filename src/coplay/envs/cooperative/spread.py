"""Cooperative navigation: MPE `simple_spread`, in pure JAX.

N agents (discs of radius 0.15) and L landmarks (radius 0.05, default L = N)
start uniformly at random in [-1, 1]^2. Every agent is rewarded by how well the
team covers the landmarks and penalised for bumping into other agents:

    global   = -sum over landmarks of (distance from the landmark to its closest agent)
    local_i  = -(number of other agents j != i with |p_i - p_j| < 0.3)
    reward_i = (1 - local_ratio) * global + local_ratio * local_i

It reproduces PettingZoo/Farama `mpe2` `simple_spread_v3` (the reference for
published MPE numbers) step for step: the same physics, observations, rewards
and 25-step episodes, so returns are directly comparable. `tests/test_spread.py`
replays episodes recorded from mpe2 and checks observations and rewards agree.

Physics (per step, dt = 0.1, mass 1, no speed limit):

    force_i  = accel * u_i + sum_{j != i} 100 * (p_i - p_j) / d_ij * pen(d_ij)
    pen(d)   = 1e-3 * softplus((0.3 - d) / 1e-3)        (soft contact between agents)
    p_i     <- p_i + v_i * dt                          (with the *old* velocity)
    v_i     <- v_i * (1 - 0.25) + force_i * dt

with accel = 5. Landmarks neither move nor collide.

Actions, per agent:
    discrete (default): 0 no-op, 1 left (-x), 2 right (+x), 3 down (-y), 4 up (+y)
    continuous: a in [0, 1]^5 (clipped), u = (a[2] - a[1], a[4] - a[3]); a[0] is unused

Observation of agent i (obs_dim = 4 + 2L + 4(N-1)), in this order:
    [v_i (2), p_i (2), landmark_l - p_i for each landmark (2L),
     p_j - p_i for each other agent j in index order (2(N-1)),
     communication of each other agent: zeros, agents are silent (2(N-1))]

The global state (for a centralised critic, as in MAPPO on MPE) is every
agent's observation concatenated, [N * obs_dim].

info: "collisions" (int32, colliding agent pairs after the step),
"occupied_landmarks" (int32, landmarks with an agent closer than 0.1) and
"invalid_actions" (int32, agents whose action was outside the action space, an
index out of range or a NaN: they do not move).

Several objectives (`objectives=`, default `one`: the scalar reward above):

    energy:      reward_i = (reward_i above, -|u_i|^2)          names (coverage, energy)
    collisions:  reward_i = (global, local_i)                  names (coverage, collisions)

where u_i is agent i's movement (a unit step for a discrete move, 0 for the
no-op; up to |u|^2 = 2 for a continuous action), so `energy` trades the team's
coverage against each agent's effort, and `collisions` makes the two parts of
simple_spread's reward separate objectives instead of mixing them by
`local_ratio` (unused there). `reference_point` is weakly worse than every
return an agent that stays within a few units of the arena can have: -5 per
landmark per step for coverage, the largest effort or every other agent hit
at every step.

Where references disagree, this follows mpe2: an episode is `max_steps` = 25
steps (JaxMARL's MPE computes `done` from the step count before incrementing
it, so its episodes last 26 steps), and continuous actions are clipped to
[0, 1] (JaxMARL does not clip). An agent never collides with itself (as in mpe2
and JaxMARL; the original OpenAI MPE code counted it, a constant -1).
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

# Constants of MPE's world and of simple_spread's scenario.
DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 100.0
CONTACT_MARGIN = 1e-3
AGENT_SIZE = 0.15
LANDMARK_SIZE = 0.05
ACCEL = 5.0  # "sensitivity" applied to the movement action
MASS = 1.0
COMM_DIM = 2  # world.dim_c; agents are silent, so these observation slots are zero
OCCUPIED_RADIUS = 0.1  # a landmark counts as covered when an agent is this close
NUM_MOVES = 5
OBJECTIVES = {"one": (), "energy": ("coverage", "energy"), "collisions": ("coverage", "collisions")}

_MAX_AGENTS = 1024
_MAX_LANDMARKS = 1024


@struct.dataclass
class SpreadState:
    agent_pos: jax.Array  # [N, 2] float32
    agent_vel: jax.Array  # [N, 2] float32
    landmark_pos: jax.Array  # [L, 2] float32 (landmarks never move: velocity is always zero)
    step: jax.Array  # [] int32, steps taken in this episode


def _drop_diagonal(a: jax.Array) -> jax.Array:
    """[N, N, ...] -> [N, N-1, ...]: row i without its entry i, other entries in order.

    Uses only reshapes and a slice (no gather): the N*N entries minus the first
    one, laid out as (N-1) rows of N+1, have the diagonal as each row's last entry.
    """
    n = a.shape[0]
    rest = a.shape[2:]
    flat = a.reshape((n * n, *rest))[1:]
    return flat.reshape((n - 1, n + 1, *rest))[:, :n].reshape((n, n - 1, *rest))


def _check_int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"spread: {name} must be an integer in [{lo}, {hi}], got {value!r}")
    if not lo <= int(value) <= hi:
        raise ConfigError(f"spread: {name}={value!r} is out of range; it must be in [{lo}, {hi}]")
    return int(value)


class Spread(Env):
    """MPE simple_spread (cooperative navigation); see the module docstring."""

    def __init__(self, n_agents: int = 3, n_landmarks: int | None = None, local_ratio: float = 0.5,
                 max_steps: int = 25, continuous_actions: bool = False, objectives: str = "one"):
        n = _check_int("n_agents", n_agents, 1, _MAX_AGENTS)
        n_landmarks = n if n_landmarks is None else n_landmarks
        n_l = _check_int("n_landmarks", n_landmarks, 1, _MAX_LANDMARKS)
        if isinstance(local_ratio, bool) or not isinstance(local_ratio, (int, float, np.floating, np.integer)):
            raise ConfigError(f"spread: local_ratio must be a number in [0, 1], got {local_ratio!r}")
        if not (0.0 <= float(local_ratio) <= 1.0):  # also rejects nan
            raise ConfigError(f"spread: local_ratio={local_ratio!r} is out of range; it must be in [0, 1]")
        max_steps = _check_int("max_steps", max_steps, 1, 10**9)
        if not isinstance(continuous_actions, (bool, np.bool_)):
            raise ConfigError(f"spread: continuous_actions must be true or false, got {continuous_actions!r}")
        if objectives not in OBJECTIVES:
            raise ConfigError(f"spread: objectives={objectives!r} is not one of {', '.join(OBJECTIVES)}")

        self.n_agents = n
        self.n_landmarks = n_l
        self.local_ratio = float(local_ratio)
        self.max_steps = max_steps
        self.continuous_actions = bool(continuous_actions)
        self.objectives = objectives
        self.obs_dim = 4 + 2 * n_l + 2 * (n - 1) + COMM_DIM * (n - 1)

        action_space = Box(0.0, 1.0, (NUM_MOVES,)) if self.continuous_actions else Discrete(NUM_MOVES)
        self.spec = EnvSpec(
            name="spread",
            num_agents=n,
            obs_space=Box(-np.inf, np.inf, (self.obs_dim,)),
            action_space=action_space,
            global_state_space=Box(-np.inf, np.inf, (n * self.obs_dim,)),
            max_steps=max_steps,
            teams=(0,) * n,
            roles=("agent",) * n,
            render_rgb=self.render_rgb,
            reward_dim=1 if objectives == "one" else 2,
            reward_names=OBJECTIVES[objectives],
        )
        if objectives != "one":
            worst_cover = -5.0 * n_l * max_steps
            worst_other = -(2.0 if self.continuous_actions else 1.0) * max_steps if objectives == "energy" \
                else -float(n - 1) * max_steps
            self.reference_point = np.array([worst_cover, worst_other])

    # ------------------------------------------------------------------ states

    def state_from_positions(self, agent_pos, landmark_pos, agent_vel=None, step: int = 0) -> SpreadState:
        """A state with the given positions ([N, 2], [L, 2]), velocities (default zero) and step."""
        agent_pos = jnp.asarray(agent_pos, jnp.float32)
        landmark_pos = jnp.asarray(landmark_pos, jnp.float32)
        if agent_pos.shape != (self.n_agents, 2):
            raise ConfigError(f"spread: agent_pos has shape {agent_pos.shape}, expected {(self.n_agents, 2)}")
        if landmark_pos.shape != (self.n_landmarks, 2):
            raise ConfigError(
                f"spread: landmark_pos has shape {landmark_pos.shape}, expected {(self.n_landmarks, 2)}")
        if agent_vel is None:
            agent_vel = jnp.zeros_like(agent_pos)
        agent_vel = jnp.asarray(agent_vel, jnp.float32)
        if agent_vel.shape != (self.n_agents, 2):
            raise ConfigError(f"spread: agent_vel has shape {agent_vel.shape}, expected {(self.n_agents, 2)}")
        return SpreadState(agent_pos=agent_pos, agent_vel=agent_vel, landmark_pos=landmark_pos,
                           step=jnp.asarray(step, jnp.int32))

    def reset_to(self, agent_pos, landmark_pos, agent_vel=None, step: int = 0) -> tuple[SpreadState, TimeStep]:
        """Like `reset`, but from the given positions instead of random ones."""
        state = self.state_from_positions(agent_pos, landmark_pos, agent_vel, step)
        return state, self._first_timestep(state)

    # ------------------------------------------------------------- contract

    def _reset(self, key: jax.Array) -> tuple[SpreadState, TimeStep]:
        # Agents and landmarks independently uniform in [-1, 1]^2 (one draw for both: cheaper
        # under AutoReset, which resets every step).
        pos = jax.random.uniform(key, (self.n_agents + self.n_landmarks, 2), jnp.float32, -1.0, 1.0)
        state = SpreadState(
            agent_pos=pos[: self.n_agents],
            agent_vel=jnp.zeros((self.n_agents, 2), jnp.float32),
            landmark_pos=pos[self.n_agents:],
            step=jnp.zeros((), jnp.int32),
        )
        return state, self._first_timestep(state)

    def _step(self, state: SpreadState, actions: jax.Array, key: jax.Array) -> tuple[SpreadState, TimeStep]:
        del key  # simple_spread has no action or communication noise
        pos, vel = state.agent_pos, state.agent_vel

        # Contact forces between agents, from the positions before the move:
        # force_i = sum_{j != i} K_ij (p_i - p_j) with K_ij = c * pen(d_ij) / d_ij.
        if self.n_agents > 1:
            delta = pos[:, None, :] - pos[None, :, :]  # [N, N, 2]
            contact = jnp.sum(self._contact_gain(delta)[:, :, None] * delta, axis=1)
        else:
            contact = jnp.zeros_like(pos)

        invalid = outside(self.spec.action_space, actions)  # such agents do nothing
        actions = jnp.where(invalid.reshape(-1, *([1] * (actions.ndim - 1))), 0, actions)
        force = self._action_force(actions) + contact
        new_pos = pos + vel * DT
        new_vel = vel * (1.0 - DAMPING) + force * (DT / MASS)
        new_state = SpreadState(agent_pos=new_pos, agent_vel=new_vel, landmark_pos=state.landmark_pos,
                                step=state.step + 1)

        obs, reward, info = self._observe_and_reward(new_state)
        if self.objectives == "energy":
            u = self._action_force(actions) / ACCEL
            reward = jnp.stack([reward, -jnp.sum(u * u, axis=-1)], axis=-1)
        done = new_state.step >= self.max_steps
        info = {**info, "invalid_actions": jnp.sum(invalid, dtype=jnp.int32)}
        return new_state, self._timestep(obs, reward, done, info)

    # ------------------------------------------------------------- internals

    def _contact_gain(self, delta: jax.Array) -> jax.Array:
        """[N, N, 2] p_i - p_j -> K_ij = contact_force * pen(d_ij) / d_ij, 0 on the diagonal."""
        dist = jnp.sqrt(jnp.sum(delta * delta, axis=-1))  # [N, N]
        pen = CONTACT_MARGIN * jax.nn.softplus((2.0 * AGENT_SIZE - dist) / CONTACT_MARGIN)
        off_diag = ~jnp.eye(self.n_agents, dtype=bool)
        # Coincident agents (d = 0, never seen in practice) get no force instead of nan.
        safe = off_diag & (dist > 0.0)
        return jnp.where(safe, CONTACT_FORCE * pen / jnp.where(safe, dist, 1.0), 0.0)

    def _action_force(self, actions: jax.Array) -> jax.Array:
        """[N] int or [N, 5] float actions -> [N, 2] movement forces."""
        if self.continuous_actions:
            a = jnp.clip(actions.astype(jnp.float32), 0.0, 1.0)
            u = jnp.stack([a[:, 2] - a[:, 1], a[:, 4] - a[:, 3]], axis=-1)
        else:
            a = actions[:, None]
            u = ((a == jnp.array([2, 4])).astype(jnp.float32)
                 - (a == jnp.array([1, 3])).astype(jnp.float32))
        return u * ACCEL

    def _observe_and_reward(self, state: SpreadState):
        """Observations, rewards and info of a state; distances are computed once here."""
        n, n_l = self.n_agents, self.n_landmarks
        pos, vel = state.agent_pos, state.agent_vel

        lm_rel = state.landmark_pos[None, :, :] - pos[:, None, :]  # [N, L, 2] landmark - agent
        lm_dist = jnp.sqrt(jnp.sum(lm_rel * lm_rel, axis=-1))  # [N, L]
        closest = jnp.min(lm_dist, axis=0)  # [L]
        global_rew = -jnp.sum(closest)
        occupied = jnp.sum(closest < OCCUPIED_RADIUS, dtype=jnp.int32)

        parts = [vel, pos, lm_rel.reshape(n, 2 * n_l)]
        if n > 1:
            others = _drop_diagonal(pos[None, :, :] - pos[:, None, :])  # [N, N-1, 2] other - self
            other_dist2 = jnp.sum(others * others, axis=-1)  # [N, N-1]
            hits = other_dist2 < (2.0 * AGENT_SIZE) ** 2  # same test as dist < 0.3
            n_hits = jnp.sum(hits, axis=1, dtype=jnp.int32)  # [N]
            collisions = jnp.sum(n_hits) // 2
            local_rew = -n_hits.astype(jnp.float32)
            parts += [others.reshape(n, 2 * (n - 1)), jnp.zeros((n, COMM_DIM * (n - 1)), jnp.float32)]
        else:
            collisions = jnp.zeros((), jnp.int32)
            local_rew = jnp.zeros((n,), jnp.float32)
        obs = jnp.concatenate(parts, axis=-1)

        if self.objectives == "collisions":
            reward = jnp.stack([jnp.broadcast_to(global_rew, (n,)), local_rew], axis=-1)
        else:
            reward = (1.0 - self.local_ratio) * global_rew + self.local_ratio * local_rew
        info = {"collisions": collisions.astype(jnp.int32), "occupied_landmarks": occupied}
        return obs, reward.astype(jnp.float32), info

    def _first_timestep(self, state: SpreadState) -> TimeStep:
        obs, reward, info = self._observe_and_reward(state)
        info = {**info, "invalid_actions": jnp.zeros((), jnp.int32)}
        return self._timestep(obs, jnp.zeros(self.spec.reward_shape, jnp.float32), jnp.zeros((), bool), info)

    def _timestep(self, obs, reward, done, info) -> TimeStep:
        n = self.n_agents
        n_actions = 0 if self.continuous_actions else NUM_MOVES
        return TimeStep(
            obs=obs,
            reward=reward,
            done=done,
            truncated=done,
            active=jnp.ones((n,), bool),
            action_mask=jnp.ones((n, n_actions), bool),
            global_state=obs.reshape(n * self.obs_dim),
            info=info,
        )

    # ------------------------------------------------------------- rendering

    def render_rgb(self, state: SpreadState, size: int = 300) -> np.ndarray:
        """Draw one (unbatched) state as a uint8 [size, size, 3] image, +y up."""
        from PIL import Image, ImageDraw

        agent_pos = np.asarray(state.agent_pos, np.float64)
        landmark_pos = np.asarray(state.landmark_pos, np.float64)
        if agent_pos.ndim != 2:
            raise ConfigError(f"spread.render_rgb draws one state, got agent positions of shape {agent_pos.shape}")
        extent = max(1.0, float(np.max(np.abs(np.concatenate([agent_pos, landmark_pos])))) + AGENT_SIZE) * 1.05
        scale = size / (2.0 * extent)

        def to_px(p):
            return (p[0] + extent) * scale, (extent - p[1]) * scale

        img = Image.new("RGB", (size, size), (255, 255, 255))
        draw = ImageDraw.Draw(img, "RGBA")
        # the [-1, 1]^2 square where episodes start
        x0, y0 = to_px((-1.0, 1.0))
        x1, y1 = to_px((1.0, -1.0))
        draw.rectangle([x0, y0, x1, y1], outline=(220, 220, 220))
        d = np.sqrt(((agent_pos[:, None, :] - landmark_pos[None, :, :]) ** 2).sum(-1))
        covered = d.min(axis=0) < OCCUPIED_RADIUS
        for p, c in zip(landmark_pos, covered):
            cx, cy = to_px(p)
            r = max(LANDMARK_SIZE * scale, 2.0)
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=(40, 160, 60) if c else (64, 64, 64))
        for p in agent_pos:
            cx, cy = to_px(p)
            r = AGENT_SIZE * scale
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=(89, 89, 217, 170), outline=(40, 40, 140))
        return np.asarray(img, dtype=np.uint8)
