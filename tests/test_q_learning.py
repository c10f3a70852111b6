"""The Q family's machinery: targets, double Q, masks, exploration, mixing, replay."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos.common import q_learning as ql
from coplay.core.compile import jit_once
from coplay.core.errors import ConfigError
from coplay.nets.mixers import MonotonicMixer


def _reference_n_step(reward, done, next_value, gamma, n):
    """A plain loop over the definition."""
    t_len = next_value.shape[0]
    out = np.zeros_like(next_value)
    for t in range(t_len):
        total, discount = np.zeros_like(next_value[t]), 1.0
        alive = np.ones_like(next_value[t])
        for k in range(n):
            total += discount * alive * reward[t + k]
            alive = alive * (1.0 - done[t + k])[..., None] if reward.ndim > done.ndim else alive * (1.0 - done[t + k])
            discount *= gamma
        out[t] = total + discount * alive * next_value[t]
    return out


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("per_agent", [False, True])
def test_n_step_targets_match_definition(n, per_agent):
    rng = np.random.default_rng(n)
    t_len, b, agents = 4, 5, 3
    shape = (t_len + n, b, agents) if per_agent else (t_len + n, b)
    reward = rng.normal(size=shape).astype(np.float32)
    done = rng.random((t_len + n, b)) < 0.3
    next_value = rng.normal(size=(t_len,) + shape[1:]).astype(np.float32)
    got = ql.n_step_targets(jnp.asarray(reward), jnp.asarray(done), jnp.asarray(next_value), 0.9, n)
    want = _reference_n_step(reward, done.astype(np.float32), next_value, 0.9, n)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_episode_end_stops_reward_and_bootstrap():
    reward = jnp.array([[1.0], [2.0], [4.0]])
    done = jnp.array([[False], [True], [False]])
    # from t=0 with n=3: r0 + g r1, the episode ended at t=1, nothing after it counts
    got = ql.n_step_targets(reward, done, jnp.array([[100.0]]), 0.5, 3)
    assert float(got[0, 0]) == pytest.approx(1.0 + 0.5 * 2.0)


def test_bootstrap_never_uses_an_illegal_action():
    q_online = jnp.array([[5.0, 1.0, 9.0]])
    q_target = jnp.array([[2.0, 3.0, 50.0]])
    mask = jnp.array([[True, True, False]])
    # double Q: the online argmax among legal actions is 0, valued by the target network
    assert float(ql.bootstrap_value(q_online, q_target, mask, double=True)[0]) == 2.0
    # plain: the target network's best legal value
    assert float(ql.bootstrap_value(q_online, q_target, mask, double=False)[0]) == 3.0


def test_expected_backup_is_the_softmax_policys_value_over_legal_actions():
    q_online = jnp.array([[0.0, np.log(3.0), 9.0], [1.0, 1.0, 1.0]])
    q_target = jnp.array([[2.0, 6.0, 50.0], [4.0, 5.0, 6.0]])
    mask = jnp.array([[True, True, False], [False, False, False]])
    got = np.asarray(ql.expected_value(q_online, q_target, mask))
    # legal actions 0 and 1 drawn 1 : 3 (the online network's exp Q), valued by the target network;
    # a row with no legal action is averaged over all of them (as masked_logits leaves it unmasked)
    np.testing.assert_allclose(got, [0.25 * 2.0 + 0.75 * 6.0, 5.0], rtol=1e-6)


def test_epsilon_greedy_respects_masks():
    key = jax.random.PRNGKey(0)
    q = jnp.tile(jnp.array([0.0, 10.0, 1.0, 2.0]), (2000, 1))
    mask = jnp.tile(jnp.array([True, False, True, True]), (2000, 1))
    greedy = ql.epsilon_greedy(key, q, mask, 0.0)
    assert np.all(np.asarray(greedy) == 3)
    explore = np.asarray(ql.epsilon_greedy(key, q, mask, 1.0))
    assert not np.any(explore == 1)
    counts = np.bincount(explore, minlength=4)
    assert np.all(counts[[0, 2, 3]] > 550)  # about 667 each when uniform over the legal three


def test_target_update_hard_and_polyak():
    online, target = {"w": jnp.array(4.0)}, {"w": jnp.array(0.0)}
    assert float(ql.update_target(online, target, jnp.array(3), 4, 1.0)["w"]) == 0.0  # not due
    assert float(ql.update_target(online, target, jnp.array(8), 4, 1.0)["w"]) == 4.0  # hard copy
    assert float(ql.update_target(online, target, jnp.array(8), 4, 0.25)["w"]) == 1.0  # Polyak


def test_epsilon_schedule():
    schedule = ql.epsilon_schedule(1.0, 0.1, 100)
    assert float(schedule(0)) == 1.0
    assert float(schedule(50)) == pytest.approx(0.55)
    assert float(schedule(1000)) == pytest.approx(0.1)


def test_mixer_is_monotonic_in_every_agent():
    mixer = MonotonicMixer(embed_dim=8, hypernet_hidden=16, init_scale=1.0)
    key = jax.random.PRNGKey(1)
    state = jax.random.normal(key, (64, 6))
    q = jax.random.normal(jax.random.PRNGKey(2), (64, 3)) * 5
    params = mixer.init(key, q, state)
    grads = jax.grad(lambda q: mixer.apply(params, q, state).sum())(q)
    assert np.all(np.asarray(grads) >= 0)
    assert np.any(np.asarray(grads) > 0)


def test_the_mixer_starts_where_its_init_mode_says():
    """'weights_and_value' starts Q_tot nearer 0 from a state of large features than 'weights', which starts it at
    the default-initialised state value; 'orthogonal' starts every layer orthogonal with the gain given."""
    key = jax.random.PRNGKey(3)
    state = 10 * jax.random.normal(key, (256, 12))
    q = jax.random.normal(jax.random.PRNGKey(4), (256, 3))
    far = {}
    for mode in ("weights", "weights_and_value", "orthogonal"):
        mixer = MonotonicMixer(embed_dim=8, hypernet_hidden=16, init_scale=1e-3, init_mode=mode)
        params = mixer.init(key, q, state)
        far[mode] = float(jnp.mean(jnp.abs(mixer.apply(params, q, state))))
    assert far["weights_and_value"] < 0.1 * far["weights"] and far["orthogonal"] < 1e-3, far
    kernel = params["params"]["Dense_0"]["kernel"]                  # hyper_w1's first layer [12, 16]
    assert np.allclose(np.asarray(kernel @ kernel.T), 1e-6 * np.eye(12), atol=1e-9)     # orthogonal rows, gain 1e-3


def test_the_q_family_steps_with_the_optimizer_it_is_given():
    """RAdam's first step is momentum SGD (no adaptive scale yet): -lr * g; Adam's is -lr * sign(g)."""
    from coplay.algos import get_algo
    from coplay.core.registry import ENVS

    g = {"w": jnp.array([0.5, -0.02, 0.003])}
    steps = {}
    for name in ("adam", "radam"):
        entry = get_algo("qmix")
        cfg = entry.config(optimizer=name, lr=0.1, anneal_lr=False, max_grad_norm=100.0, learning_starts=8)
        opt = entry.factory(cfg, ENVS.make("matrix"), num_updates=10).optimizer
        steps[name], _ = opt.update(g, opt.init(g), g)
    assert np.allclose(np.asarray(steps["radam"]["w"]), -0.1 * np.asarray(g["w"]), rtol=1e-5)
    assert np.allclose(np.asarray(steps["adam"]["w"]), -0.1 * np.sign(np.asarray(g["w"])), rtol=1e-2)


SMALL_Q = ["env=matrix", "env.game=climbing", "env.rounds=1", "total_steps=640", "chunk_steps=128",
           "algo.num_envs=8", "algo.rollout_len=4", "algo.learning_starts=64", "algo.batch_size=8",
           "algo.buffer_size=256", "eval_episodes=4", "progress=false", "logger=csv"]


def test_nothing_is_learned_before_learning_starts():
    from coplay.algos import get_algo
    from coplay.core.registry import ENVS

    entry = get_algo("qmix")
    cfg = entry.config(num_envs=4, rollout_len=2, learning_starts=24, batch_size=4, buffer_size=64)
    trainer = entry.factory(cfg, ENVS.make("matrix"), num_updates=10)
    state = jit_once(trainer.init)(jax.random.PRNGKey(0))  # compiled, unoptimised: quicker than op by op
    update = jit_once(trainer.update)
    for _ in range(2):  # 16 steps < 24: learning waits
        new, metrics = update(state)
        assert float(metrics["learning"]) == 0.0
        losses = [k for k in metrics if k.startswith("loss/")]
        assert losses and all(np.isnan(float(metrics[k])) for k in losses)   # no step taken, no loss reported
        for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(new.params)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        state = new
    state, _ = update(state)  # 24 steps: the first gradient step is taken
    new, metrics = update(state)
    assert float(metrics["learning"]) == 1.0
    changed = [not np.array_equal(np.asarray(a), np.asarray(b))
               for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(new.params))]
    assert all(changed)


def test_rewards_are_stored_scaled_and_reported_as_the_environments():
    from coplay.algos import get_algo
    from coplay.core.registry import ENVS

    entry = get_algo("qmix")
    runs = []
    for scale in (1.0, 10.0):
        cfg = entry.config(num_envs=4, rollout_len=25, learning_starts=90, batch_size=4, buffer_size=128,
                           reward_scale=scale)
        trainer = entry.factory(cfg, ENVS.make("matrix"), num_updates=10)
        state = jit_once(trainer.init)(jax.random.PRNGKey(0))
        runs.append(jit_once(trainer.update)(state))     # 25 steps per env: one whole episode each, acted alike
    (one, m1), (ten, m10) = runs
    stored = [np.asarray(jax.tree.leaves(s.buffer.experience["reward"])[0]) for s in (one, ten)]
    assert np.any(stored[0] != 0)
    np.testing.assert_allclose(stored[1], 10 * stored[0], rtol=1e-6)
    assert float(m1["return"]) == float(m10["return"])    # the environment's return, unscaled


@pytest.mark.parametrize("reward", ["own", "team"])
def test_iql_learns_from_its_own_or_the_team_reward(reward):
    from coplay.algos import iql
    from coplay.core.registry import ENVS

    trainer = iql.IQL(iql.Config(reward=reward, learning_starts=0), ENVS.make("matrix"), 10)
    rewards = jnp.array([[[1.0, 3.0]], [[0.0, 4.0]]])                                     # [L=2, B=1, N=2]
    w = {"reward": rewards, "active": jnp.ones((2, 1, 2), bool), "done": jnp.zeros((2, 1), bool)}
    q = jnp.zeros((1, 1, 2))                                  # Q taken and bootstrap value: zero
    trainer.td_inputs = lambda params, target_params, window: (q, q, window)
    loss, stats = trainer.loss(None, None, w)
    # One-step targets are the first step's rewards: own [1, 3], or the team's mean [2, 2].
    expected = 0.5 * (1.0 + 9.0) / 2 if reward == "own" else 0.5 * 4.0
    assert float(loss) == pytest.approx(expected)
    assert float(stats["q_target"]) == pytest.approx(2.0)


def test_mixing_algorithms_accept_only_the_team_reward(tmp_path):
    # VDN and QMIX always learn the team value from the team reward: there is no field to change it.
    with pytest.raises(ConfigError, match="unknown config field of algo 'reward'"):
        coplay.train(SMALL_Q + ["algo=vdn", "algo.reward=own", f"out_dir={tmp_path}"])


@pytest.mark.slow
def test_resume_with_replay_is_exact(tmp_path):
    # recurrent agents (stored GRU state and burn-in in replay), one network per agent, n-step, Polyak targets
    extra = ["algo.recurrent=true", "algo.seq_len=2", "algo.burn_in=1", "algo.n_step=2", "algo.share_params=false",
             "algo.tau=0.5", "algo.target_interval=2"]
    args = SMALL_Q + ["algo=qmix", "seeds=2", f"out_dir={tmp_path}"] + extra
    full = coplay.train(args + ["name=full"])
    part = coplay.train(args + ["name=part"], stop_after_chunks=2)
    assert part.interrupted
    resumed = coplay.train(args + ["name=part", f"resume={part.run_dir}"])
    # the replay buffer is in the state: the resumed run samples exactly what the uninterrupted one did
    assert int(np.asarray(full.state.buffer.current_index)[0]) > 0
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(resumed.state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert full.summary["final"] == resumed.summary["final"]
    # `coplay eval` on the run: the greedy policy in a one-shot matrix game is deterministic,
    # so re-evaluating the last checkpoint with other keys gives every seed's final return again
    from coplay.experiment.playback import evaluate_run
    out = evaluate_run(resumed.run_dir, episodes=4, gif=False)
    assert out["per_seed"] == resumed.summary["final"]["return"]["per_seed"]


@pytest.mark.parametrize("algo", ["iql", "vdn", "qmix"])
def test_continuous_actions_are_refused_with_the_algorithms_that_can(algo, tmp_path):
    with pytest.raises(ConfigError) as err:
        coplay.train([f"algo={algo}", "env=spread", "env.continuous_actions=true", f"out_dir={tmp_path}"])
    message = str(err.value)
    assert f"'{algo}' cannot train on environment 'spread': actions are continuous" in message
    assert "it needs discrete actions. Algorithms that can: happo, hatrpo, ippo, mappo" in message
    assert not any(tmp_path.iterdir())  # refused before a run directory exists


def test_bad_q_config_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="burn_in"):
        coplay.train(SMALL_Q + ["algo=iql", "algo.burn_in=2", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="learning_starts"):
        coplay.train(SMALL_Q + ["algo=vdn", "algo.learning_starts=100000", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="buffer_size"):
        coplay.train(SMALL_Q + ["algo=qmix", "algo.buffer_size=8", f"out_dir={tmp_path}"])
