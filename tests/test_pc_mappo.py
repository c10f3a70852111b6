"""Preference-conditioned MAPPO (`algo=pc_mappo`): the weight each episode is played
for (`coplay.wrappers.Preference`), the vector critic's advantage, one policy
learning the whole true front of the salvage task, and what it refuses."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos import pc_mappo
from coplay.algos.common.advantages import gae
from coplay.core.compile import jit_once
from coplay.core.errors import ConfigError
from coplay.experiment.config import parse_overrides
from coplay.experiment.compiled import plan
from coplay.testing import check_env
from coplay.wrappers import AutoReset, Objectives, Preference


def _episodes(env, steps, seed=0):
    """`steps` steps of random legal play under auto-reset: the time steps, stacked."""
    env = AutoReset(env)

    def run(key):
        state, ts = env.reset(key)

        def body(c, k):
            state, ts = c
            k_act, k_env = jax.random.split(k)
            logits = jnp.where(ts.action_mask, 0.0, -jnp.inf)
            state, ts = env.step(state, jax.random.categorical(k_act, logits), k_env)
            return (state, ts), ts
        return jax.lax.scan(body, (state, ts), jax.random.split(key, steps))[1]
    return jax.tree.map(np.asarray, jit_once(run)(jax.random.PRNGKey(seed)))


def test_each_episode_is_shown_its_own_weight_and_paid_its_utility():
    base = Objectives(coplay.make("treasure"))
    env = Preference(base)
    k, n = 2, env.spec.num_agents
    assert env.spec.obs_space.shape == (base.spec.obs_space.shape[0] + k,)
    steps = _episodes(env, 60)
    w = Preference.weight(steps, k)                       # [T, K] the weight shown with each next action
    assert np.all(w >= 0) and np.allclose(w.sum(-1), 1.0, atol=1e-5)
    assert np.allclose(steps.obs[:, :, -k:], w[:, None, :])          # every agent sees it
    # the weight changes exactly where an episode ended (a fresh episode draws its own)
    changed = np.any(np.abs(np.diff(w, axis=0)) > 0, axis=-1)
    assert np.array_equal(changed, steps.done[1:]) and steps.done.sum() >= 3
    # each step's utility is w . r under the weight of the episode the step belonged to
    shown_before = np.concatenate([w[:1] * 0, w[:-1]])[1:]          # the weight step t was taken for
    assert np.allclose(steps.info["utility"][1:], np.einsum("tnk,tk->tn", steps.reward[1:], shown_before))
    assert steps.info["utility"].shape[1:] == (n,)


def test_a_fixed_weight_is_shown_every_episode_and_the_wrapped_game_keeps_the_contract():
    env = Preference(Objectives(coplay.make("treasure")), weights=[0.25, 0.75])
    steps = _episodes(env, 30)
    assert np.allclose(Preference.weight(steps, 2), [0.25, 0.75])
    check_env(Preference(Objectives(coplay.make("treasure"))))


@pytest.mark.parametrize("kwargs, words", [
    ({"weights": [0.2, 0.3, 0.5]}, ["2 numbers (one per objective: treasure, time)", "(3,)"]),
    ({"weights": [1.5, -0.5]}, ["non-negative with a positive sum", "[1.5, -0.5]"]),
    ({"concentration": 0.0}, ["concentration must be positive", "0.0"]),
])
def test_bad_preferences_are_refused_by_name(kwargs, words):
    with pytest.raises(ConfigError) as e:
        Preference(coplay.make("treasure"), **kwargs)
    for w in words:
        assert w in str(e.value)


def test_the_advantage_is_the_weights_utility_of_the_vector_advantage():
    """GAE is linear in rewards and values, and an episode keeps its weight, so
    w . GAE(r, V) = GAE(w . r, w . V): the vector critic's advantage is the advantage
    of the scalar utility."""
    trainer = pc_mappo.PCMAPPO(pc_mappo.Config(num_envs=3, rollout_len=6), coplay.make("treasure"), num_updates=1)
    t, e, n, k = 6, 3, 2, 2
    ks = jax.random.split(jax.random.PRNGKey(0), 5)
    reward, value = jax.random.normal(ks[0], (t, e, n, k)), jax.random.normal(ks[1], (t, e, n, k))
    last = jax.random.normal(ks[2], (e, n, k))
    done = np.array(jax.random.bernoulli(ks[3], 0.4, (t, e)))
    fresh = np.asarray(jax.random.dirichlet(ks[4], jnp.ones(k), (t, e)))
    w = fresh.copy()
    for i in range(1, t):      # a weight is drawn when an episode starts and kept until it ends
        w[i] = np.where(done[i - 1][:, None], fresh[i], w[i - 1])
    assert done[:-1].any() and not done[:-1].all()
    traj = types.SimpleNamespace(extras={"value": value}, done=jnp.asarray(done),
                                 ts=types.SimpleNamespace(global_state=jnp.concatenate([jnp.ones((t, e, 4)), w], -1)))
    adv, target = trainer.advantages(traj, reward, last)
    c = trainer.config
    expect, _ = gae(jnp.einsum("tenk,tek->ten", reward, w), jnp.einsum("tenk,tek->ten", value, w),
                    jnp.asarray(done)[..., None], jnp.einsum("enk,ek->en", last, w[-1]), c.gamma, c.gae_lambda)
    assert adv.shape == (t, e, n) and target.shape == (t, e, n, k)
    assert np.allclose(adv, expect, atol=1e-5)


@pytest.fixture(scope="module")
def conditioned(tmp_path_factory):
    """One policy, 2 seeds, 32,768 environment steps each (64 updates), played at 5 weights."""
    out = tmp_path_factory.mktemp("pc_mappo")
    return coplay.train(["algo=pc_mappo", "env=treasure", "algo.weights=5", "seeds=2", "total_steps=32768",
                         "algo.num_envs=32", "algo.rollout_len=16", "algo.ent_coef=0.05", "algo.greedy_eval=true",
                         "eval_episodes=4", f"out_dir={out}", "progress=false", "logger=csv"])


def test_one_conditioned_policy_finds_most_of_the_true_front_on_every_seed(conditioned):
    front = conditioned.summary["front"]
    hv = np.array(conditioned.summary["final"]["hypervolume"]["per_seed"])
    # one chest for every weight scores 16 of 95; the two ends 55; all but the deepest chest 92
    assert np.all(hv >= 0.9 * front["true_hypervolume"]), hv
    for seed_front in front["per_seed"]:
        assert [2.0, -2.0] in seed_front and [10.0, -3.0] in seed_front
    assert conditioned.summary["return_convention"].startswith("episode utility w . R under the weight")


def test_the_run_ends_on_the_fronts_hypervolume_beside_random_play_and_the_true_fronts(conditioned):
    from coplay.experiment.headline import summary_lines

    head = conditioned.summary["headline"]
    assert head["metric"] == "hypervolume"
    # random play seldom lifts a chest before time runs out: a front near the reference point
    assert 0.0 <= head["random_baseline"] < 10.0
    lines = summary_lines(conditioned.summary)
    assert lines[0].startswith("hypervolume of the front: ") and "uniformly random policy: " in lines[0]
    assert lines[1].startswith("share of the true front's hypervolume (95): ")
    assert lines[2].startswith("32,768 environment steps per seed x 2 seeds in ")


def test_the_budget_is_run_to_the_update_not_to_the_chunk():
    # 65,536 steps of updates of 1,600 (16 weights x 100): 40 updates, 64,000 steps, not 62 updates
    p = plan(parse_overrides(["algo=pc_mappo", "env=treasure", "algo.weights=16", "total_steps=65536"]))
    s = p.schedule
    assert s.per_update == 1600 and s.num_updates == 40 and 65536 - 1600 < s.num_updates * s.per_update <= 65536
    assert sum(s.updates_in(c) for c in range(s.num_chunks)) == s.num_updates


def test_the_policy_eval_plays_is_the_one_at_the_chosen_weight():
    p = plan(parse_overrides(["algo=pc_mappo", "env=treasure", "algo.weights=5", "algo.show_weight=4"]))
    env = p.trainer.policy().env
    _, ts = env.reset(jax.random.PRNGKey(0))
    assert np.allclose(Preference.weight(ts, 2), [1.0, 0.0])


@pytest.mark.parametrize("overrides, words", [
    (["env=spread"], ["'pc_mappo' cannot train on environment 'spread'", "it has one objective"]),
    (["algo.concentration=0"], ["algo.concentration", "0"]),
    (["algo.show_weight=5", "algo.weights=5"], ["algo.show_weight=5 is out of range", "0 to 4"]),
])
def test_bad_settings_are_refused_before_anything_compiles(overrides, words):
    with pytest.raises(ConfigError) as e:
        plan(parse_overrides(["algo=pc_mappo", "env=treasure", *overrides]))
    for w in words:
        assert w in str(e.value)


def test_a_config_written_when_pc_mappo_inherited_the_sweeps_fields_still_loads():
    from coplay.experiment.config import Experiment

    old = {"algo": {"name": "pc_mappo", "select": "even", "utility": "linear", "utopia": None, "weights": 4},
           "env": {"name": "treasure"}}
    assert Experiment.from_dict(old).algo_config.weights == 4
