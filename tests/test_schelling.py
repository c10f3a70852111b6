"""Schelling diagrams from fixed policies: exact on the two-player prisoner's dilemma,
and the expected payoffs of the population dilemma's random pairings."""

import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy, no_carry
from coplay.eval.schelling import schelling_diagram


def always(env, action):
    return Policy(act=lambda params, obs, mask, key, carry, reset: (jnp.full(mask.shape[:-1], action, jnp.int32),
                                                                    carry),
                  initial_carry=no_carry, env=env)


def test_the_prisoner_s_dilemma_s_diagram_is_its_payoff_matrix():
    env = coplay.make("matrix", game="prisoners_dilemma", rounds=1)
    d = schelling_diagram(env, always(env, 0), None, always(env, 1), None, episodes=4)
    assert d.cooperator.tolist() == [0.0, 3.0] and d.defector.tolist() == [1.0, 5.0]     # S, R and P, T
    assert d.is_dilemma


def test_in_a_population_with_random_partners_payoffs_grow_with_the_other_cooperators():
    n, rounds = 4, 5
    env = coplay.make("population_dilemma", n_agents=n, rounds=rounds, partner_selection=False,
                      direct_punishment=False, third_party_punishment=False)
    d = schelling_diagram(env, always(env, 0), None, always(env, 1), None, episodes=256)
    k = np.arange(n)
    # a round pays as the one who names a uniform partner and as the one named by each other with chance 1/(N-1)
    expected_c = rounds * 2 * 3 * k / (n - 1)
    expected_d = rounds * 2 * (5 * k + (n - 1 - k)) / (n - 1)
    for got, ci, want in [(d.cooperator, d.cooperator_ci, expected_c), (d.defector, d.defector_ci, expected_d)]:
        half = (ci[:, 1] - ci[:, 0]) / 2
        assert np.all(np.abs(got - want) <= 2 * half + 1e-6), (got, want, half)
    assert d.is_dilemma and "| 3 |" in d.table()


def test_a_diagram_needs_players_with_one_reward_each():
    env = coplay.make("treasure")
    with pytest.raises(ConfigError, match="one reward each"):
        schelling_diagram(env, always(env, 0), None, always(env, 1), None)
