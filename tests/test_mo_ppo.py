"""The weight sweep (`algo=mo_ppo`): a whole Pareto front from one compiled run of
W weights x S seeds, scored against the front the environment computes; what the
run writes about its fronts; and the settings it refuses before compiling."""

import csv
import json

import jax
import numpy as np
import pytest

import coplay
from coplay.algos.common.preferences import spread_weights
from coplay.core.errors import ConfigError
from coplay.experiment import fronts
from coplay.experiment.config import parse_overrides
from coplay.experiment.compiled import plan

WEIGHTS = 5   # (0, 1), (0.25, 0.75), ... (1, 0): each chest of the front is the best for one of them


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """5 weights x 2 seeds on the salvage task with a convex front, one compiled run (two
    chunks of 58 updates)."""
    out = tmp_path_factory.mktemp("mo_ppo")
    return coplay.train(["algo=mo_ppo", "env=treasure", f"algo.weights={WEIGHTS}", "seeds=2", "total_steps=59392",
                         "chunk_steps=30000", "algo.num_envs=32", "algo.rollout_len=16",
                         "algo.ent_coef=0.05", "algo.greedy_eval=true", "eval_episodes=4", f"out_dir={out}",
                         "progress=false", "logger=csv"])


def test_one_run_of_five_weights_finds_most_of_the_true_front_on_every_seed(sweep):
    front = sweep.summary["front"]
    true_hv = front["true_hypervolume"]
    assert true_hv == 95.0 and front["true_front"] == [[2, -2], [10, -3], [14, -5], [15, -7]]
    hv = np.array(sweep.summary["final"]["hypervolume"]["per_seed"])
    # Random play lifts a chest in a few episodes of a hundred; a sweep that found only the
    # nearest chest scores 16 of 95, one that found the two ends 55, and one without the
    # deepest chest (whose lead over the next is small, and learned last) 92.
    assert np.all(hv >= 0.9 * true_hv), hv
    for seed_front in front["per_seed"]:
        assert [2.0, -2.0] in seed_front          # the quickest chest, for the weights on time
    assert len(front["weights"]) == WEIGHTS and np.allclose(np.sum(front["weights"], axis=1), 1.0)


def test_the_run_writes_each_weights_returns_the_fronts_quality_and_its_plots(sweep):
    rows = list(csv.DictReader((sweep.run_dir / "metrics.csv").open()))
    columns = rows[0].keys()
    for name in ("eval/hypervolume", "eval/expected_utility", "objective/treasure", "objective/time",
                 f"eval/w{WEIGHTS - 1:02d}/objective/treasure", "eval/w00/objective/time"):
        assert name in columns
    summary = json.loads((sweep.run_dir / "summary.json").read_text())
    assert summary["front"]["objectives"] == ["treasure", "time"] and summary["front"]["reference_point"] == [0, -10]
    final = summary["final"]
    # each seed's hypervolume is the one of its weights' vector returns
    for s in range(2):
        points = [[final[f"w{i:02d}/objective/{n}"]["per_seed"][s] for n in ("treasure", "time")]
                  for i in range(WEIGHTS)]
        assert final["hypervolume"]["per_seed"][s] == pytest.approx(
            coplay.eval.multi_objective.hypervolume(points, [0, -10]))
    assert summary["return_convention"].startswith("episode utility under each policy's own weight (w . R")
    for picture in ("front.png", "hypervolume.png", "curve.png", "objectives.png"):
        assert (sweep.run_dir / picture).stat().st_size > 0


@pytest.mark.parametrize("overrides, words", [
    (["algo.weights=8", "algo.show_weight=8"], "algo.show_weight=8 is out of range; it must be an index into the 8 "
                                               "weights, 0 to 7"),
    (["algo.weights=1"], "algo.weights=1 is out of range"),
    (["algo.utopia=16:-1"], "algo.utopia=16:-1 is read only with algo.utility=chebyshev"),
    (["algo.utility=chebyshev", "algo.utopia=16"], "algo.utopia=16 must be 2 finite numbers, one per objective: "
                                                   "treasure, time"),
    (["algo.utility=chebyshev", "algo.utopia=12:-1"], "algo.utopia=12:-1 is not a utopia point of 'treasure': its "
                                                      "true front reaches [15.0, -2.0]"),
    (["algo.utility=chebyshev", "algo.utopia=a:b"], "'a:b' is not a list of numbers"),
    (["algo.utility=chebyshev", "algo.select=ols"], "with algo.utility=chebyshev use algo.select=even"),
    (["algo.utility=chebyshev", "env=spread", "env.objectives=energy"],
     "'spread' computes no true front to take it from: give algo.utopia=... (2 numbers"),
    # the weight sweep's own fields are not pc_mappo's (its config no longer inherits them)
    (["algo=pc_mappo", "algo.utility=chebyshev"], "unknown config field of algo 'utility'"),
    (["algo=pc_mappo", "algo.select=ols"], "unknown config field of algo 'select'"),
])
def test_bad_settings_are_refused_before_anything_compiles(overrides, words):
    with pytest.raises(ConfigError) as e:
        plan(parse_overrides(["algo=mo_ppo", "env=treasure", *overrides]))   # a later algo= or env= wins
    assert words in str(e.value)


def test_chebyshev_utility_reaches_a_point_of_a_concave_front_that_no_linear_weight_prefers(tmp_path):
    """On the concave salvage front (2, -2), (3, -3), (6, -5), (15, -7) no linear utility
    prefers the two middle points (both lie below the line joining the ends), so a linear
    sweep scores at most the ends' 55 of 65. Chebyshev's utility of the episode's return,
    paid step by step, reaches (6, -5)."""
    from coplay.algos.mo_ppo import chebyshev_point

    utopia, scale = chebyshev_point(coplay.make("treasure", values="concave"), None)
    np.testing.assert_allclose(utopia, [15.15, -1.92], rtol=1e-6)   # the front's best, plus 1% of its distance
    np.testing.assert_allclose(scale, [15.15, 8.08], rtol=1e-6)     # from the reference point (0, -10)
    run = coplay.train(["algo=mo_ppo", "env=treasure", "env.values=concave", "algo.utility=chebyshev",
                        "algo.weights=5", "seeds=2", "total_steps=10240", "chunk_steps=10240", "algo.num_envs=8",
                        "algo.rollout_len=16", "algo.ent_coef=0.05", "algo.greedy_eval=true", "eval_episodes=2",
                        f"out_dir={tmp_path}", "progress=false", "logger=csv"])
    front = run.summary["front"]
    assert front["true_hypervolume"] == 65.0
    for seed_front in front["per_seed"]:
        assert [6.0, -5.0] in seed_front
    assert np.all(np.array(run.summary["final"]["hypervolume"]["per_seed"]) >= 0.95 * 65.0)
    assert run.summary["return_convention"].startswith("episode utility under each policy's own weight")


def test_coplay_eval_scores_the_runs_front_against_its_reference_point(sweep):
    from coplay.experiment.playback import evaluate_run

    out = evaluate_run(sweep.run_dir, episodes=2, gif=False)
    points = np.array(out["front"]["per_seed"])
    assert points.shape == (2, WEIGHTS, 2) and out["front"]["reference_point"] == [0, -10]
    for s, seed_points in enumerate(points):
        assert out["front"]["hypervolume_per_seed"][s] == pytest.approx(
            coplay.eval.multi_objective.hypervolume(seed_points, [0, -10]))


def test_points_below_the_reference_point_add_nothing_and_are_counted():
    points = np.array([[[2.0, -2.0], [10.0, -12.0]], [[-1.0, -20.0], [-2.0, -30.0]]])    # [S=2, P=2, K=2]
    q = fronts.quality(points, np.array([0.0, -10.0]))
    np.testing.assert_allclose(q["hypervolume"], [[16.0], [0.0]])
    np.testing.assert_array_equal(q["below_reference"], [[1.0], [2.0]])


def test_a_front_of_three_objectives_is_drawn_pair_by_pair(tmp_path):
    from PIL import Image

    points = np.random.default_rng(0).uniform(0, 1, (2, 6, 3))
    path = fronts.plot_front(tmp_path / "front.png", points, ("a", "b", "c"), None, "three objectives")
    width, height = Image.open(path).size
    assert width == 3 * 500 and height == 450            # one 5 x 4.5 inch panel per pair: (a, b), (a, c), (b, c)


def test_weights_spread_over_the_simplex_and_a_count_no_grid_has_is_refused():
    np.testing.assert_allclose(spread_weights(2, 3), [[0, 1], [0.5, 0.5], [1, 0]])
    assert spread_weights(3, 10).shape == (10, 3)
    with pytest.raises(ConfigError, match="16 weights do not make an even grid over 3 objectives; grids of 3 "
                                          "objectives have 3, 6, 10, 15, 21"):
        spread_weights(3, 16)


def test_the_reference_point_is_the_runs_or_the_environments_and_a_missing_one_is_refused():
    env = coplay.make("treasure")
    np.testing.assert_array_equal(fronts.reference_point(env), [0, -10])
    np.testing.assert_array_equal(fronts.reference_point(env, (1, -20)), [1, -20])
    with pytest.raises(ConfigError, match=r"must be 2 finite numbers \(one per objective: treasure, time\), got "
                                          r"\[1.0\]"):
        fronts.reference_point(env, (1.0,))
    with pytest.raises(ConfigError, match=r"reference point \[5.0, -20.0\] of 'treasure' is not weakly worse than "
                                          r"every point of its true front: \[2.0, -2.0\] is below it in treasure.*"
                                          r"at or below \[2.0, -7.0\]"):
        fronts.reference_point(env, (5, -20))
    env.reference_point = None
    with pytest.raises(ConfigError, match=r"names no reference point.*give one, reference_point=\.\.\. \(2 "
                                          "numbers"):
        fronts.reference_point(env)
    assert list(plan(parse_overrides(["algo=mo_ppo", "env=treasure", "reference_point=0:-20"])).reference) == [0, -20]
    with pytest.raises(ConfigError, match="reference_point=0:-20 is read only by the trainers of several objectives"):
        plan(parse_overrides(["algo=ippo", "env=treasure", "scalarise=linear", "preference=1:0",
                              "reference_point=0:-20"]))


TREASURE_FRONT = np.array([[2.0, -2.0], [10.0, -3.0], [14.0, -5.0], [15.0, -7.0]])
FOUR = np.array([[0.0, 1.0], [1 / 3, 2 / 3], [2 / 3, 1 / 3], [1.0, 0.0]])


def test_corner_weights_and_the_optimistic_improvement_by_hand():
    from coplay.algos.common import ols

    # where consecutive points of the salvage front tie: 13t - 3 = 4t - 2, 19t - 5 = 13t - 3, 22t - 7 = 19t - 5
    np.testing.assert_allclose(ols.corner_weights(TREASURE_FRONT)[:, 0], [1 / 9, 1 / 3, 2 / 3])
    # the whole front found: nothing left to gain at any trained weight
    np.testing.assert_allclose(ols.improvement(FOUR, TREASURE_FRONT, FOUR), 0.0, atol=1e-9)
    # (14, -5) missing: the programme's best point at the corner 4/9 is exactly it, 31/9 against 25/9
    found = np.array([[2.0, -2.0], [10.0, -3.0], [10.0, -3.0], [15.0, -7.0]])
    corners = ols.corner_weights(found)
    np.testing.assert_allclose(corners[:, 0], [1 / 9, 4 / 9])
    np.testing.assert_allclose(ols.improvement(corners, found, FOUR), [2 / 3, 2 / 3])


def test_reselect_moves_a_policy_that_repeats_anothers_return_and_keeps_the_ends():
    from coplay.algos.common import ols

    weights, source = ols.reselect(np.array([[2.0, -2.0], [10.0, -3.0], [14.0, -5.0], [14.0, -5.0]]), FOUR)
    np.testing.assert_allclose(weights[[0, 1, 3]], FOUR[[0, 1, 3]])        # the ends and a distinct point stay
    assert weights[2, 0] == pytest.approx(1 / 9) and source.tolist() == [0, 1, 0, 3]   # from the best one there
    weights, source = ols.reselect(TREASURE_FRONT, FOUR)
    np.testing.assert_allclose(weights, FOUR)
    assert source.tolist() == [0, 1, 2, 3]
    # (5, -6) is best for no weight at all: its policy moves; (10, -3) is found by no one, so the corner
    # between (2, -2) and (14, -5) (4t - 2 = 19t - 5: t = 1/5) is where the front can gain most
    weights, source = ols.reselect(np.array([[2.0, -2.0], [5.0, -6.0], [14.0, -5.0], [15.0, -7.0]]), FOUR)
    np.testing.assert_allclose(weights[[0, 2, 3]], FOUR[[0, 2, 3]])
    assert weights[1, 0] == pytest.approx(1 / 5) and source[1] in (0, 2)


def test_ols_moves_each_seeds_lanes_between_chunks_starting_from_the_lane_best_there():
    from coplay.experiment.compiled import init_state

    p = plan(parse_overrides(["algo=mo_ppo", "env=treasure", "algo.weights=4", "algo.select=ols", "seeds=2",
                              "algo.num_envs=2", "algo.rollout_len=4"]))
    state = init_state(p)
    front = np.stack([[[2.0, -2.0], [10.0, -3.0], [14.0, -5.0], [14.0, -5.0]], TREASURE_FRONT])   # [S, W, K]
    moved = p.trainer.after_evaluation(state, front)
    np.testing.assert_allclose(p.trainer.weights_of(moved)[0, 2], [1 / 9, 8 / 9])
    np.testing.assert_allclose(p.trainer.weights_of(moved)[1], FOUR, atol=1e-6)   # seed 1 has the whole front
    actor = lambda s: jax.tree.leaves(p.trainer.policy_params(s)["lanes"])[0]    # noqa: E731
    np.testing.assert_array_equal(actor(moved)[0, 2], actor(state)[0, 0])          # lane 2 starts from lane 0
    np.testing.assert_array_equal(actor(moved)[1], actor(state)[1])
    assert not np.array_equal(moved.lanes.key[0, 2], state.lanes.key[0, 0])       # with its own random stream
    with pytest.raises(ConfigError, match="algo.select=ols chooses weights for two objectives; 'foraging' has 3"):
        plan(parse_overrides(["algo=mo_ppo", "env=foraging", "env.n_food=3", "env.food_types=3", "algo.weights=6",
                              "algo.select=ols"]))
