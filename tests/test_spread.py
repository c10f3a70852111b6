"""The spread environment: step-for-step agreement with Farama mpe2's
simple_spread_v3 (episodes recorded by tests/data/make_spread_golden.py), and
its own checks: reset distribution, episode length, collision counts,
rendering and argument validation."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.envs.cooperative.spread import Spread

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "spread_golden.npz")
TOL = 1e-4


def _golden_cases():
    data = np.load(GOLDEN)
    cases = sorted({k.split("__")[0] for k in data.files})
    return data, cases


_DATA, _CASES = _golden_cases()


def _replay(env: Spread, agent_pos, landmark_pos, actions):
    """Run one episode from the given start with the given actions: (first ts, stacked step ts)."""
    state, ts0 = env.reset_to(agent_pos, landmark_pos)

    def body(state, act):
        state, ts = env.step(state, act, jax.random.PRNGKey(0))
        return state, ts

    _, tss = jax.lax.scan(body, state, actions)
    return ts0, tss


@pytest.mark.parametrize("case", _CASES)
def test_matches_mpe2(case):
    g = {k.split("__", 1)[1]: _DATA[k] for k in _DATA.files if k.startswith(case + "__")}
    n = int(g["n_agents"])
    env = Spread(n_agents=n, local_ratio=float(g["local_ratio"]), continuous_actions=bool(g["continuous"]))
    replay = jax.jit(lambda a, lm, act: _replay(env, a, lm, act))
    n_episodes = g["actions"].shape[0]
    assert n_episodes >= 1
    for e in range(n_episodes):
        actions = g["actions"][e]
        actions = actions.astype(np.float32) if env.continuous_actions else actions.astype(np.int32)
        ts0, tss = replay(g["agent_pos"][e], g["landmark_pos"][e], actions)
        where = f"{case} episode {e}"
        np.testing.assert_allclose(ts0.obs, g["obs"][e, 0], atol=TOL, rtol=0, err_msg=f"{where}: reset obs")
        np.testing.assert_allclose(tss.obs, g["obs"][e, 1:], atol=TOL, rtol=0, err_msg=f"{where}: obs")
        np.testing.assert_allclose(tss.reward, g["rewards"][e], atol=TOL, rtol=0, err_msg=f"{where}: rewards")
        np.testing.assert_array_equal(tss.info["collisions"], g["collisions"][e], err_msg=f"{where}: collisions")
        np.testing.assert_array_equal(tss.info["occupied_landmarks"], g["occupied"][e],
                                      err_msg=f"{where}: occupied")
        np.testing.assert_array_equal(tss.truncated, g["truncated"][e], err_msg=f"{where}: truncation")
        np.testing.assert_array_equal(tss.done, g["truncated"][e], err_msg=f"{where}: done")
        # global state = every agent's observation, concatenated (mpe2's env.state())
        np.testing.assert_allclose(tss.global_state, g["obs"][e, 1:].reshape(len(actions), -1), atol=TOL, rtol=0)


def test_golden_covers_contacts_and_all_settings():
    """The recorded episodes exercise contact forces, N=3 and N=4, both action kinds."""
    ns = {int(_DATA[f"{c}__n_agents"]) for c in _CASES}
    kinds = {bool(_DATA[f"{c}__continuous"]) for c in _CASES}
    assert {3, 4} <= ns and kinds == {True, False}
    assert sum(int(_DATA[f"{c}__collisions"].sum()) for c in _CASES) >= 10
    assert os.path.getsize(GOLDEN) < 1_000_000


def test_reset_distribution():
    env = Spread(n_agents=4, n_landmarks=5)
    keys = jax.random.split(jax.random.PRNGKey(1), 2000)
    states, ts = jax.vmap(env.reset)(keys)
    for name, x in (("agents", states.agent_pos), ("landmarks", states.landmark_pos)):
        x = np.asarray(x)
        assert x.dtype == np.float32
        assert x.min() >= -1.0 and x.max() <= 1.0, name
        # uniform on [-1, 1]: mean 0, variance 1/3, and the whole range is used
        assert abs(x.mean()) < 0.02 and abs(x.var() - 1 / 3) < 0.02, name
        assert x.min() < -0.99 and x.max() > 0.99, name
    assert states.landmark_pos.shape == (2000, 5, 2)
    assert np.all(np.asarray(states.agent_vel) == 0)
    assert np.all(np.asarray(states.step) == 0)
    assert np.all(np.asarray(ts.reward) == 0) and not np.any(np.asarray(ts.done))
    # agents and landmarks are drawn independently
    assert not np.allclose(np.asarray(states.agent_pos[:, :4]), np.asarray(states.landmark_pos[:, :4]))


def test_spec_and_timestep_shapes():
    env = Spread(n_agents=3)
    assert env.spec.name == "spread" and env.spec.max_steps == 25
    assert env.spec.obs_space.shape == (18,)
    assert env.spec.global_state_space.shape == (54,)
    assert env.spec.action_space.n == 5
    assert env.spec.teams == (0, 0, 0) and env.spec.roles == ("agent",) * 3
    state, ts = env.reset(jax.random.PRNGKey(0))
    assert ts.action_mask.shape == (3, 5) and bool(ts.action_mask.all())
    assert ts.info["collisions"].dtype == jnp.int32 and ts.info["collisions"].shape == ()
    assert ts.info["occupied_landmarks"].dtype == jnp.int32
    cont = Spread(n_agents=4, continuous_actions=True)
    assert cont.spec.action_space.shape == (5,) and cont.spec.obs_space.shape == (24,)
    _, ts = cont.reset(jax.random.PRNGKey(0))
    assert ts.action_mask.shape == (4, 0)


def test_episode_ends_at_max_steps():
    for max_steps in (25, 7):
        env = Spread(max_steps=max_steps)
        state, _ = env.reset(jax.random.PRNGKey(0))
        step = jax.jit(env.step)
        for t in range(1, max_steps + 1):
            state, ts = step(state, jnp.zeros(3, jnp.int32), jax.random.PRNGKey(t))
            assert bool(ts.done) == (t == max_steps) and bool(ts.truncated) == (t == max_steps), t
        assert int(state.step) == max_steps


def test_discrete_action_directions():
    """0 no-op, 1 left, 2 right, 3 down, 4 up; first step moves nothing (old velocity), then 0.5 * dt."""
    env = Spread(n_agents=5, n_landmarks=1)
    far = np.array([[-4.0, 0.0], [-2.0, 0.0], [0.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
    state = env.state_from_positions(far, [[0.0, 9.0]])
    acts = jnp.arange(5, dtype=jnp.int32)
    state, _ = env.step(state, acts, jax.random.PRNGKey(0))
    expected_vel = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]]) * 5.0 * 0.1
    np.testing.assert_allclose(state.agent_vel, expected_vel, atol=1e-6)
    np.testing.assert_allclose(state.agent_pos, far, atol=1e-6)
    state, _ = env.step(state, acts, jax.random.PRNGKey(0))
    np.testing.assert_allclose(state.agent_pos, far + expected_vel * 0.1, atol=1e-6)
    np.testing.assert_allclose(state.agent_vel, expected_vel * 1.75, atol=1e-6)


def test_collisions_info_counts_known_overlaps():
    env = Spread(n_agents=4, n_landmarks=2, local_ratio=1.0)
    # agents 0-1 overlap (0.2 < 0.3), 1-2 overlap (0.25), 0-2 do not (0.45), 3 is far away
    agent_pos = np.array([[0.0, 0.0], [0.2, 0.0], [0.45, 0.0], [3.0, 3.0]])
    landmark_pos = np.array([[0.0, 0.05], [3.0, 3.0]])
    state, ts = env.reset_to(agent_pos, landmark_pos)
    assert int(ts.info["collisions"]) == 2
    assert int(ts.info["occupied_landmarks"]) == 2
    # stepping with no-ops: the overlapping agents are pushed apart but still collide after one step
    _, ts = env.step(state, jnp.zeros(4, jnp.int32), jax.random.PRNGKey(0))
    assert int(ts.info["collisions"]) == 2
    # local_ratio=1: reward is minus the number of *other* agents touched (no self-collision)
    np.testing.assert_allclose(ts.reward, [-1.0, -2.0, -1.0, 0.0])
    # contact forces are equal and opposite along the line between centres, and only between overlaps
    np.testing.assert_allclose(np.asarray(ts.obs[:, 0:2]).sum(0), 0.0, atol=1e-5)
    assert float(ts.obs[0, 0]) < 0 < float(ts.obs[2, 0])
    np.testing.assert_allclose(ts.obs[:, 1], 0.0, atol=1e-6)
    np.testing.assert_allclose(ts.obs[3, 0:2], 0.0, atol=1e-6)


def test_reward_combines_global_and_local():
    env = Spread(n_agents=2, n_landmarks=2, local_ratio=0.25)
    agent_pos = np.array([[0.0, 0.0], [0.1, 0.0]])  # colliding
    landmark_pos = np.array([[0.0, 0.3], [1.0, 0.0]])
    state = env.state_from_positions(agent_pos, landmark_pos)
    obs, reward, info = env._observe_and_reward(state)
    global_rew = -(0.3 + 0.9)
    np.testing.assert_allclose(reward, [0.75 * global_rew - 0.25] * 2, atol=1e-6)
    assert int(info["collisions"]) == 1
    # observation layout: vel, pos, landmarks - pos, other agents - pos, zeros
    np.testing.assert_allclose(obs[1], [0, 0, 0.1, 0, -0.1, 0.3, 0.9, 0, -0.1, 0, 0, 0], atol=1e-6)


def test_two_objectives_split_the_reward_or_add_each_agents_effort():
    """`objectives=collisions`: (global, local_i), the parts `local_ratio` would mix;
    `objectives=energy`: (the scalar reward, -|u_i|^2)."""
    agent_pos, landmark_pos = np.array([[0.0, 0.0], [0.1, 0.0]]), np.array([[0.0, 0.3], [1.0, 0.0]])
    split = Spread(n_agents=2, n_landmarks=2, objectives="collisions")
    assert split.spec.reward_names == ("coverage", "collisions") and split.spec.reward_dim == 2
    _, reward, _ = split._observe_and_reward(split.state_from_positions(agent_pos, landmark_pos))
    np.testing.assert_allclose(reward, [[-1.2, -1.0], [-1.2, -1.0]], atol=1e-6)
    for continuous, actions, effort in ((False, jnp.array([0, 3]), [0.0, -1.0]),
                                        (True, jnp.array([[0, 1, 0, 0, 1.0], [0, 0.5, 0, 0, 0]]), [-2.0, -0.25])):
        one = Spread(n_agents=2, n_landmarks=2, continuous_actions=continuous)
        energy = Spread(n_agents=2, n_landmarks=2, continuous_actions=continuous, objectives="energy")
        steps = [env.step(env.state_from_positions(agent_pos, landmark_pos), actions, jax.random.PRNGKey(0))[1]
                 for env in (one, energy)]
        np.testing.assert_allclose(steps[1].reward[:, 0], steps[0].reward, atol=1e-6)
        np.testing.assert_allclose(steps[1].reward[:, 1], effort, atol=1e-6)
        assert list(energy.reference_point) == [-5.0 * 2 * 25, -(2.0 if continuous else 1.0) * 25]
    assert energy.reset(jax.random.PRNGKey(0))[1].reward.shape == (2, 2)


def test_continuous_actions_are_clipped():
    env = Spread(n_agents=2, n_landmarks=1, continuous_actions=True)
    state = env.state_from_positions([[-2.0, 0.0], [2.0, 0.0]], [[0.0, 0.0]])
    acts = jnp.array([[9.0, -3.0, 2.0, 0.25, 0.5], [0.0, 0.5, 0.0, 1.0, 0.0]], jnp.float32)
    state, _ = env.step(state, acts, jax.random.PRNGKey(0))
    np.testing.assert_allclose(state.agent_vel, np.array([[1.0, 0.25], [-0.5, -1.0]]) * 0.5, atol=1e-6)


def test_jit_vmap_scan():
    env = Spread()
    n_envs, n_steps = 8, 30

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        states, ts = jax.vmap(env.reset)(jax.random.split(k0, n_envs))

        def body(states, k):
            ka, ks = jax.random.split(k)
            acts = jax.random.randint(ka, (n_envs, 3), 0, 5, jnp.int32)
            states, ts = jax.vmap(env.step)(states, acts, jax.random.split(ks, n_envs))
            return states, ts.reward

        return jax.lax.scan(body, states, jax.random.split(k1, n_steps))

    states, rewards = run(jax.random.PRNGKey(0))
    assert rewards.shape == (n_steps, n_envs, 3) and rewards.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(rewards)))
    assert states.agent_pos.dtype == jnp.float32


def test_render_rgb():
    env = Spread(n_agents=3)
    state, _ = env.reset(jax.random.PRNGKey(3))
    img = env.spec.render_rgb(state)
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.shape == (300, 300, 3)
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 2  # something was drawn
    far = env.state_from_positions([[5.0, 5.0], [-5.0, 0.0], [0.0, 0.0]], [[0.5, 0.5]] * 3)
    assert env.render_rgb(far, size=64).shape == (64, 64, 3)


@pytest.mark.parametrize("kwargs, needle", [
    ({"n_agents": 0}, "n_agents=0"),
    ({"n_agents": -2}, "n_agents=-2"),
    ({"n_agents": 2.5}, "2.5"),
    ({"n_agents": True}, "True"),
    ({"n_landmarks": 0}, "n_landmarks=0"),
    ({"local_ratio": 1.5}, "local_ratio=1.5"),
    ({"local_ratio": -0.1}, "local_ratio=-0.1"),
    ({"local_ratio": float("nan")}, "nan"),
    ({"local_ratio": "half"}, "'half'"),
    ({"max_steps": 0}, "max_steps=0"),
    ({"continuous_actions": "yes"}, "'yes'"),
    ({"objectives": "speed"}, "one, energy, collisions"),
])
def test_bad_arguments(kwargs, needle):
    with pytest.raises(ConfigError) as err:
        Spread(**kwargs)
    msg = str(err.value)
    assert needle in msg
    name = next(iter(kwargs))
    assert name in msg


def test_bad_arguments_name_the_range():
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        Spread(local_ratio=2.0)
    with pytest.raises(ConfigError, match=r"\[1, "):
        Spread(n_agents=0)


@pytest.mark.parametrize("continuous", [False, True])
def test_actions_outside_the_space_do_nothing_and_are_counted(continuous):
    env = coplay.make("spread", n_agents=2, continuous_actions=continuous)
    state, _ = env.reset(jax.random.PRNGKey(0))
    still = jnp.zeros((2, 5)) if continuous else jnp.zeros(2, jnp.int32)
    bad = still.at[1, 2].set(jnp.nan) if continuous else still.at[1].set(7)
    for step in (env.step, jax.jit(env.step)):  # the same outcome outside jit and inside
        _, ts_bad = step(state, bad, jax.random.PRNGKey(1))
        _, ts_still = step(state, still, jax.random.PRNGKey(1))
        assert int(ts_bad.info["invalid_actions"]) == 1 and int(ts_still.info["invalid_actions"]) == 0
        np.testing.assert_array_equal(ts_bad.obs, ts_still.obs)  # the agent stayed put, and nothing is NaN


def test_a_list_of_actions_is_taken_as_an_array():
    env = coplay.make("spread", n_agents=2)
    state, _ = env.reset(jax.random.PRNGKey(0))
    _, from_list = env.step(state, [1, 4], jax.random.PRNGKey(1))
    _, from_array = env.step(state, jnp.array([1, 4]), jax.random.PRNGKey(1))
    np.testing.assert_array_equal(from_list.obs, from_array.obs)
