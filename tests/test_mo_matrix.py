"""Matrix games with two objectives (`matrix` with game=imbalancing_act,
imbalancing_act_without_m, vector_payoffs): vector rewards as the tables give them,
the Pareto-optimal joint actions, the true front of a common-payoff game, and its
hypervolume from the game's own reference point, worked out by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.eval.multi_objective import hypervolume
from coplay.interop.pettingzoo import to_pettingzoo
from coplay.wrappers import Scalarise


def _step(env, a0, a1):
    state, _ = env.reset(jax.random.PRNGKey(0))
    return env.step(state, jnp.array([a0, a1]), jax.random.PRNGKey(1))[1]


def test_vector_payoffs_reward_each_player_its_own_vector_and_mark_the_pareto_optimal_joint_actions():
    env = coplay.make("matrix", game="vector_payoffs", rounds=1)
    assert env.spec.reward_dim == 2 and env.spec.reward_names == ("x", "y") and env.spec.teams == (0, 1)
    ts = _step(env, 0, 1)                                   # row A, column B: (1, 2) and (3, 1)
    np.testing.assert_array_equal(ts.reward, [[1, 2], [3, 1]])
    assert int(ts.info["optimal"]) == 0                    # its sum (4, 3) is below B,B's (5, 4)
    assert int(_step(env, 1, 2).info["optimal"]) == 1      # B,C: (2, 5), which nothing dominates
    with pytest.raises(ConfigError, match="'vector_payoffs' pays each player its own payoffs.*imbalancing_act"):
        env.true_front()


def test_the_true_front_of_a_common_payoff_game_and_its_hypervolume():
    one = coplay.make("matrix", game="imbalancing_act", rounds=1)
    front = one.true_front()
    np.testing.assert_array_equal(front, [[0, 4], [1, 3], [2, 2], [3, 1], [4, 0]])   # every payoff: x + y = 4
    np.testing.assert_array_equal(one.reference_point, [0, 0])
    assert hypervolume(front, one.reference_point) == pytest.approx(3 + 2 + 1)        # the staircase from (0, 0)
    # two rounds of the game without its middle action: sums of (4, 0), (2, 2) and (0, 4)
    two = coplay.make("matrix", game="imbalancing_act_without_m", rounds=2)
    np.testing.assert_array_equal(two.true_front(), [[0, 8], [2, 6], [4, 4], [6, 2], [8, 0]])
    # one objective: the front is the best return
    np.testing.assert_array_equal(coplay.make("matrix", game="climbing", rounds=2).true_front(), [[22]])


def test_scalarised_and_exported_the_vector_rewards_reach_the_learner_and_pettingzoo():
    env = Scalarise(coplay.make("matrix", game="imbalancing_act", rounds=1), weights=[0.25, 0.75])
    ts = _step(env, 2, 2)                                   # (0, 4) for both
    np.testing.assert_allclose(ts.reward, [3.0, 3.0])
    np.testing.assert_array_equal(ts.info["objective/x"], [0, 0])
    np.testing.assert_array_equal(ts.info["objective/y"], [4, 4])
    pz = to_pettingzoo(coplay.make("matrix", game="vector_payoffs", rounds=2), api="parallel")
    pz.reset(seed=0)
    _, rewards, *_ = pz.step({agent: 2 for agent in pz.agents})   # C, C: (1, 3) and (0, 4)
    np.testing.assert_array_equal([rewards[a] for a in pz.possible_agents], [[1, 3], [0, 4]])
