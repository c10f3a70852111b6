"""Meta-solvers, PSRO on Kuhn and Leduc poker, and fictitious play on matrix games."""

import numpy as np
import pytest

from coplay.algos import fictitious_play, psro
from coplay.algos.common.meta_solvers import replicator, solve_meta_game, zero_sum_nash
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.mixed.matrix import payoff_table
from coplay.envs.trees import TreeArrays, game_tree
from coplay.envs.trees.values import exploitability


RPS = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], float)


def test_zero_sum_nash_of_known_games():
    x, y, value = zero_sum_nash(RPS)
    assert np.allclose(x, 1 / 3, atol=1e-6) and np.allclose(y, 1 / 3, atol=1e-6)
    assert value == pytest.approx(0.0, abs=1e-9)
    # A game with a saddle point: row 1 dominates, column 0 is the column player's best reply.
    x, y, value = zero_sum_nash(np.array([[1.0, 4.0], [3.0, 5.0]]))
    assert np.allclose(x, [0, 1]) and np.allclose(y, [1, 0]) and value == pytest.approx(3.0)
    # Biased matching pennies [[2, -1], [-1, 1]]: x = (2/5, 3/5), value 1/5.
    x, y, value = zero_sum_nash(np.array([[2.0, -1.0], [-1.0, 1.0]]))
    assert np.allclose(x, [0.4, 0.6], atol=1e-6) and value == pytest.approx(0.2, abs=1e-6)


def test_replicator_average_approaches_the_equilibrium():
    x, y = replicator(np.array([[2.0, -1.0], [-1.0, 1.0]]), steps=20000)
    assert np.allclose(x, [0.4, 0.6], atol=0.02) and np.allclose(y, [0.4, 0.6], atol=0.02)


def test_unknown_meta_solver_is_refused():
    with pytest.raises(ConfigError, match="nash, replicator, uniform"):
        solve_meta_game(RPS, "alpharank")
    with pytest.raises(ConfigError, match="meta_solver"):
        psro.Config(meta_solver="lp")


def test_psro_brings_kuhn_exploitability_below_five_hundredths():
    result = psro.run(game_tree("kuhn_poker"), psro.Config(meta_solver="nash", iterations=10))
    assert result.exploitability[0] == pytest.approx(0.458333, abs=1e-5)  # the uniform policy
    assert result.exploitability[-1] < 0.05
    # The reported number is the tree's exploitability of the returned behaviour policy.
    t = TreeArrays.from_tree(game_tree("kuhn_poker"))
    assert float(exploitability(t, result.policy)) == pytest.approx(result.exploitability[-1], abs=1e-6)
    k0, k1 = result.payoffs.shape
    assert (k0, k1) == (11, 11)
    # The meta-game's equilibrium value approaches Kuhn's game value, -1/18.
    _, _, value = zero_sum_nash(result.payoffs)
    assert value == pytest.approx(-1 / 18, abs=0.02)


@pytest.mark.parametrize("meta_solver,bound", [("replicator", 0.05), ("uniform", 0.15)])
def test_psro_meta_solvers_reduce_exploitability(meta_solver, bound):
    result = psro.run(game_tree("kuhn_poker"), psro.Config(meta_solver=meta_solver, iterations=10))
    assert result.exploitability[-1] < bound < result.exploitability[0]


def test_fictitious_play_finds_rock_paper_scissors_equilibrium():
    result = fictitious_play.run(payoff_table("rps"), iterations=3000)
    assert np.allclose(result.average[-1], 1 / 3, atol=0.02)
    assert result.nash_conv[-1] < 0.05 < result.nash_conv[10]


def test_fictitious_play_in_the_prisoners_dilemma_defects():
    result = fictitious_play.run(payoff_table("prisoners_dilemma"), iterations=200)
    assert result.average[-1, :, 1].min() > 0.99  # action 1 = defect, strictly dominant
    assert result.nash_conv[-1] < 0.05


def test_unknown_matrix_game_is_refused():
    with pytest.raises(UnknownNameError, match="rps"):
        payoff_table("roshambo")


def test_psro_ppo_refuses_bad_settings():
    import coplay
    from coplay.algos import psro_ppo

    with pytest.raises(ConfigError, match="nash, replicator, uniform"):
        psro_ppo.Config(meta_solver="alpharank")
    with pytest.raises(ConfigError, match="br_updates=0"):
        psro_ppo.Config(br_updates=0)
    with pytest.raises(ConfigError, match="'spread' has 3 players"):
        psro_ppo.run(coplay.make("spread"), psro_ppo.Config(iterations=1))
