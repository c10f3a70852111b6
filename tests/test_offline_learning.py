"""Offline trainers: the conservative penalties against hand-computed values, the
coordination test on matrix-game data, the run around them (resume, refusals),
and fine-tuning an offline result online (`init_from`)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos.common import conservative
from coplay.core.errors import ConfigError
from coplay.offline import epsilon_mixture, random_policy, record, save

lse = lambda *xs: math.log(sum(math.exp(x) for x in xs))  # noqa: E731


def _vdn(q, state):
    return jnp.sum(q, axis=-1)


def _product(q, state):   # a team value that is not a sum: shows which agent's action was varied
    return q[..., 0] * q[..., 1]


def _one(x):
    """A single state: [1, 1, ...] (T = B = 1)."""
    return jnp.asarray(x)[None, None]


# ----- the penalties, by hand ------------------------------------------------------------------------


def test_cql_penalty_is_the_log_sum_exp_over_legal_actions_less_the_data_action():
    q = jnp.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    mask = jnp.array([[True, True, True], [True, False, True]])
    out = conservative.cql_penalty(q, jnp.array([0, 2]), mask)
    np.testing.assert_allclose(out, [lse(1, 2, 3) - 1, lse(1, 3) - 3], rtol=1e-6)


def test_counterfactual_values_vary_one_agent_while_the_others_keep_the_data_action():
    q = _one([[1.0, 2.0], [3.0, 5.0]])               # agent 0's Q of actions 0, 1; agent 1's
    action, active = _one([1, 0]), _one([True, True])  # the data: agent 0 took 1 (Q 2), agent 1 took 0 (Q 3)
    cf = conservative.counterfactual_values(q, action, active, _vdn, None)[0, 0]
    np.testing.assert_allclose(cf, [[1 + 3, 2 + 3], [2 + 3, 2 + 5]])
    cf = conservative.counterfactual_values(q, action, active, _product, None)[0, 0]
    np.testing.assert_allclose(cf, [[1 * 3, 2 * 3], [2 * 3, 2 * 5]])
    # an inactive agent enters the team value as zero, whatever it is asked about
    cf = conservative.counterfactual_values(q, action, _one([True, False]), _vdn, None)[0, 0]
    np.testing.assert_allclose(cf, [[1, 2], [2, 2]])


def test_cfcql_penalty_weighs_each_agents_counterfactual_log_sum_exp():
    q = _one([[1.0, 2.0], [3.0, 5.0]])
    action, active, mask = _one([1, 0]), _one([True, True]), _one(np.ones((2, 2), bool))
    cf = conservative.counterfactual_values(q, action, active, _vdn, None)
    q_tot = jnp.array([[5.0]])
    uniform = conservative.counterfactual_weights(cf, mask, active, None, 0.0)
    np.testing.assert_allclose(uniform[0, 0], [0.5, 0.5])
    penalty = conservative.counterfactual_penalty(cf, mask, q_tot, uniform)
    assert float(penalty[0, 0]) == pytest.approx(0.5 * lse(4, 5) + 0.5 * lse(5, 7) - 5, rel=1e-6)
    # KL weights: mu_i = softmax of agent i's counterfactual values, beta_i the behaviour policy
    behaviour = _one([[0.0, 0.0], [2.0, 0.0]])
    weights = conservative.counterfactual_weights(cf, mask, active, behaviour, 2.0)[0, 0]

    def kl(values, logits):
        mu = np.exp(values) / np.exp(values).sum()
        beta = np.exp(logits) / np.exp(logits).sum()
        return float(np.sum(mu * np.log(mu / beta)))

    kls = np.array([kl([4, 5], [0, 0]), kl([5, 7], [2, 0])])
    np.testing.assert_allclose(weights, np.exp(2 * kls) / np.exp(2 * kls).sum(), rtol=1e-5)
    assert weights[1] > weights[0]    # agent 1's values stray further from its behaviour: held back more
    # an inactive agent gets no weight
    one = conservative.counterfactual_weights(cf, mask, _one([False, True]), behaviour, 2.0)[0, 0]
    np.testing.assert_allclose(one, [0.0, 1.0])


def test_joint_penalty_is_exact_over_few_joint_actions_and_estimated_over_many():
    q = _one([[1.0, 2.0], [3.0, 5.0]])
    action, active = _one([1, 0]), _one([True, True])
    mask = _one([[True, True], [True, False]])        # agent 1 may only take action 0
    key = jax.random.PRNGKey(0)
    exact = conservative.joint_penalty(key, q, action, mask, active, _product, None, jnp.array([[6.0]]), 4)
    assert float(exact[0, 0]) == pytest.approx(lse(1 * 3, 2 * 3) - 6, rel=1e-6)
    # a sum's joint log-sum-exp is the sum of each agent's: 3^6 = 729 joint actions, 400 drawn
    q = jax.random.normal(jax.random.PRNGKey(1), (1, 1, 6, 3)) * 0.5
    mask, act, live = jnp.ones((1, 1, 6, 3), bool), jnp.zeros((1, 1, 6), jnp.int32), jnp.ones((1, 1, 6), bool)
    truth = float(jnp.sum(jax.nn.logsumexp(q, axis=-1)))
    estimates = [float(conservative.joint_penalty(k, q, act, mask, live, _vdn, None, jnp.zeros((1, 1)), 400)[0, 0])
                 for k in jax.random.split(key, 8)]
    assert abs(np.mean(estimates) - truth) < 0.05 and np.std(estimates) > 0    # sampled, and close
    enumerated = conservative.joint_penalty(key, q, act, mask, live, _vdn, None, jnp.zeros((1, 1)), 729)
    assert float(enumerated[0, 0]) == pytest.approx(truth, rel=1e-5)


# ----- coordination from matrix-game data ----------------------------------------------------------------

OPTIMUM = {"climbing": ([0, 0], 11.0), "penalty": ([0, 2], 10.0)}


@pytest.fixture(scope="module")
def matrix_data(tmp_path_factory):
    """Per game: 1,000 one-shot plays of the optimal joint action, each agent's action
    replaced by a uniform one with probability 0.6. Each agent's average payoff per
    action, over the other's actions in the data, then favours a safe action (climbing:
    action 2, worth 5 together; penalty: action 1, worth 2), so independent learners
    miscoordinate although the data's most common joint action is the optimum."""
    root = tmp_path_factory.mktemp("matrix")
    out = {}
    for game, (joint, _) in OPTIMUM.items():
        env = coplay.make("matrix", game=game, rounds=1)
        act = lambda key, obs, mask, j=jnp.array(joint): jnp.broadcast_to(j, obs.shape[:2])  # noqa: E731
        data = record(env, epsilon_mixture(act, env, 0.6), 1000, jax.random.PRNGKey(0), "medium")
        out[game] = str(save(data, root / f"{game}.vlt" / "medium"))
    return out


def _offline(game, algo, dataset, tmp_path, *extra):
    return coplay.train([f"algo={algo}", "env=matrix", f"env.game={game}", "env.rounds=1", f"algo.dataset={dataset}",
                         "seeds=5", "total_steps=400", "chunk_steps=400", "algo.batch_size=64", "eval_episodes=2",
                         f"out_dir={tmp_path}", "progress=false", *extra])


@pytest.mark.slow
@pytest.mark.parametrize("game", sorted(OPTIMUM))
def test_team_value_methods_recover_the_optimum_from_data_where_independent_learners_miscoordinate(
        game, matrix_data, tmp_path):
    best = OPTIMUM[game][1]
    independent = _offline(game, "iql_cql", matrix_data[game], tmp_path, "algo.cql_alpha=0")
    assert max(independent.final_return["per_seed"]) < best           # no seed finds the optimum
    for algo in ("qmix_cql", "cfcql", "maicq"):
        run = _offline(game, algo, matrix_data[game], tmp_path)
        assert run.final_return["per_seed"] == [best] * 5, (algo, run.final_return["per_seed"])   # every seed


def test_an_offline_run_resumes_exactly(matrix_data, tmp_path):
    args = ["algo=cfcql", "env=matrix", "env.game=climbing", "env.rounds=1", f"algo.dataset={matrix_data['climbing']}",
            "seeds=2", "total_steps=60", "chunk_steps=20", "algo.grad_steps=10", "algo.batch_size=16",
            "algo.lambda_temp=1", "eval_episodes=2", f"out_dir={tmp_path}", "progress=false"]
    full = coplay.train(args + ["name=full"])
    part = coplay.train(args + ["name=part"], stop_after_chunks=1)
    assert part.interrupted
    resumed = coplay.train(args + ["name=part", f"resume={part.run_dir}"])
    assert "behaviour" in full.state.params     # the behaviour model the KL weights read, trained beside
    assert int(np.asarray(full.state.grad_steps)[0]) == 60
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(resumed.state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert full.summary["final"] == resumed.summary["final"]


def test_bc_sampling_from_its_policy_plays_like_the_data_and_greedy_play_like_its_mode(matrix_data, tmp_path):
    from coplay.offline import dataset_stats, load

    data_mean = dataset_stats(load(matrix_data["climbing"]))["return_mean"]     # about -3: a noisy optimum
    args = ("seeds=2", "total_steps=200", "chunk_steps=200", "eval_episodes=500")
    sampled = _offline("climbing", "bc", matrix_data["climbing"], tmp_path, "algo.acting=sample", *args)
    assert abs(np.mean(sampled.final_return["per_seed"]) - data_mean) < 2.5, (sampled.final_return, data_mean)
    greedy = _offline("climbing", "bc", matrix_data["climbing"], tmp_path, *args)
    assert greedy.final_return["per_seed"] == [11.0, 11.0]


def test_a_q_learner_sampling_draws_from_the_softmax_of_its_q_values_over_legal_actions(matrix_data):
    from coplay.algos import iql_cql

    env = coplay.make("matrix", game="climbing", rounds=1)
    trainer = iql_cql.IQLCQL(iql_cql.Config(dataset=matrix_data["climbing"], acting="sample"), env, num_updates=1)
    params = trainer.policy_params(trainer.init(jax.random.PRNGKey(0)))
    params = jax.tree.map(lambda x: 3 * x, params)               # Q-values spread enough to tell softmax from uniform
    _, ts = trainer.policy().env.reset(jax.random.PRNGKey(1))   # the observations the network sees
    obs, carry = ts.obs[None], trainer.initial_carry((1,))
    mask = jnp.array([[[True, False, True], [True, True, True]]])  # agent 0 may not take action 1
    _, q = trainer.q_values(params, carry, obs, jnp.ones((1,), bool))
    want = np.asarray(jax.nn.softmax(jnp.where(mask, q, -jnp.inf), axis=-1))[0]
    act = jax.jit(jax.vmap(lambda k: trainer.policy().act(params, obs, mask, k, carry, jnp.ones((1,), bool))[0][0]))
    actions = np.asarray(act(jax.random.split(jax.random.PRNGKey(2), 20_000)))        # [draws, N]
    got = np.stack([np.bincount(actions[:, i], minlength=3) / len(actions) for i in range(2)])
    assert got[0, 1] == 0 and want.max() - want.min() > 0.2, want
    np.testing.assert_allclose(got, want, atol=0.015)


def test_a_q_learner_scales_the_datasets_rewards_by_reward_scale_or_by_its_returns_range(matrix_data, tmp_path):
    from coplay.algos import iql_cql
    from coplay.offline import dataset_stats, load

    env = coplay.make("matrix", game="climbing", rounds=1)
    path = matrix_data["climbing"]
    returns = np.asarray(dataset_stats(load(path))["returns"])
    recorded = np.asarray(load(path).experience["rewards"][0])
    for fields, factor in (({}, 1.0), ({"reward_scale": 3.0}, 3.0),
                           ({"reward_scale": 3.0, "reward_norm": "returns"}, 3.0 / (returns.max() - returns.min()))):
        trainer = iql_cql.IQLCQL(iql_cql.Config(dataset=path, **fields), env, num_updates=1)
        np.testing.assert_allclose(np.asarray(trainer.source.windows.arrays["reward"]), recorded * factor, rtol=1e-6)
    assert returns.max() - returns.min() > 10       # climbing's payoffs: the range really divides
    # a dataset whose episodes all return the same has no range to divide by
    data = load(path)
    data.experience["rewards"] = np.zeros_like(data.experience["rewards"])
    flat = save(data, tmp_path / "flat.vlt" / "medium")
    with pytest.raises(ConfigError, match="algo.reward_norm=returns: every episode of the dataset .* returns the same"):
        iql_cql.IQLCQL(iql_cql.Config(dataset=str(flat), reward_norm="returns"), env, num_updates=1)


def test_backup_acting_values_a_next_state_by_the_policy_the_agents_play(matrix_data):
    from coplay.algos import iql_cql
    from coplay.algos.common import q_learning as ql

    env = coplay.make("matrix", game="climbing", rounds=1)
    q_online, q_target = jnp.array([[0.0, 2.0, 1.0]]), jnp.array([[3.0, 1.0, 7.0]])
    mask = jnp.array([[True, True, False]])
    value = lambda **f: float(iql_cql.IQLCQL(iql_cql.Config(dataset=matrix_data["climbing"], **f), env, 1)  # noqa: E731
                              .bootstrap(q_online, q_target, mask)[0])
    greedy = float(ql.bootstrap_value(q_online, q_target, mask, double=True)[0])     # action 1's target value: 1
    assert value() == value(backup="acting") == value(acting="sample") == greedy == 1.0
    assert value(acting="sample", backup="acting") == pytest.approx(float(jax.nn.sigmoid(-2.0)) * 3 + float(
        jax.nn.sigmoid(2.0)) * 1)


# ----- refusals ---------------------------------------------------------------------------------------------


def test_an_offline_run_refuses_a_missing_dataset_or_one_of_another_environment(matrix_data, tmp_path):
    with pytest.raises(ConfigError, match="algo.dataset is not set"):
        coplay.train(["algo=bc", "env=matrix", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="no dataset at"):
        coplay.train(["algo=bc", "env=matrix", f"algo.dataset={tmp_path}/none.vlt/good", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="made for another environment"):
        coplay.train(["algo=iql_cql", "env=spread", f"algo.dataset={matrix_data['climbing']}", f"out_dir={tmp_path}"])
    # a vault without coplay's description (as OG-MARL writes them) is checked by its shapes
    env = coplay.make("matrix", rounds=1)
    data = record(env, random_policy(env), 3, jax.random.PRNGKey(0), "poor")
    data.meta = {}
    path = save(data, tmp_path / "og.vlt" / "poor")
    with pytest.raises(ConfigError, match="does not fit environment 'spread'"):
        coplay.train(["algo=qmix_cql", "env=spread", f"algo.dataset={path}", f"out_dir={tmp_path}"])
    assert not list(tmp_path.glob("*-qmix_cql-*"))      # refused before a run directory was made
    with pytest.raises(ConfigError, match="algo.eval_epsilon=0.1 is for algo.acting=greedy"):
        coplay.train(["algo=iql_cql", "env=matrix", f"algo.dataset={matrix_data['climbing']}", "algo.acting=sample",
                      "algo.eval_epsilon=0.1", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="algo.backup='acting': maicq bootstraps on the data's next action"):
        coplay.train(["algo=maicq", "env=matrix", f"algo.dataset={matrix_data['climbing']}", "algo.backup=acting",
                      f"out_dir={tmp_path}"])


# ----- offline to online: init_from ------------------------------------------------------------------------

# online QMIX's matrix-game budget, as in test_q_results: from scratch it ends in the safe block (5, 6 or 7)
ONLINE_QMIX = ["algo=qmix", "env=matrix", "env.game=climbing", "env.rounds=1", "total_steps=8000",
               "chunk_steps=8000", "algo.learning_starts=1000", "algo.buffer_size=4000", "algo.eps_decay=0.5",
               "algo.num_envs=8", "algo.rollout_len=4", "eval_episodes=16", "progress=false"]


@pytest.mark.slow
def test_an_offline_result_fine_tuned_by_online_qmix_keeps_the_optimum(matrix_data, tmp_path):
    offline = _offline("climbing", "cfcql", matrix_data["climbing"], tmp_path, "seeds=1", "name=offline")
    assert offline.final_return["per_seed"] == [11.0]
    tuned = coplay.train(ONLINE_QMIX + ["seeds=4", f"init_from={offline.run_dir}", f"out_dir={tmp_path}"])
    assert tuned.final_return["per_seed"] == [11.0] * 4      # the one seed's networks, copied to all four, kept


def test_init_from_copies_the_named_groups_into_every_seed_and_refuses_what_does_not_fit(matrix_data, tmp_path):
    from coplay.experiment import warm_start
    from coplay.experiment.compiled import init_state, plan
    from coplay.experiment.runner import resolve

    bc = _offline("climbing", "bc", matrix_data["climbing"], tmp_path, "seeds=2", "total_steps=20",
                  "chunk_steps=20", "algo.grad_steps=10", "name=bc")
    base = ["algo=mappo", "env=matrix", "env.game=climbing", "env.rounds=1", f"out_dir={tmp_path}"]
    exp = resolve(base + ["seeds=2", f"init_from={bc.run_dir}", "init_params=agent:actor"])
    fresh = init_state(plan(exp))
    state = warm_start.apply(exp, fresh)             # behaviour cloning's network is MAPPO's actor
    for a, b in zip(jax.tree.leaves(state.params["actor"]), jax.tree.leaves(bc.state.params["agent"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(jax.tree.leaves(state.params["critic"]), jax.tree.leaves(fresh.params["critic"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(*[np.asarray(jax.tree.leaves(bc.state.params["agent"])[0][i]) for i in (0, 1)])

    refused = {
        "share no name": ["seeds=2", f"init_from={bc.run_dir}"],                        # agent vs actor, critic
        "no parameter group 'policy'": ["seeds=2", f"init_from={bc.run_dir}", "init_params=policy:actor"],
        "this run has no parameter group 'agent'": ["seeds=2", f"init_from={bc.run_dir}", "init_params=agent"],
        "that run has 2 seeds and this one 3": ["seeds=3", f"init_from={bc.run_dir}", "init_params=agent:actor"],
        "the networks differ": ["seeds=2", "algo.hidden_size=32", f"init_from={bc.run_dir}",
                                "init_params=agent:actor"],
        "has 6 arrays and this run's 'actor' 4": ["seeds=2", "algo.num_layers=1", f"init_from={bc.run_dir}",
                                                  "init_params=agent:actor"],                # a part of it fits
        "trained on env=matrix": ["env.game=penalty", "seeds=2", f"init_from={bc.run_dir}", "init_params=agent:actor"],
        "not a coplay run directory": [f"init_from={tmp_path}/nothing"],
        "read only with init_from": ["init_params=agent:actor"],
    }
    for words, extra in refused.items():
        with pytest.raises(ConfigError, match=words):
            coplay.train(base + extra + ["name=refused"])
        assert not (tmp_path / "refused").exists()            # refused before the run directory was made


# ----- coplay record: the qualities from a run ---------------------------------------------------------------


@pytest.mark.slow
def test_record_writes_each_quality_from_a_runs_checkpoints_and_bc_clones_the_good_one(tmp_path, capsys):
    from coplay.cli.main import main
    from coplay.offline import load

    run = coplay.train(["algo=iql", "env=matrix", "env.game=climbing", "env.rounds=1", "total_steps=640",
                        "chunk_steps=128", "algo.num_envs=8", "algo.rollout_len=4", "algo.learning_starts=64",
                        "algo.batch_size=8", "algo.buffer_size=256", "eval_episodes=4", "keep_checkpoints=5",
                        "progress=false", f"out_dir={tmp_path}"])
    out = tmp_path / "climbing.vlt"
    assert main(["record", str(run.run_dir), "--quality", "replay", "--episodes", "10", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "written:" in printed and printed.count("from ckpt_") == 5
    assert (tmp_path / "climbing.replay.png").stat().st_size > 0      # the statistics, drawn beside the dataset
    replay = load(out / "replay", env=coplay.make("matrix", game="climbing", rounds=1))
    used = replay.meta["checkpoints"]
    assert [c["env_steps"] for c in used] == [128, 256, 384, 512, 640] and replay.steps == 10   # 2 episodes each
    scores = [c["score"] for c in used]
    from coplay.experiment.record import record_dataset
    good = record_dataset(str(run.run_dir), "good", 200, out)
    assert good["checkpoints"][0]["score"] == max(scores)
    medium = record_dataset(str(run.run_dir), "medium", 20, out)
    middle = (medium["random_score"] + max(scores)) / 2
    assert abs(medium["checkpoints"][0]["score"] - middle) == min(abs(s - middle) for s in scores)
    mixed = record_dataset(str(run.run_dir), "mixed", 20, out)
    assert [c["checkpoint"] for c in mixed["checkpoints"]] == [medium["checkpoints"][0]["checkpoint"],
                                                              good["checkpoints"][0]["checkpoint"]]
    with pytest.raises(ConfigError, match="already exists"):
        record_dataset(str(run.run_dir), "good", 5, out)
    with pytest.raises(ConfigError, match="quality='expert' is not one of poor, medium, good, replay, mixed"):
        record_dataset(str(run.run_dir), "expert", 5, out)
    with pytest.raises(ConfigError, match="random play records quality 'poor'"):
        record_dataset("random", "good", 5, tmp_path / "other.vlt", env_overrides=["env=matrix"])
    # behaviour cloning on the good data plays as the data's policy did (a deterministic greedy policy)
    bc = coplay.train(["algo=bc", "env=matrix", "env.game=climbing", "env.rounds=1", f"algo.dataset={good['path']}",
                       "seeds=2", "total_steps=200", "eval_episodes=2", "progress=false", f"out_dir={tmp_path}"])
    assert bc.final_return["per_seed"] == pytest.approx([good["stats"]["return_mean"]] * 2)
