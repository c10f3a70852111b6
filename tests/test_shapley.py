"""Shapley values of agents (`coplay.eval.shapley`) and `coplay explain`: the axioms on
games with known values, the permutation estimate against the exact one at the rate its
interval claims, and a trained spread team with one agent made lazy."""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos.common.matches import random_policy
from coplay.cli.main import main as cli
from coplay.core.errors import ConfigError
from coplay.eval import shapley as sh

KEY = jax.random.PRNGKey(0)


def _table_game(table: np.ndarray):
    """A ValueFn over p players from a table of 2^p coalition values (indexed by the
    coalition's bits), the same in each of its 4 episodes."""
    t = jnp.asarray(table, jnp.float32)

    def value(coalitions, key):
        index = jnp.sum(coalitions.astype(jnp.int32) << jnp.arange(coalitions.shape[-1]), axis=-1)
        return jnp.broadcast_to(t[index][..., None], (*index.shape, 4))
    return value


def _values_of(fn, p: int) -> np.ndarray:
    """The table of v(S) for every coalition of p players."""
    return np.array([fn(set(np.flatnonzero(c))) for c in sh.all_coalitions(p)], np.float64)


def test_known_games_and_the_axioms_exactly():
    # additive: each player's value is its own weight
    w = np.array([3.0, -1.0, 0.5, 2.0])
    out = sh.shapley_from(_table_game(_values_of(lambda s: sum(w[i] for i in s), 4)), list("abcd"), key=KEY)
    np.testing.assert_allclose(out.values, w, atol=1e-5)
    # unanimity of {0, 2}: they share the unit, the others (dummies) get exactly 0
    out = sh.shapley_from(_table_game(_values_of(lambda s: float({0, 2} <= s), 4)), list("abcd"), key=KEY)
    np.testing.assert_allclose(out.values, [0.5, 0.0, 0.5, 0.0], atol=1e-7)
    # glove game: 0 holds a left glove, 1 and 2 right ones; a pair is worth 1: (2/3, 1/6, 1/6)
    out = sh.shapley_from(_table_game(_values_of(lambda s: float(0 in s and bool(s & {1, 2})), 3)), list("abc"),
                          key=KEY)
    np.testing.assert_allclose(out.values, [2 / 3, 1 / 6, 1 / 6], atol=1e-6)
    # A noisy game: v depends only on how many of players 0..3 are in S, each count with its own
    # noise per episode; player 4 is a dummy. Efficiency holds per episode, the dummy gets 0 and
    # the four symmetric players equal values.
    mean = jnp.asarray(np.random.default_rng(0).normal(size=5) * 10)

    def noisy(coalitions, key):
        count = jnp.sum(coalitions[..., :4], axis=-1)
        return mean[count][..., None] + jax.random.normal(key, (5, 64))[count]

    out = sh.shapley_from(noisy, list("abcde"), key=KEY)
    _, v = sh.exact(noisy, 5, KEY)
    np.testing.assert_allclose(out.samples.sum(1), v[-1] - v[0], atol=1e-5)
    assert abs(out.values.sum() - (out.grand - out.empty)) < 1e-6
    assert abs(out.values[4]) < 1e-6 and np.ptp(out.values[:4]) < 1e-5
    assert math.isclose(sh.exact_weights(5)[0].sum(), 0.0, abs_tol=1e-12)   # v(all) - v(none) per player sums


def test_permutation_estimate_converges_to_the_exact_value_at_the_rate_of_its_interval():
    rng = np.random.default_rng(1)
    table = rng.normal(size=2**6) * 5                   # a game with no structure, six players
    game = _table_game(table)
    truth = sh.shapley_from(game, list("abcdef"), key=KEY).values
    small, large = [sh.shapley_from(game, list("abcdef"), method="permutations", permutations=m,
                                    key=jax.random.PRNGKey(m)) for m in (64, 1024)]
    se = [(r.high - r.low) / (2 * sh.Z95) for r in (small, large)]
    np.testing.assert_allclose(se[0] / se[1], 4.0, rtol=0.25)   # sixteen times the permutations, a quarter the SE
    assert np.all(np.abs(large.values - truth) < 3 * se[1])
    # the 95% intervals of 200 independent estimates of 32 permutations cover the exact values about 95% of the time
    covered = [(r.low <= truth) & (truth <= r.high) for r in
               (sh.shapley_from(game, list("abcdef"), method="permutations", permutations=32,
                                key=jax.random.PRNGKey(100 + i)) for i in range(200))]
    assert 0.90 <= np.mean(covered) <= 0.99, np.mean(covered)


def test_bad_requests_are_refused_before_playing():
    env = coplay.make("spread")
    with pytest.raises(ConfigError, match="replacement='nothing': valid replacements are noop, random, teammate"):
        sh.coalition_value(env, random_policy(env), None, replacement="nothing")
    with pytest.raises(ConfigError, match="episodes=0 must be an integer >= 1"):
        sh.coalition_value(env, random_policy(env), None, episodes=0)
    with pytest.raises(ConfigError, match="method='approximate': valid methods are auto, exact, permutations"):
        sh.shapley(env, random_policy(env), None, method="approximate")
    with pytest.raises(ConfigError, match="permutations=1 must be an integer >= 2"):
        sh.shapley(env, random_policy(env), None, method="permutations", permutations=1)
    with pytest.raises(ConfigError, match="'spread' has one team"):
        sh.shapley(env, random_policy(env), None, teams=True)
    with pytest.raises(ConfigError, match="policy 'team' was built for environment 'foraging'"):
        sh.shapley(env, random_policy(coplay.make("foraging")), None)


@pytest.mark.slow
def test_a_lazy_agent_in_a_trained_spread_team_and_coplay_explain(tmp_path, capsys):
    from coplay.experiment.playback import load_run

    result = coplay.train(["algo=ippo", "env=spread", "total_steps=99200", "seeds=1", "progress=false",
                           "logger=csv", "eval_episodes=8", f"out_dir={tmp_path}", "name=spread"])
    run = load_run(result.run_dir)
    env = coplay.make("spread")
    policy, params = run.policy, jax.tree.map(lambda x: x[0], run.params)

    def lazy_act(p, obs, mask, key, carry, reset):          # agent 2 never moves: action 0, the no-op
        action, carry = policy.act(p, obs, mask, key, carry, reset)
        return action.at[:, 2].set(0), carry

    lazy = dataclasses.replace(policy, act=lazy_act)
    still = sh.shapley(env, lazy, params, replacement="noop", episodes=128)
    # Against a stand-in that stands still, the lazy agent adds nothing in any coalition: exactly zero,
    # while both trained agents add to the team's return beyond their intervals.
    assert abs(still.values[2]) < 1e-6 and np.all(still.low[:2] > 0), still.table()
    assert abs(still.values.sum() - (still.grand - still.empty)) < 1e-5
    # Against random stand-ins it is credited for standing still instead of wandering, far less
    # than either trained agent: the stand-in decides what a value means.
    moving = sh.shapley(env, lazy, params, replacement="random", episodes=128)
    assert moving.values[2] < 0.5 * moving.values[:2].min(), moving.table()

    out = tmp_path / "explain"
    assert cli(["explain", f"{result.run_dir}@0", "--replace", "teammate", "--episodes", "16",
                "--out", str(out)]) == 0
    record = json.loads((out / "shapley.json").read_text())
    assert record["method"] == "exact" and record["replace"] == "teammate" and len(record["values"]) == 3
    assert abs(sum(record["values"]) - (record["grand"] - record["empty"])) < 1e-5
    assert (out / "shapley.png").stat().st_size > 0 and "| agent 2 |" in (out / "shapley.md").read_text()
    assert "Shapley values" in capsys.readouterr().out
    # bad input is refused before anything is written
    for args, message in [(["--replace", "everyone"], "--replace 'everyone': valid stand-ins are noop"),
                          (["--episodes", "1"], "--episodes 1 must be an integer >= 2"),
                          (["--method", "guess"], "--method 'guess': valid methods")]:
        target = tmp_path / f"refused{len(message)}"
        assert cli(["explain", str(result.run_dir), *args, "--out", str(target)]) == 2
        assert message in capsys.readouterr().err and not target.exists()
    assert cli(["explain", f"{result.run_dir}@3", "--out", str(tmp_path / "x")]) == 2
    assert "the run has seeds 0..0, not 3" in capsys.readouterr().err
