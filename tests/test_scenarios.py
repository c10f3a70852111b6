"""Scripted players of the social substrates, and the scenario evaluator (Melting Pot
2.0's protocol): what the bots do, which seats the focal and background populations
fill, the normalisation between reference populations, and `coplay scenario`."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos.common.bots import make_bot
from coplay.algos.common.matches import make_match
from coplay.algos.common.social_bots import bots_for, distance
from coplay.cli.main import main
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy, no_carry
from coplay.eval.scenarios import Member, evaluate_scenarios, focal_count, make_play, scenarios, substrate_roster


def returns(env, bots, episodes=4, seed=0):
    play = jax.jit(make_match(env, [make_bot(b, env) for b in bots], episodes))
    return np.asarray(play([None] * len(bots), jax.random.PRNGKey(seed))["return"])     # [episodes, N]


def test_the_distance_field_walks_around_walls():
    walls = jnp.asarray(np.array([[0, 0, 0, 0],
                                  [1, 1, 1, 0],
                                  [0, 0, 0, 0]], bool))
    targets = jnp.zeros((3, 4), bool).at[2, 0].set(True)
    d = np.asarray(distance(walls, targets))
    assert d[2].tolist() == [0, 1, 2, 3]
    assert d[0].tolist() == [8, 7, 6, 5]             # round the wall by the open column
    assert d[1, 0] == 12                             # a wall: unreachable (H * W)


def test_every_substrate_names_its_bots_and_other_games_have_none():
    assert bots_for(coplay.make("commons_harvest")) == ("harvester", "sustainable_harvester", "zapper")
    assert bots_for(coplay.make("population_dilemma")) == ("cooperator", "defector", "punisher")
    assert bots_for(coplay.make("matrix")) == ()
    with pytest.raises(ConfigError, match="plays coins"):
        make_bot("cooperator", coplay.make("matrix"))


def test_cooperators_in_coins_earn_more_together_than_defectors():
    env = coplay.make("coins", max_steps=150)
    # a coin of one's own colour pays 1, one taken by the other costs 2 (cooperators take
    # another's only by a random move, 5% of them)
    coop = returns(env, ["cooperator", "cooperator"], episodes=8).sum(1)
    greedy = returns(env, ["defector", "defector"], episodes=8).sum(1)
    assert coop.mean() > 2 * max(greedy.mean(), 1.0) and coop.min() > 0


def test_the_tragedy_of_the_commons_greedy_harvesters_eat_the_commons_bare():
    env = coplay.make("commons_harvest", max_steps=500)
    greedy = returns(env, ["harvester"] * 7).sum(1)
    sustainable = returns(env, ["sustainable_harvester"] * 7).sum(1)
    assert sustainable.min() > greedy.max()


def test_clean_up_pays_only_once_somebody_cleans_and_the_cleaners_get_nothing():
    env = coplay.make("clean_up", max_steps=300)
    nobody = returns(env, ["harvester"] * 7, episodes=2)
    assert np.all(nobody == 0)                       # the river starts too dirty for apples
    two = returns(env, ["cleaner"] * 2 + ["harvester"] * 5, episodes=2)
    assert np.all(two[:, :2] == 0) and np.all(two[:, 2:].sum(1) > 0)


def test_punishers_fine_a_defector_in_the_population_dilemma():
    env = coplay.make("population_dilemma", rounds=5)
    among_cooperators = returns(env, ["defector"] + ["cooperator"] * 5)
    among_punishers = returns(env, ["defector"] + ["punisher"] * 5)
    # each punisher that sees the defection fines it 3 (and pays 1): the defector earns less
    assert among_punishers[:, 0].mean() < among_cooperators[:, 0].mean()
    assert among_punishers[:, 1:].mean() < among_cooperators[:, 1:].mean()


def test_focal_counts_of_the_three_kinds():
    assert [focal_count(k, 7) for k in ("resident", "visitor", "half")] == [5, 2, 3]
    assert [focal_count(k, 2) for k in ("resident", "visitor", "half")] == [1, 1, 1]
    with pytest.raises(ConfigError, match="unknown scenario kind 'tourist'; valid: resident, visitor, half"):
        focal_count("tourist", 7)
    # kinds with one count are written once
    assert [s.name for s in scenarios(2, {"b": ("b",)})] == ["resident/b"]
    assert [sum(s.focal) for s in scenarios(7, {"b": ("b",)})] == [5, 2, 3]


def constant(env, action):
    return Policy(act=lambda p, obs, mask, key, carry, reset: (jnp.full(mask.shape[:-1], action, jnp.int32), carry),
                  initial_carry=no_carry, env=env)


def test_background_seats_draw_only_their_populations_members_once_per_episode():
    # the prisoner's dilemma for 5 rounds: (C, C) pays 3 each round, (C, D) 0 to the cooperator
    env = coplay.make("matrix", game="prisoners_dilemma", rounds=5)
    roster = [Member("c", constant(env, 0)), Member("d", constant(env, 1))]
    play = jax.jit(make_play(env, roster, None, 64))
    seats = jnp.array([True, False])
    only_d = np.asarray(play(None, jnp.int32(0), seats, jnp.array([False, True]), jax.random.PRNGKey(0)))
    assert np.all(only_d[:, 0] == 0) and np.all(only_d[:, 1] == 25)
    both = np.asarray(play(None, jnp.int32(0), seats, jnp.array([True, True]), jax.random.PRNGKey(0)))
    # one member for the whole episode: all cooperation (15) or all defection (0), both drawn
    assert set(both[:, 0].tolist()) == {0.0, 15.0}


def test_scores_are_normalised_between_the_lowest_and_highest_reference_population():
    env = coplay.make("coins", max_steps=60)
    roster = substrate_roster(env)
    listed = scenarios(2, {"defector": ("defector",), "mixed": ("cooperator", "defector")})
    cooperator, random = roster[0], roster[-1]
    greedy_random = Policy(act=random.policy.act, initial_carry=no_carry, env=env)   # not the roster's own
    focal = [("cooperator", cooperator.policy, None), ("other random", greedy_random, None)]
    ev = evaluate_scenarios(env, roster, focal, listed, ["cooperator", "defector", "random"], episodes=8, reps=200)
    assert len(ev.rows) == 4
    for row in ev.rows:
        ref = ev.references[row.scenario.name]
        assert (row.low, row.high) == (min(ref.values()), max(ref.values())) and row.low < row.high
        assert row.low_name == min(ref, key=ref.get) and row.high_name == max(ref, key=ref.get)
        # the interquartile mean and its bootstrap interval (same resamples) follow an affine map exactly
        spread = row.high - row.low
        for mine, theirs in ((row.normalised.value, row.score.value), (row.normalised.low, row.score.low),
                             (row.normalised.high, row.score.high)):
            assert mine == pytest.approx((theirs - row.low) / spread, rel=1e-6)
    # a reference population as the focal one scores its reference games
    first = ev.rows[0]
    assert first.focal == "cooperator" and \
        first.score.value == pytest.approx(float(np.mean(np.sort(ev_scores(ev, env, roster, listed[0]))[2:6])))
    assert set(ev.summary()) == {"cooperator", "other random"}
    with pytest.raises(ConfigError, match="references \\['cooperator'\\] must be two or more roster members"):
        evaluate_scenarios(env, roster, focal, listed, ["cooperator"], episodes=8)


def ev_scores(ev, env, roster, scenario):
    """The cooperator's per-capita returns in `scenario`, replayed as the evaluator's first scenario."""
    play = jax.jit(make_play(env, roster, None, 8))
    allowed = jnp.asarray([m.name in scenario.background for m in roster])
    ret = np.asarray(play(None, jnp.int32(0), jnp.asarray(scenario.focal), allowed,
                          jax.random.fold_in(jax.random.PRNGKey(0), 0)))
    return ret[:, np.asarray(scenario.focal)].mean(1)


def test_the_scenario_command_scores_a_trained_run_and_writes_its_table(tmp_path):
    run = coplay.train(["algo=ippo", "env=coins", "env.max_steps=30", "algo.torso=mlp", "algo.hidden_size=16",
                  "algo.num_envs=4", "algo.rollout_len=8", "total_steps=64", "seeds=2", "eval_episodes=2",
                  "progress=false", f"out_dir={tmp_path}"]).run_dir
    out = tmp_path / "scen"
    assert main(["scenario", str(run), "defector", "--background", f"cooperator,{run}@1", "--episodes", "4",
                 "--out", str(out), "--bootstrap", "100"]) == 0
    record = json.loads((out / "scenarios.json").read_text())
    assert record["env"] == "coins" and record["env_config"]["max_steps"] == 30
    assert record["backgrounds"] == {"cooperator": ["cooperator"], f"{run.name}@1": [f"{run.name}@1"]}
    assert {r["focal"] for r in record["rows"]} == {f"{run.name} (2 seeds)", "defector"}
    assert all(r["score"]["n"] == (4 if r["focal"] == "defector" else 8) for r in record["rows"])
    assert (out / "scenarios.md").read_text().count("| resident/") == 4 and (out / "scenarios.png").stat().st_size
    # the run's policies read their observations through the agent ids IPPO adds, in a tournament too
    assert main(["tournament", f"{run}@0", "cooperator", "--games", "2", "--out", str(tmp_path / "t")]) == 0
    assert json.loads((tmp_path / "t" / "tournament.json").read_text())["players"] == [f"{run.name}@0", "cooperator"]


@pytest.mark.parametrize("args, message", [
    (["cooperator", "env=matrix"], "'matrix' has no scripted players"),
    (["cooperator", "env=coins", "--kinds", "tourist"], "--kinds 'tourist': valid kinds are resident, visitor, half"),
    (["cooperator", "env=coins", "--background", "saint"], "background 'saint' is neither a scripted player"),
    (["saint", "env=coins"], "focal population 'saint' is neither a scripted player of 'coins' "
                             "(cooperator, defector, random)"),
    (["cooperator"], "name the substrate with env=<name>"),
])
def test_the_scenario_command_refuses_bad_input_by_name(tmp_path, capsys, args, message):
    assert main(["scenario", *args, "--out", str(tmp_path / "x")]) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_schelling_diagram_of_scripted_players_with_the_societys_metrics_at_every_mix():
    from coplay.eval.schelling import schelling_diagram

    env = coplay.make("population_dilemma", rounds=5)      # every mechanism on
    s = schelling_diagram(env, make_bot("punisher", env), None, make_bot("defector", env), None, episodes=8)
    # punishment and partner selection remove the dilemma: among two or more punishers, punishing pays
    assert np.all(s.cooperator[2:] > s.defector[2:]) and not s.is_dilemma
    assert s.collective.shape == (7,) and s.collective[-1] == pytest.approx(6 * 5 * 3 * 2)   # all cooperate
    assert set(s.metrics) == {"social/efficiency", "social/equality", "social/sustainability", "social/peace"}
    assert np.all((s.metrics["social/equality"] > 0) & (s.metrics["social/equality"] <= 1))
