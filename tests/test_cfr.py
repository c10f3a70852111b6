"""Exact game trees, best response, exploitability and the CFR family.

Reference values: OpenSpiel reports the uniform random policy's
exploitability as 0.458333 in Kuhn poker and 2.373611 in Leduc poker, with
best-response values (0.5, 0.416667) and (2.0875, 2.659722) for players 0
and 1; Kuhn's game value for player 0 is -1/18 (Kuhn, 1950), Leduc's about
-0.0856.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos import cfr
from coplay.core.compile import jit, jit_once
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.trees import CHANCE, Rules, TreeArrays, build_tree, game_tree
from coplay.envs.trees.values import best_response, counterfactual_values, expected_value, exploitability, nash_conv


@pytest.fixture(scope="module")
def kuhn():
    tree = game_tree("kuhn_poker")
    return tree, TreeArrays.from_tree(tree)


@pytest.fixture(scope="module")
def leduc():
    tree = game_tree("leduc_holdem")
    return tree, TreeArrays.from_tree(tree)


def test_tree_sizes_match_the_games(kuhn, leduc):
    k, _ = kuhn
    assert (k.num_infosets, k.num_terminals) == (12, 30)
    assert sorted(k.infoset_keys) == sorted(
        f"{c}{h}" for c in "012" for h in ("", "p", "b", "pb"))
    l, _ = leduc
    # OpenSpiel's leduc_poker with suit_isomorphism=True has 288 information states.
    assert l.num_infosets == 288
    assert set(np.unique(l.infoset_player)) == {0, 1}


def test_uniform_policy_matches_openspiel(kuhn, leduc):
    for (tree, t), expl, brs in ((kuhn, 0.458333, (0.5, 0.416667)),
                                  (leduc, 2.373611, (2.0875, 2.659722))):
        uniform = tree.uniform_policy()
        assert float(exploitability(t, uniform)) == pytest.approx(expl, abs=1e-5)
        for player, value in enumerate(brs):
            _, br_value = best_response(t, uniform, player)
            assert float(br_value) == pytest.approx(value, abs=1e-5)


def kuhn_equilibrium(tree, alpha: float) -> jax.Array:
    """Kuhn's equilibrium family: player 0 bluffs J with alpha, bets K with 3 alpha,
    calls with Q with alpha + 1/3; player 1 bluffs J with 1/3 and calls with Q with 1/3."""
    bet = {"0": alpha, "1": 0.0, "2": 3 * alpha,
           "0pb": 0.0, "1pb": alpha + 1 / 3, "2pb": 1.0,
           "0p": 1 / 3, "1p": 0.0, "2p": 1.0,
           "0b": 0.0, "1b": 1 / 3, "2b": 1.0}
    policy = np.zeros((tree.num_infosets, 2), np.float32)
    for key, p in bet.items():
        policy[tree.infoset_index(key)] = (1 - p, p)
    return jnp.asarray(policy)


@pytest.mark.parametrize("alpha", [0.0, 1 / 6, 1 / 3])
def test_known_kuhn_equilibria_are_unexploitable(kuhn, alpha):
    tree, t = kuhn
    policy = kuhn_equilibrium(tree, alpha)
    assert float(expected_value(t, policy)) == pytest.approx(-1 / 18, abs=1e-6)
    assert float(nash_conv(t, policy)) == pytest.approx(0.0, abs=1e-6)


def test_a_deviation_from_equilibrium_is_exploited(kuhn):
    tree, t = kuhn
    policy = kuhn_equilibrium(tree, 0.0)
    # Player 1 never bluffs with J: player 0 can now fold Q to every bet.
    policy = policy.at[tree.infoset_index("0p")].set(jnp.array([1.0, 0.0]))
    response, value = best_response(t, policy, 0)
    assert float(value) > -1 / 18 + 1e-3
    assert np.argmax(response[tree.infoset_index("1pb")]) == 0  # fold Q facing a bet
    assert float(exploitability(t, policy)) > 1e-3


def solve(t, variant: str, iterations: int, **kw):
    config = cfr.Config(variant=variant, **kw)
    state = jit_once(partial(cfr.advance, iterations=iterations, config=config))(t, cfr.init(t))
    return cfr.average_policy(t, state)


def test_cfr_plus_solves_kuhn(kuhn):
    _, t = kuhn
    policy = solve(t, "cfr+", 1000)
    assert float(exploitability(t, policy)) < 1e-3
    assert float(expected_value(t, policy)) == pytest.approx(-1 / 18, abs=1e-3)


def test_cfr_plus_solves_leduc(leduc):
    _, t = leduc
    policy = solve(t, "cfr+", 500)
    assert float(exploitability(t, policy)) < 0.01
    assert float(expected_value(t, policy)) == pytest.approx(-0.0856, abs=5e-3)


@pytest.mark.parametrize("variant,alternating,bound", [
    ("cfr", True, 5e-3), ("cfr", False, 1e-2), ("dcfr", True, 1e-3), ("cfr+", False, 5e-3)])
def test_every_variant_converges_on_kuhn(kuhn, variant, alternating, bound):
    _, t = kuhn
    policy = solve(t, variant, 1000, alternating=alternating)
    assert float(exploitability(t, policy)) < bound


def test_exploitability_falls_with_iterations(leduc):
    _, t = leduc
    config = cfr.Config(variant="dcfr")
    run = jit_once(partial(cfr.advance, iterations=50, config=config))
    state = cfr.init(t)
    curve = []
    for _ in range(4):
        state = run(t, state)
        curve.append(float(exploitability(t, cfr.average_policy(t, state))))
    assert curve[-1] < curve[0] / 3
    assert int(state.iteration) == 200


def test_average_policy_is_a_distribution_over_legal_actions(leduc):
    tree, t = leduc
    policy = np.asarray(solve(t, "cfr+", 20))
    assert np.allclose(policy.sum(axis=1), 1.0, atol=1e-5)
    assert np.all(policy[~tree.legal] == 0.0)


def test_cfr_run_records_the_exact_exploitability_curve_of_kuhn():
    """CFR+ through the solvers' call shape: the curve is measured at iteration 0 (uniform
    play, OpenSpiel's 0.458333), every `eval_every` iterations and at the end, and falls
    below 1e-3 within a few hundred iterations; the policy's value is Kuhn's, -1/18."""
    env = coplay.make("tree:kuhn_poker")
    result = cfr.run(env, cfr.Config(variant="cfr+", iterations=300, eval_every=25), jax.random.PRNGKey(0))
    assert result.steps.tolist() == list(range(0, 301, 25))
    assert result.exploitability[0] == pytest.approx(0.458333, abs=1e-5)
    assert result.final < 1e-3 and result.measure.startswith("exact exploitability")
    t = TreeArrays.from_tree(env.tree)
    assert float(exploitability(t, jnp.asarray(result.policy))) == pytest.approx(result.final, abs=1e-6)
    assert result.details["expected_value"] == pytest.approx(-1 / 18, abs=1e-3)


def test_measuring_between_blocks_changes_nothing_computed(kuhn):
    """Blocks of iterations between measurements (a shorter last block included) end in
    exactly the state of one uninterrupted loop."""
    _, t = kuhn
    config = cfr.Config(variant="dcfr", iterations=130, eval_every=40)
    result = cfr.run(coplay.make("tree:kuhn_poker"), config)
    assert result.steps.tolist() == [0, 40, 80, 120, 130]
    state = jit(partial(cfr.advance, iterations=130, config=config))(t, cfr.init(t))  # as cfr.run compiles it
    np.testing.assert_allclose(result.policy, np.asarray(cfr.average_policy(t, state)), atol=1e-6)
    np.testing.assert_allclose(result.details["regrets"], np.asarray(state.regrets), rtol=1e-5, atol=1e-6)


def test_unknown_variant_and_game_are_refused():
    with pytest.raises(ConfigError, match=r"algo.variant='cfr\+\+' is not allowed; did you mean 'cfr\+'\? "
                                          r"valid choices: cfr, cfr\+, dcfr"):
        cfr.run(coplay.make("tree:kuhn_poker"), cfr.Config(variant="cfr++"))
    with pytest.raises(UnknownNameError, match="kuhn_poker"):
        game_tree("kuhn")


class _Imperfect(Rules):
    """A broken game: one information set whose histories have different legal actions."""

    name = "broken"
    num_actions = 2
    action_names = ("a", "b")

    def initial(self):
        return ()

    def is_terminal(self, h):
        return len(h) == 2

    def player(self, h):
        return CHANCE if not h else 0

    def chance_outcomes(self, h):
        return [(0, 0.5), (1, 0.5)]

    def legal_actions(self, h):
        return [0, 1] if h[0] == 0 else [0]

    def child(self, h, a):
        return h + (a,)

    def utility(self, h):
        return 1.0

    def infoset_key(self, h):
        return "same"


def test_inconsistent_information_sets_are_refused():
    with pytest.raises(ValueError, match="'same' is not consistent"):
        build_tree(_Imperfect())


def _reference_counterfactual_values(tree, policy: np.ndarray, player: int) -> np.ndarray:
    """cfv [I, A] straight from the tree's unmerged terminal paths, chance edges and all, in float64."""
    cfv = np.zeros(tree.legal.shape)
    sign = 1.0 if player == 0 else -1.0
    for z in range(tree.num_terminals):
        owner, infoset, action = tree.path_owner[z], tree.path_infoset[z], tree.path_action[z]
        prob = np.where(owner == CHANCE, tree.path_chance[z], 1.0)
        decided = owner < CHANCE
        prob[decided] = policy[infoset[decided], action[decided]]
        own = owner == player
        others = np.prod(np.where(own, 1.0, prob))
        for d in np.flatnonzero(own):
            below = np.prod(np.where(own, prob, 1.0)[d + 1:])
            cfv[infoset[d], action[d]] += others * below * sign * tree.utility[z]
    return cfv


def test_merged_paths_give_the_values_of_the_full_tree(leduc):
    """Leduc's deals that differ only in suits share a decision path (5520 terminal paths
    become 1116 columns, chance folded into the payoffs); counterfactual values over
    them are those of the full tree, summed in float64, to float32 rounding."""
    tree, t = leduc
    assert tree.num_terminals == 5520 and t.utility.shape == (1116,) and t.edge_index.shape[0] == 8
    logits = jax.random.normal(jax.random.PRNGKey(3), tree.legal.shape)
    policy = np.asarray(jax.nn.softmax(jnp.where(tree.legal, logits, -jnp.inf), axis=1), np.float64)
    for player in (0, 1):
        cfv, _ = counterfactual_values(t, jnp.asarray(policy, jnp.float32), player)
        np.testing.assert_allclose(np.asarray(cfv), _reference_counterfactual_values(tree, policy, player),
                                   rtol=1e-5, atol=1e-6)
