"""Record reference episodes of Farama mpe2's simple_spread_v3 for tests/test_spread.py.

Run in a separate environment that has mpe2 (not a dependency of coplay):

    python -m venv .venv-golden
    .venv-golden/bin/pip install mpe2 pettingzoo numpy
    .venv-golden/bin/python tests/data/make_spread_golden.py

It writes tests/data/spread_golden.npz. For each case (prefix `<case>__`):

    n_agents, local_ratio, continuous   the environment's settings
    agent_pos     [E, N, 2]             positions at the start of each episode
    landmark_pos  [E, L, 2]
    actions       [E, T, N] int or [E, T, N, 5] float (as given to mpe2, before its clipping)
    obs           [E, T+1, N, D]        observation after reset and after every step
    rewards       [E, T, N]
    collisions    [E, T]                colliding agent pairs after each step (mpe2 benchmark_data)
    occupied      [E, T]                landmarks with an agent within 0.1 (mpe2 benchmark_data)
    truncated     [E, T]                the step ended the episode by the time limit
"""

from __future__ import annotations

import os

import numpy as np
from mpe2 import simple_spread_v3
from pettingzoo.utils.env_logger import EnvLogger

# pettingzoo warns on every out-of-range continuous action (which we send on purpose)
EnvLogger.suppress_output()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spread_golden.npz")
MAX_CYCLES = 25

# name: (N, local_ratio, continuous, seeds, crowded start)
CASES = {
    "d3": (3, 0.5, False, [0, 1, 2, 3], False),
    "d4": (4, 0.25, False, [10, 11], False),
    "c3": (3, 0.5, True, [20, 21], False),
    "crowd3": (3, 0.5, False, [30, 31], True),
    "crowd4c": (4, 0.75, True, [40], True),
}


def run_episode(n, local_ratio, continuous, seed, crowded):
    env = simple_spread_v3.parallel_env(
        N=n, local_ratio=local_ratio, max_cycles=MAX_CYCLES, continuous_actions=continuous,
        benchmark_data=True,
    )
    env.reset(seed=seed)
    raw = env.unwrapped
    world = raw.world
    rng = np.random.default_rng(1000 + seed)
    if crowded:
        # Agents packed around one point (0.08 to 0.2 apart), so contact forces act from the first step.
        centre = rng.uniform(-0.5, 0.5, 2)
        angles = np.arange(n) * 2 * np.pi / n + rng.uniform(0, 1)
        radius = rng.uniform(0.05, 0.12)
        for i, agent in enumerate(world.agents):
            agent.state.p_pos = centre + radius * np.array([np.cos(angles[i]), np.sin(angles[i])])
    agent_pos = np.array([a.state.p_pos for a in world.agents])
    landmark_pos = np.array([lm.state.p_pos for lm in world.landmarks])
    names = list(env.possible_agents)
    obs = [np.stack([raw.observe(a) for a in names])]
    actions, rewards, collisions, occupied, truncated = [], [], [], [], []
    for _ in range(MAX_CYCLES):
        if continuous:
            # a little outside [0, 1] so mpe2's clipping is exercised too
            act = rng.uniform(-0.25, 1.25, (n, 5)).astype(np.float32)
        else:
            act = rng.integers(0, 5, n)
        o, r, term, trunc, info = env.step({a: act[i] for i, a in enumerate(names)})
        assert not any(term.values())
        actions.append(act)
        obs.append(np.stack([o[a] for a in names]))
        rewards.append([r[a] for a in names])
        bench = [info[a]["benchmark_data"] for a in names]
        per_agent_collisions = sum(b[1] for b in bench)
        assert per_agent_collisions % 2 == 0
        collisions.append(per_agent_collisions // 2)
        occupied.append(bench[0][3])
        truncated.append(all(trunc.values()))
    assert truncated[-1] and not any(truncated[:-1]) and not env.agents
    return dict(
        agent_pos=agent_pos, landmark_pos=landmark_pos, actions=np.array(actions),
        obs=np.array(obs, np.float32), rewards=np.array(rewards, np.float64),
        collisions=np.array(collisions, np.int32), occupied=np.array(occupied, np.int32),
        truncated=np.array(truncated, bool),
    )


def main():
    out = {}
    for case, (n, local_ratio, continuous, seeds, crowded) in CASES.items():
        eps = [run_episode(n, local_ratio, continuous, s, crowded) for s in seeds]
        out[f"{case}__n_agents"] = np.array(n)
        out[f"{case}__local_ratio"] = np.array(local_ratio)
        out[f"{case}__continuous"] = np.array(continuous)
        for k in eps[0]:
            out[f"{case}__{k}"] = np.stack([e[k] for e in eps])
        print(f"{case}: {len(seeds)} episodes, {int(out[f'{case}__collisions'].sum())} collision-steps, "
              f"{int(out[f'{case}__occupied'].sum())} occupied-landmark-steps")
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
