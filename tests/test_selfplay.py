"""Self-play machinery: the opponent pool, games between policies, tournaments,
and the self-play trainer's inputs and errors (its learning tests are in
test_selfplay_learning.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos import selfplay_ppo
from coplay.core.policy import Policy
from coplay.algos.common import opponent_pool
from coplay.algos.common.bots import make_bot, tic_tac_toe_minimax
from coplay.algos.common.evaluation import make_evaluator
from coplay.algos.common.matches import make_match, outcomes, random_policy
from coplay.core.compile import jit_once
from coplay.core.env import Wrapper
from coplay.core.errors import ConfigError
from coplay.eval.round_robin import Player, round_robin
from coplay.wrappers import AutoReset, EpisodeStats

pytest.importorskip("pgx")


def _params(v: float) -> dict:
    return {"w": jnp.full((2, 3), v), "b": jnp.full((3,), v)}


# ----------------------------------------------------------------------------- opponent pool


def test_pool_ring_buffer_keeps_the_newest_snapshots():
    pool = opponent_pool.create(_params(0.0), capacity=3)
    assert pool.filled.tolist() == [True, False, False]
    for step in range(1, 5):
        pool = opponent_pool.add(pool, _params(float(step)), jnp.int32(step))
    # 0, 1, 2 filled the pool; 3 replaced 0 and 4 replaced 1.
    assert pool.filled.all()
    assert pool.added_at.tolist() == [3, 4, 2]
    assert pool.params["w"][:, 0, 0].tolist() == [3.0, 4.0, 2.0]
    assert int(pool.newest) == 1
    skipped = opponent_pool.add(pool, _params(9.0), jnp.int32(5), when=jnp.bool_(False))
    assert skipped.params["w"][:, 0, 0].tolist() == [3.0, 4.0, 2.0] and int(skipped.newest) == 1


def test_pool_sampling_modes():
    pool = opponent_pool.create(_params(0.0), capacity=4)
    pool = opponent_pool.add(pool, _params(1.0), jnp.int32(1))
    pool = opponent_pool.add(pool, _params(2.0), jnp.int32(2))        # slots 0, 1, 2 filled; 3 empty
    key = jax.random.PRNGKey(0)
    assert set(np.asarray(opponent_pool.sample(pool, key, 500, "latest")).tolist()) == {2}
    uniform = np.bincount(np.asarray(opponent_pool.sample(pool, key, 3000, "uniform")), minlength=4)
    assert uniform[3] == 0 and np.all(np.abs(uniform[:3] / 3000 - 1 / 3) < 0.04)

    # The learner beats slot 0 always, slot 1 never, and has not met slot 2.
    slots = jnp.array([0] * 50 + [1] * 50)
    points = jnp.array([1.0] * 50 + [0.0] * 50)
    pool = opponent_pool.record(pool, slots, points, jnp.ones(100, bool), decay=1.0)
    rate = np.asarray(opponent_pool.score_rate(pool))
    assert rate[0] == pytest.approx(51 / 52) and rate[1] == pytest.approx(1 / 52) and rate[2] == 0.5
    probs = np.asarray(opponent_pool.probabilities(pool, "pfsp", power=2.0))
    assert probs[3] == 0 and probs[1] > probs[2] > probs[0]
    weights = np.array([(1 - r) ** 2 for r in rate[:3]])
    np.testing.assert_allclose(probs[:3], weights / weights.sum(), rtol=1e-5)

    fixed = opponent_pool.from_population(jax.tree.map(lambda x: jnp.stack([x, x + 1]), _params(0.0)),
                                          jnp.array([3.0, 1.0]))
    counts = np.bincount(np.asarray(opponent_pool.sample(fixed, key, 4000, "fixed")), minlength=2)
    assert abs(counts[0] / 4000 - 0.75) < 0.03
    with pytest.raises(ValueError, match="unknown opponent sampling 'best'"):
        opponent_pool.probabilities(pool, "best")


def test_pool_record_decays_old_results():
    pool = opponent_pool.create(_params(0.0), capacity=2)
    pool = opponent_pool.record(pool, jnp.array([0, 0]), jnp.array([1.0, 0.5]), jnp.array([True, False]), 0.5)
    assert pool.points.tolist() == [1.0, 0.0] and pool.games.tolist() == [1.0, 0.0]
    pool = opponent_pool.record(pool, jnp.array([0]), jnp.array([0.0]), jnp.array([True]), 0.5)
    assert pool.points.tolist() == [0.5, 0.0] and pool.games.tolist() == [1.5, 0.0]


# ----------------------------------------------------------------------------- games between policies


def test_random_matches_are_zero_sum_and_record_the_first_mover():
    env = coplay.make("tic_tac_toe")
    rand = random_policy(env)
    out = jit_once(make_match(env, [rand, rand], episodes=400))([None, None], jax.random.PRNGKey(0))
    ret = np.asarray(out["return"])
    assert out["finished"].all()
    np.testing.assert_allclose(ret.sum(1), 0.0)
    assert set(np.unique(ret[:, 0]).tolist()) <= {-1.0, 0.0, 1.0}
    first = np.asarray(out["first"])
    assert 0.4 < first.mean() < 0.6                    # pgx draws who moves first
    # The first mover of random tic-tac-toe wins more often than it loses (about 58% vs 29%).
    mover_wins = np.where(first == 0, ret[:, 0] > 0, ret[:, 1] > 0).mean()
    mover_losses = np.where(first == 0, ret[:, 0] < 0, ret[:, 1] < 0).mean()
    assert mover_wins > mover_losses + 0.15
    res = outcomes(jnp.asarray(ret), 0)
    np.testing.assert_allclose(res["win"] + res["draw"] + res["loss"], 1.0)
    np.testing.assert_allclose(res["points"], np.where(ret[:, 0] > 0, 1.0, np.where(ret[:, 0] < 0, 0.0, 0.5)))
    assert np.all(np.asarray(out["length"]) >= 5)       # nobody wins tic-tac-toe in fewer than 5 moves


class _StatesUsedOnce(Wrapper):
    """Flagged like host copies (states used once): loops over it run to max_steps."""

    states_used_once = True

    def _reset(self, key):
        return self.env.reset(key)

    def _step(self, state, actions, key):
        return self.env.step(state, actions, key)


def test_matches_and_evaluation_that_stop_early_give_the_full_horizons_results():
    # Both stop once every game has ended, except where states are used once (host
    # copies): under vmap a batched stop condition would step finished members again.
    env = coplay.make("connect_four")
    once = _StatesUsedOnce(env)
    assert not env.states_used_once and AutoReset(EpisodeStats(once)).states_used_once
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    early, full = (jit_once(jax.vmap(make_match(e, [random_policy(e)] * 2, 16), in_axes=(None, 0)))(
        [None, None], keys) for e in (env, once))
    assert int(early["length"].max()) < env.spec.max_steps
    for k in early:
        np.testing.assert_array_equal(early[k], full[k], err_msg=k)
    early, full = (jit_once(jax.vmap(make_evaluator(random_policy(AutoReset(EpisodeStats(e))), 8),
                                     in_axes=(None, 0)))(None, keys) for e in (env, once))
    for k in early:
        np.testing.assert_array_equal(early[k], full[k], err_msg=k)


def test_random_tic_tac_toe_matches_the_exact_odds():
    # Uniformly random tic-tac-toe: the first mover wins 737/1260 of games, loses 121/420
    # and draws 8/63. Both seats play random_policy, which acts with one draw per game.
    env = coplay.make("tic_tac_toe")
    games = 20_000
    out = jit_once(make_match(env, [random_policy(env), random_policy(env)], episodes=games))(
        [None, None], jax.random.PRNGKey(11))
    ret, first = np.asarray(out["return"]), np.asarray(out["first"])
    mover = ret[np.arange(games), first]
    for observed, exact in [((mover > 0).mean(), 737 / 1260), ((mover < 0).mean(), 121 / 420),
                            ((mover == 0).mean(), 8 / 63)]:
        assert abs(observed - exact) < 4.5 * np.sqrt(exact * (1 - exact) / games), (observed, exact)


def test_simultaneous_seats_draw_their_own_random_actions():
    # Rock-paper-scissors between random players: a third of the rounds each won, drawn,
    # lost. (Seats that shared their random numbers would always draw.)
    env = coplay.make("matrix", game="rps", rounds=1)
    assert not env.spec.turn_based
    games = 6_000
    out = jit_once(make_match(env, [random_policy(env), random_policy(env)], episodes=games))(
        [None, None], jax.random.PRNGKey(12))
    ret = np.asarray(out["return"])[:, 0]
    for outcome in (1.0, 0.0, -1.0):
        assert abs((ret == outcome).mean() - 1 / 3) < 4.5 * np.sqrt(2 / 9 / games)


def test_equal_seats_of_a_turn_based_game_act_in_one_call():
    # A turn-based game plays only the mover's action, so seats with an equal policy and
    # the same parameters are asked once per step; other seats, and every seat of a
    # simultaneous game, are asked on their own.
    def counted(env, calls):
        def act(params, obs, mask, key, carry, reset):
            calls.append(params)
            return random_policy(env).act(params, obs, mask, key, carry, reset)
        return Policy(act=act, initial_carry=random_policy(env).initial_carry, env=env)

    ttt, rps = coplay.make("tic_tac_toe"), coplay.make("matrix", game="rps", rounds=1)
    for env, params, same, expected in [(ttt, [None, None], True, 1), (ttt, [None, None], False, 2),
                                        (ttt, [jnp.zeros(1), jnp.zeros(1)], True, 2),
                                        (rps, [None, None], True, 2)]:
        calls: list = []
        first = counted(env, calls)
        seats = [first, first if same else counted(env, calls)]
        jax.eval_shape(make_match(env, seats, episodes=4), params, jax.random.PRNGKey(0))
        assert len(calls) == expected, (env.spec.name, same, params)
    assert random_policy(ttt) == random_policy(ttt) and random_policy(ttt) != random_policy(rps)


def test_minimax_never_loses_even_after_random_openings():
    env = coplay.make("tic_tac_toe")
    perfect, rand = tic_tac_toe_minimax(env), random_policy(env)
    out = jit_once(make_match(env, [perfect, rand], episodes=300, opening_moves=2))([None, None],
                                                                                   jax.random.PRNGKey(1))
    ret = np.asarray(out["return"])
    first = np.asarray(out["first"])
    # Moving first, minimax cannot be in a lost position after two random moves.
    assert np.all(ret[first == 0, 0] >= 0)


def test_a_policy_built_for_another_game_is_refused():
    ttt, c4 = coplay.make("tic_tac_toe"), coplay.make("connect_four")
    with pytest.raises(ConfigError, match=r"policy '1' was built for environment 'connect_four'.*tic_tac_toe"):
        make_match(ttt, [random_policy(ttt), random_policy(c4)], episodes=4)
    players = [Player("x", random_policy(ttt)), Player("c4bot", random_policy(c4))]
    with pytest.raises(ConfigError, match=r"policy 'c4bot' was built for environment 'connect_four'"):
        round_robin(ttt, players, games=4, key=jax.random.PRNGKey(0))
    with pytest.raises(ConfigError, match="the minimax bot plays tic-tac-toe only, not 'connect_four'; bots that "
                                          "play it: random"):
        make_bot("minimax", c4)
    with pytest.raises(ConfigError, match="unknown bot 'minmax'; did you mean 'minimax'"):
        make_bot("minmax", ttt)


@pytest.mark.slow
def test_round_robin_counts_every_seated_pair():
    env = coplay.make("tic_tac_toe")
    sp = selfplay_ppo.SelfPlayPPO(selfplay_ppo.Config(num_envs=4, rollout_len=4, minibatches=1, hidden_size=8), env,
                              num_updates=1)
    policy = sp.policy()
    init = sp.policy_params(jit_once(sp.init)(jax.random.PRNGKey(0)))
    other = jax.tree.map(lambda x: x * 0.0, init)      # uniform logits: random play
    # Two networks share one policy (their games are vmapped over parameters), beside a bot.
    players = [Player("net_a", policy, init), Player("net_b", policy, other), Player("minimax", tic_tac_toe_minimax(env))]
    results = round_robin(env, players, games=40, key=jax.random.PRNGKey(0))
    counts = results.counts
    assert results.players == ("net_a", "net_b", "minimax")
    assert counts.sum(-1).tolist() == [[0, 40, 40], [40, 0, 40], [40, 40, 0]]
    # Minimax never loses, in either seat, and beats near-random networks most of the time.
    assert counts[2, :, 2].sum() == 0 and counts[:, 2, 0].sum() == 0
    assert counts[2, :, 0].sum() > 0.6 * 80
    with pytest.raises(ConfigError, match="player names must be unique"):
        round_robin(env, [players[2], players[2]], games=2, key=jax.random.PRNGKey(0))
    with pytest.raises(ConfigError, match="at least two players"):
        round_robin(env, players[:1], games=2, key=jax.random.PRNGKey(0))


# ----------------------------------------------------------------------------- the trainer's inputs


def test_features_flatten_and_add_the_seat():
    obs = jnp.arange(2 * 2 * 3 * 3 * 2, dtype=jnp.float32).reshape(2, 2, 3, 3, 2)
    x = selfplay_ppo.features(obs)
    assert x.shape == (2, 2, 20)
    np.testing.assert_array_equal(x[1, 0, :18], obs[1, 0].reshape(-1))
    assert x[1, 0, 18:].tolist() == [1.0, 0.0] and x[0, 1, 18:].tolist() == [0.0, 1.0]


def test_selfplay_refuses_what_it_cannot_train():
    with pytest.raises(ConfigError, match="needs at least 2"):
        selfplay_ppo.SelfPlayPPO(selfplay_ppo.Config(), coplay.make("pgx:2048"), num_updates=1)
    with pytest.raises(ConfigError, match="algo.minibatches=3 must divide"):
        selfplay_ppo.SelfPlayPPO(selfplay_ppo.Config(minibatches=3), coplay.make("tic_tac_toe"), num_updates=1)
    with pytest.raises(ConfigError, match="algo.opponent"):
        selfplay_ppo.SelfPlayPPO(selfplay_ppo.Config(opponent="best"), coplay.make("tic_tac_toe"), num_updates=1)


def test_update_trains_only_the_learner_and_fills_the_pool():
    env = coplay.make("tic_tac_toe")
    config = selfplay_ppo.Config(num_envs=8, rollout_len=8, minibatches=2, hidden_size=16, snapshot_every=2,
                                 pool_size=3)
    trainer = selfplay_ppo.SelfPlayPPO(config, env, num_updates=8)
    state = jit_once(trainer.init)(jax.random.PRNGKey(0))
    update = jit_once(trainer.update)
    for _ in range(7):
        state, metrics = update(state)
    assert state.pool.added_at.tolist() == [6, 2, 4]    # snapshots at updates 2, 4, 6; 6 overwrote 0
    assert int(state.pool.filled.sum()) == 3
    assert float(metrics["episodes"]) > 0 and np.isfinite(float(metrics["loss/value"]))
    assert 0.0 <= float(metrics["win"]) <= 1.0
    # The opponents are snapshots: their parameters differ from the learner's.
    newest = jax.tree.map(lambda x: x[int(state.pool.newest)], state.pool.params)
    diff = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), newest, state.params["actor"])
    assert max(jax.tree.leaves(diff)) > 0


def test_fixed_population_is_never_changed():
    env = coplay.make("tic_tac_toe")
    config = selfplay_ppo.Config(num_envs=8, rollout_len=8, minibatches=2, hidden_size=16, snapshot_every=1)
    probe = selfplay_ppo.SelfPlayPPO(config, env, num_updates=2)
    init = jit_once(probe.init)
    members = [probe.policy_params(init(jax.random.PRNGKey(k))) for k in range(2)]
    pool = opponent_pool.from_population(jax.tree.map(lambda *x: jnp.stack(x), *members), jnp.array([1.0, 0.0]))
    trainer = selfplay_ppo.SelfPlayPPO(config, env, num_updates=2, opponents=pool)
    state = jit_once(trainer.init)(jax.random.PRNGKey(5))
    update = jit_once(trainer.update)
    for _ in range(2):
        state, _ = update(state)
    assert jax.tree.all(jax.tree.map(jnp.array_equal, state.pool.params, pool.params))
    assert set(np.asarray(state.opponent).tolist()) == {0}     # weight 0 never drawn
    assert float(state.pool.games[0]) > 0 and float(state.pool.games[1]) == 0
