"""Meta-solvers, PSRO on Kuhn and Leduc poker, and fictitious play on matrix games."""

import numpy as np
import pytest

import coplay
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
    with pytest.raises(ConfigError, match="algo.meta_solver='lp' is not allowed; valid choices: nash, replicator"):
        psro.run(coplay.make("tree:kuhn_poker"), psro.Config(meta_solver="lp"))


def test_psro_brings_kuhn_exploitability_below_five_hundredths():
    result = psro.run(coplay.make("tree:kuhn_poker"), psro.Config(meta_solver="nash", iterations=10))
    assert result.exploitability[0] == pytest.approx(0.458333, abs=1e-5)  # the uniform policy
    assert result.exploitability[-1] < 0.05
    assert result.steps.tolist() == list(range(11))
    # The reported number is the tree's exploitability of the returned behaviour policy.
    t = TreeArrays.from_tree(game_tree("kuhn_poker"))
    assert float(exploitability(t, result.policy)) == pytest.approx(result.exploitability[-1], abs=1e-6)
    payoffs = result.details["payoffs"]
    assert payoffs.shape == (11, 11)
    assert result.details["populations"].shape == (2, 11, 12, 2)
    # Each iteration's mixtures are distributions over the members there were then.
    metas = result.details["meta_strategies"]
    assert metas.shape == (11, 2, 11) and np.allclose(metas.sum(-1), 1.0)
    assert all(np.all(metas[k, :, k + 1:] == 0) for k in range(11))
    # The meta-game's equilibrium value approaches Kuhn's game value, -1/18.
    _, _, value = zero_sum_nash(payoffs)
    assert value == pytest.approx(-1 / 18, abs=0.02)
    assert result.details["expected_value"] == pytest.approx(-1 / 18, abs=0.02)


@pytest.mark.parametrize("meta_solver,bound", [("replicator", 0.05), ("uniform", 0.15)])
def test_psro_meta_solvers_reduce_exploitability(meta_solver, bound):
    result = psro.solve_tree(game_tree("kuhn_poker"), psro.Config(meta_solver=meta_solver, iterations=10))
    assert result.exploitability[-1] < bound < result.exploitability[0]


def test_fictitious_play_finds_rock_paper_scissors_equilibrium():
    result = fictitious_play.run(coplay.make("matrix", game="rps"), fictitious_play.Config(iterations=3000))
    assert np.allclose(result.policy, 1 / 3, atol=0.02)
    assert result.steps[-1] == 3000 and result.measure.startswith("NashConv")
    assert result.exploitability[-1] < 0.05 < result.exploitability[1]
    # The curve's last mixtures are the returned ones, and their NashConv is the curve's last point.
    mixtures = result.details["mixtures"]
    assert np.array_equal(mixtures[-1], result.policy)
    x, y = result.policy
    assert float(fictitious_play.nash_conv(payoff_table("rps"), x, y)) == pytest.approx(result.final, abs=1e-6)


def test_fictitious_play_in_the_prisoners_dilemma_defects():
    result = fictitious_play.solve_table(payoff_table("prisoners_dilemma"),
                                         fictitious_play.Config(iterations=200, eval_every=30))
    assert result.steps.tolist() == [0, 30, 60, 90, 120, 150, 180, 200]
    assert result.policy[:, 1].min() > 0.99  # action 1 = defect, strictly dominant
    assert result.exploitability[-1] < 0.05


def test_unknown_matrix_game_is_refused():
    with pytest.raises(UnknownNameError, match="rps"):
        payoff_table("roshambo")


def test_psro_ppo_refuses_bad_settings():
    import coplay
    from coplay.algos import psro_ppo

    kuhn = coplay.make("tree:kuhn_poker")
    with pytest.raises(ConfigError, match="nash, replicator, uniform"):
        psro_ppo.run(kuhn, psro_ppo.Config(meta_solver="alpharank"))
    with pytest.raises(ConfigError, match="br_updates=0"):
        psro_ppo.run(kuhn, psro_ppo.Config(br_updates=0))
    with pytest.raises(ConfigError, match="minibatches=3 must divide"):
        psro_ppo.run(kuhn, psro_ppo.Config(minibatches=3))
    with pytest.raises(ConfigError, match="'spread' \\(it has 3 players\\)"):
        psro_ppo.run(coplay.make("spread"), psro_ppo.Config(iterations=1))


def test_psro_ppo_flattens_the_response_trainers_fields():
    from coplay.algos import psro_ppo, selfplay_ppo

    config = psro_ppo.Config(lr=3e-4, hidden_size=32, num_envs=16, random_opening=1)
    responses = psro_ppo.response_config(config)
    assert isinstance(responses, selfplay_ppo.Config)
    assert (responses.lr, responses.hidden_size, responses.num_envs, responses.random_opening) == (3e-4, 32, 16, 1)
    assert responses.ent_coef == 0.01 and responses.greedy_eval is False  # a response's defaults
