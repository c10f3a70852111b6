"""Deep-sea salvage (`treasure`): the Pareto front computed in code against scripted
episodes, which of its points a linear utility can reach, and bad settings refused."""

import jax
import numpy as np
import pytest

import coplay
from coplay.algos.common.preferences import simplex_weights
from coplay.core.compile import jit_once
from coplay.core.errors import ConfigError, UnknownNameError

STAY, UP, DOWN, LEFT, RIGHT = range(5)


def _to_column(j, depth, pad):
    """Moves from the start to the chest of column j (right along the surface, then down), then `pad` stays."""
    return [RIGHT] * j + [DOWN] * depth + [STAY] * pad


def _episode(env, plans):
    """Play each submarine's list of moves; the episode's vector return (of agent 0; the
    reward is the team's), its length, and each step's `active` mask."""
    steps = max(len(p) for p in plans)
    actions = np.array([[p[t] if t < len(p) else STAY for p in plans] for t in range(steps)], np.int32)

    def run(key):
        state, _ = env.reset(key)
        return jax.lax.scan(lambda s, a: env.step(s, a, key), state, actions)[1]

    ts = jit_once(run)(jax.random.PRNGKey(0))
    done = np.asarray(ts.done)
    end = int(np.argmax(done)) if done.any() else steps - 1
    reward = np.asarray(ts.reward)[: end + 1, 0]
    return reward.sum(0), end + 1, np.asarray(ts.active)[: end + 1]


def test_scripted_dives_score_as_the_computed_front_says():
    env = coplay.make("treasure")
    np.testing.assert_array_equal(env.steps_to_chests(), [2, 3, 5, 7])
    front = env.true_front()
    np.testing.assert_array_equal(front, [[2, -2], [10, -3], [14, -5], [15, -7]])
    np.testing.assert_array_equal(env.reference_point, [0, -10])
    for j, depth in enumerate((2, 2, 3, 4)):    # both to column j: (2 v_j, -t_j), a point of the front
        ret, length, _ = _episode(env, [_to_column(j, depth, 0), _to_column(j, depth, 0)])
        np.testing.assert_allclose(ret, front[j])
        assert length == j + depth
    # different columns: both chests, and the later one's time, which taking the later one twice beats
    ret, _, active = _episode(env, [_to_column(0, 2, 5), _to_column(3, 4, 0)])
    np.testing.assert_allclose(ret, [1 + 7.5, -7])
    np.testing.assert_array_equal(active[1], [False, True])   # the first has lifted its chest and waits


def test_a_heavy_chest_needs_both_submarines():
    env = coplay.make("treasure", crew="together")
    np.testing.assert_array_equal(env.true_front(), [[1, -2], [5, -3], [7, -5], [7.5, -7]])
    ret, length, _ = _episode(env, [_to_column(2, 3, 0), _to_column(2, 3, 0)])
    np.testing.assert_allclose(ret, [7, -5])
    ret, length, _ = _episode(env, [_to_column(0, 2, 8), _to_column(1, 2, 7)])   # apart: nothing, all the time
    np.testing.assert_allclose(ret, [0, -10])
    assert length == 10


@pytest.mark.parametrize("values, supported", [("convex", 4), ("concave", 2)])
def test_linear_utilities_reach_every_point_of_the_convex_front_and_only_the_ends_of_the_concave_one(
        values, supported):
    front = coplay.make("treasure", values=values).true_front()
    best = np.argmax(simplex_weights(2, 1000) @ front.T, axis=1)
    assert len(set(best.tolist())) == supported


@pytest.mark.parametrize("kwargs, error, words", [
    ({"values": "steep"}, UnknownNameError, "convex"),
    ({"crew": "fleet"}, UnknownNameError, "together"),
    ({"max_steps": 6}, ConfigError, "max_steps=6 is out of range; it must be an integer >= 7"),
])
def test_bad_settings_are_refused_by_name(kwargs, error, words):
    with pytest.raises(error) as e:
        coplay.make("treasure", **kwargs)
    assert words in str(e.value)
