"""Level-based foraging: hand-built situations with exact outcomes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.envs.cooperative.foraging import EAST, LOAD, NONE, NORTH, SOUTH, WEST, Foraging

KEY = jax.random.PRNGKey(0)


def _env(**kw):
    return Foraging(grid_size=6, n_agents=2, n_food=2, **kw)


def _step(env, state, actions):
    return env.step(state, jnp.asarray(actions, jnp.int32), KEY)


def test_food_collected_only_when_levels_add_up():
    env = _env()
    # food (2,2) level 2 and (4,4) level 1; agents level 1 at (2,1) and (2,3)
    state = env.state_from([[2, 1], [2, 3]], [1, 1], [[2, 2], [4, 4]], [2, 1])
    _, ts = _step(env, state, [LOAD, NONE])
    assert float(ts.reward.sum()) == 0.0 and int(ts.info["food_collected"]) == 0
    new, ts = _step(env, state, [LOAD, LOAD])
    assert int(ts.info["food_collected"]) == 1
    # each: level 1 * food 2 / (levels 2 * total spawned 3)
    np.testing.assert_allclose(ts.reward, [1 / 3, 1 / 3], rtol=1e-6)
    assert not bool(new.food_alive[0]) and bool(new.food_alive[1])
    assert not bool(ts.done)


def test_episode_rewards_sum_to_one_and_done_when_all_eaten():
    env = _env()
    state = env.state_from([[2, 1], [4, 3]], [2, 1], [[2, 2], [4, 4]], [2, 1])
    state, ts1 = _step(env, state, [LOAD, LOAD])     # agent 0 alone eats (2,2); agent 1 eats (4,4)
    total = float(ts1.reward.sum())
    assert bool(ts1.done) and not bool(ts1.truncated)
    np.testing.assert_allclose(total, 1.0, rtol=1e-6)
    np.testing.assert_allclose(ts1.reward, [2 / 3, 1 / 3], rtol=1e-6)


def test_food_types_are_objectives_each_summing_to_one_over_its_own_food():
    env = Foraging(grid_size=6, n_agents=2, n_food=3, food_types=2, penalty=0.1)
    assert env.spec.reward_names == ("food0", "food1") and list(env.reference_point) == [-5.0, -5.0]
    # food 0 (type 0, level 1) and food 2 (type 0, level 1); food 1 (type 1, level 2)
    state = env.state_from([[1, 2], [3, 3]], [1, 2], [[1, 1], [3, 2], [4, 4]], [1, 2, 1])
    state, ts = _step(env, state, [LOAD, LOAD])          # agent 0 eats food 0, agent 1 food 1
    np.testing.assert_allclose(ts.reward, [[0.5, 0.0], [0.0, 1.0]], rtol=1e-6)
    state = state.replace(agent_pos=jnp.array([[4, 3], [0, 0]]))
    _, ts = _step(env, state, [LOAD, LOAD])              # agent 0 eats food 2; agent 1 has nothing to load
    np.testing.assert_allclose(ts.reward, [[0.5, 0.0], [0.0, 0.0]], rtol=1e-6)
    assert bool(ts.done)


def test_failed_load_penalty():
    env = _env(penalty=0.1)
    state = env.state_from([[2, 1], [0, 0]], [1, 1], [[2, 2], [4, 4]], [2, 1])
    _, ts = _step(env, state, [LOAD, NONE])
    np.testing.assert_allclose(ts.reward, [-0.1, 0.0], rtol=1e-6)


def test_movement_conflict_both_stay_and_walls_masked():
    env = _env()
    state = env.state_from([[0, 0], [0, 2]], [1, 1], [[3, 3], [4, 1]], [1, 1])
    new, ts = _step(env, state, [EAST, WEST])        # both aim at (0, 1)
    np.testing.assert_array_equal(new.agent_pos, [[0, 0], [0, 2]])
    mask = np.asarray(ts.action_mask)
    assert not mask[0, NORTH] and not mask[0, WEST] and mask[0, SOUTH] and mask[0, EAST]
    assert not mask[0, LOAD]                          # no food next to it
    # an illegal move is carried out as "none"
    new, _ = _step(env, state, [NORTH, NONE])
    np.testing.assert_array_equal(new.agent_pos[0], [0, 0])


def test_cannot_walk_onto_food_or_agents():
    env = _env()
    state = env.state_from([[2, 1], [1, 1]], [1, 1], [[2, 2], [4, 4]], [1, 1])
    _, ts = env.reset(KEY)
    mask = np.asarray(env._action_mask(state))
    assert not mask[0, EAST]   # food
    assert not mask[0, NORTH]  # agent 1
    assert mask[0, LOAD]


def test_truncation_at_max_steps():
    env = Foraging(grid_size=6, n_agents=2, n_food=1, max_steps=3)
    state, ts = env.reset(KEY)
    for _ in range(3):
        state, ts = _step(env, state, [NONE, NONE])
    assert bool(ts.done) and bool(ts.truncated)


def test_force_coop_levels_need_everyone():
    env = Foraging(grid_size=8, n_agents=3, n_food=2, max_agent_level=3, force_coop=True)
    for i in range(5):
        state, _ = env.reset(jax.random.PRNGKey(i))
        assert np.all(np.asarray(state.food_level) == np.asarray(state.agent_level).sum())


def test_spawn_rules():
    env = Foraging(grid_size=8, n_agents=3, n_food=3)
    states, _ = jax.jit(jax.vmap(env.reset))(jax.vmap(jax.random.PRNGKey)(jnp.arange(20)))
    for i in range(20):
        state = jax.tree.map(lambda x, i=i: np.asarray(x[i]), states)
        food = np.asarray(state.food_pos)
        agents = np.asarray(state.agent_pos)
        assert np.all((food >= 1) & (food <= 6)), "food on the border"
        for a in range(3):
            for b in range(a + 1, 3):
                assert np.max(np.abs(food[a] - food[b])) > 1, "food next to food"
        cells = {tuple(x) for x in np.concatenate([food, agents])}
        assert len(cells) == 6, "two things on one cell"
        top = np.sort(np.asarray(state.agent_level))[::-1][:3].sum()
        assert np.all(np.asarray(state.food_level) >= 1) and np.all(np.asarray(state.food_level) < max(top, 2))


def test_observation_layout_and_sight():
    env = Foraging(grid_size=8, n_agents=2, n_food=1, sight=1)
    state = env.state_from([[1, 1], [6, 6]], [1, 2], [[1, 2]], [3])
    _, ts = env.step(state, jnp.zeros(2, jnp.int32), KEY)
    obs = np.asarray(ts.obs)
    np.testing.assert_array_equal(obs[0], [1, 2, 3, 1, 1, 1, -1, -1, 0])   # food, self, other unseen
    np.testing.assert_array_equal(obs[1], [-1, -1, 0, 6, 6, 2, -1, -1, 0])


def test_render_and_registry():
    env = coplay.make("foraging")
    state, _ = env.reset(KEY)
    img = env.spec.render_rgb(state)
    assert img.dtype == np.uint8 and img.shape == (320, 320, 3)
    assert "step 0" in env.spec.render_text(state)


@pytest.mark.parametrize("kw, word", [({"grid_size": 2}, "grid_size=2"), ({"n_agents": 0}, "n_agents=0"),
                                      ({"n_food": 100}, "n_food=100"), ({"sight": 0}, "sight=0"),
                                      ({"penalty": -1.0}, "penalty=-1.0"),
                                      ({"food_types": 3}, "food_types=3 is out of range")])
def test_bad_arguments(kw, word):
    with pytest.raises(ConfigError, match=word):
        Foraging(**kw)


def test_an_action_out_of_range_does_nothing_and_is_counted():
    env = _env()
    state = env.state_from([[2, 1], [2, 3]], [2, 1], [[2, 2], [4, 4]], [2, 1])
    step = jax.jit(env.step)
    _, wrapped = step(state, jnp.array([-1, NONE], jnp.int32), KEY)
    _, still = step(state, jnp.array([NONE, NONE], jnp.int32), KEY)
    assert int(wrapped.info["food_collected"]) == 0 and int(wrapped.info["invalid_actions"]) == 1
    np.testing.assert_array_equal(wrapped.obs, still.obs)
