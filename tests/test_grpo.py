"""GRPO with a token-level policy (`algo=grpo`): bad input refused before anything
compiles, the loss's token normalisations, self-play on Kuhn poker in words
learning towards equilibrium (scored exactly), a pool of snapshots and one model
per seat resumed exactly, and `coplay eval` printing sample dialogues."""

from __future__ import annotations

import csv
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos.common.group_advantages import view_keys
from coplay.algos.common.matches import bare_env, make_match, random_policy
from coplay.algos.common.token_loss import aggregate_tokens
from coplay.algos.grpo import GRPO, Config
from coplay.cli.main import main
from coplay.core.compile import jit_once
from coplay.core.errors import ConfigError
from coplay.envs.text.tree_games import TextTreeGame
from coplay.envs.text.vocab import PAD
from coplay.envs.text.scoring import score_text_policy, speaker
from coplay.experiment.config import parse_overrides
from coplay.experiment.evaluate import record_dialogue
from coplay.experiment.compiled import plan
from coplay.experiment.tournament import run_tournament

# Kuhn with grpo's own defaults, not the settings grpo starts from on Kuhn (Config.recommended).
PLAIN = [f"algo.{k}={getattr(Config(), k)}" for k in Config.recommended["text:kuhn_poker"]]
KUHN = ["algo=grpo", "env=text:kuhn_poker", "seeds=1", "progress=false", "logger=csv", *PLAIN]


class _Unkeyed(TextTreeGame):
    views_are_states = False     # as a game whose views carry the whole history would say


@pytest.mark.parametrize("overrides, words", [
    (["algo.episodes=60", "algo.group_size=8"], ["algo.group_size=8 must divide algo.episodes=60", "episodes=56"]),
    (["algo.width=30", "algo.heads=4"], ["algo.heads=4 must divide algo.width=30"]),
    (["algo.minibatches=5"], ["algo.minibatches=5 must divide the turns of one update", "3 steps x 64 episodes"]),
    (["algo.estimator=gipgo"], ["gipgo", "gigpo", "grpo", "rae"]),
    (["algo.token_norm=tokens"], ["tokens", "sequence", "token", "constant"]),
    (["algo.reference_every=50"], ["algo.reference_every=50 refreshes the reference policy", "algo.kl_coef > 0"]),
    (["algo.bot_share=0.25", "algo.opponent=random"], ["algo.bot_share=0.25 mixes a scripted bot",
                                                        "algo.opponent=random is a bot in every group"]),
    (["algo.bot_share=1.5"], ["algo.bot_share", "1.5"]),
    (["algo.bot=stockfish"], ["stockfish", "random", "minimax"]),
])
def test_bad_settings_are_refused_before_anything_compiles(overrides, words):
    with pytest.raises(ConfigError) as err:
        plan(parse_overrides(KUHN + overrides + ["total_steps=1000"]))
    for word in words:
        assert word in str(err.value)


def test_an_estimator_that_needs_states_on_an_environment_without_them_is_refused():
    with pytest.raises(ConfigError, match="algo.estimator=gigpo groups turns by the state") as err:
        GRPO(Config(estimator="gigpo"), _Unkeyed("kuhn_poker"), num_updates=1)
    assert "views_are_states" in str(err.value) and "rae" in str(err.value)
    GRPO(Config(estimator="gigpo"), TextTreeGame("kuhn_poker"), num_updates=1)   # its views are its states


def test_grpo_refuses_an_environment_that_does_not_speak_naming_what_can():
    with pytest.raises(ConfigError) as err:
        plan(parse_overrides(["algo=grpo", "env=tic_tac_toe", "total_steps=100000"]))
    assert "actions are discrete" in str(err.value) and "utterances" in str(err.value)
    assert "Algorithms that can: selfplay_ppo" in str(err.value)
    with pytest.raises(ConfigError, match="actions are utterances") as err:
        plan(parse_overrides(["algo=selfplay_ppo", "env=text:kuhn_poker", "total_steps=100000"]))
    assert "Algorithms that can: grpo" in str(err.value)


@pytest.mark.slow
def test_a_scripted_bot_takes_the_other_seat_says_its_moves_and_is_never_trained():
    game = coplay.make("text:tic_tac_toe")
    trainer = GRPO(Config(opponent="minimax", episodes=16, group_size=2, layers=1), game, num_updates=1)
    state = jit_once(trainer.init)(jax.random.PRNGKey(0))
    assert state.pool == {}                                             # no snapshots kept
    buf, alive, seats = jit_once(trainer._play)(state, jax.random.PRNGKey(1))
    seat, vs_bot = seats.seat, seats.vs_bot
    assert np.all(np.asarray(vs_bot))                                   # the bot in every game
    agent, learner = np.asarray(buf["agent"][..., 0]), np.asarray(buf["learner"][..., 0])
    seat = np.asarray(seat)
    assert set(seat.tolist()) == {0, 1} and np.all(seat[::2] == seat[1::2])     # one seat per group
    bots_turn = agent != seat[None]
    assert not np.any(learner & bots_turn)                              # only the learner's turns are trained
    invalid = np.asarray(buf["invalid"])                                # [H, E, N]
    assert not invalid[:, np.arange(16), 1 - seat].any()                # the bot's words always name a legal move
    assert bots_turn.any() and np.asarray(alive).sum() == 0
    returns = np.asarray(buf["reward"].sum(0))[np.arange(16), seat]
    assert np.all(returns <= 0)                                         # perfect play never loses
    _, stats = jit_once(trainer.update)(state)
    assert float(stats["win"]) + float(stats["draw"]) + float(stats["loss"]) == pytest.approx(1.0)
    assert float(stats["win"]) == 0.0


@pytest.mark.slow
def test_a_share_of_the_groups_plays_a_scripted_bot_and_the_rest_self_play():
    game = coplay.make("text:tic_tac_toe")
    trainer = GRPO(Config(bot_share=0.5, bot="minimax", decoding="legal", episodes=32, group_size=2, layers=1,
                          width=16), game,
                   num_updates=1)
    buf, alive, seats = jit_once(trainer._play)(jit_once(trainer.init)(jax.random.PRNGKey(0)), jax.random.PRNGKey(1))
    seat, vs_bot = seats.seat, seats.vs_bot
    seat, vs_bot = np.asarray(seat), np.asarray(vs_bot)
    assert 0 < vs_bot.sum() < 32 and np.all(vs_bot[::2] == vs_bot[1::2])    # drawn per group of 2
    assert np.all(seat[~vs_bot] == -1) and set(seat[vs_bot].tolist()) == {0, 1}
    agent, learner = np.asarray(buf["agent"][..., 0]), np.asarray(buf["learner"][..., 0])   # [H, E]
    bots_turn = vs_bot[None] & (agent != seat[None])
    assert not np.any(learner & bots_turn) and bots_turn.any()              # the bot's turns are not trained
    acted = np.asarray(buf["acted"]).sum(0)                                 # [E, N] the learner's turns per seat
    assert np.all(acted[~vs_bot] >= 2)                                      # self-play: both seats learn
    assert np.all(acted[vs_bot, 1 - seat[vs_bot]] == 0) and np.all(acted[vs_bot, seat[vs_bot]] >= 2)
    returns = np.asarray(buf["reward"].sum(0))                              # [E, N]
    assert np.all(returns[vs_bot, seat[vs_bot]] <= 0) and np.asarray(alive).sum() == 0   # perfect play never loses


@pytest.mark.slow
def test_exploratory_moves_are_random_legal_moves_and_are_never_trained():
    game = coplay.make("text:tic_tac_toe")
    trainer = GRPO(Config(explore=0.5, bot_share=0.5, episodes=32, group_size=2, layers=1, width=16), game,
                   num_updates=1)
    buf, alive, seats = jit_once(trainer._play)(jit_once(trainer.init)(jax.random.PRNGKey(0)), jax.random.PRNGKey(1))
    seat, vs_bot = seats.seat, seats.vs_bot
    vs_bot = np.asarray(vs_bot)
    learner, explored = np.asarray(buf["learner"][..., 0]), np.asarray(buf["explored"][..., 0])     # [H, E]
    agent, tokens = np.asarray(buf["agent"][..., 0]), np.asarray(buf["tokens"][:, :, 0])
    assert not np.any(learner & explored)                               # a random move is never trained
    assert not explored[:, vs_bot].any() and 0 < vs_bot.sum() < 32      # nor made in a game against the bot
    share = explored[:, ~vs_bot].sum() / (explored[:, ~vs_bot].sum() + learner[:, ~vs_bot].sum())
    assert 0.35 < share < 0.65                                          # half the learner's turns in self-play
    # every random move names a free square (the untrained policy's own words often do not)
    invalid = np.asarray(buf["invalid"])                                # [H, E, N]
    h, e = np.nonzero(explored)
    assert not invalid[h, e, agent[h, e]].any()
    moves = np.asarray(game.move_tokens())
    assert all((moves == tokens[i, j]).all(-1).any() for i, j in zip(h, e))
    acted = np.asarray(buf["acted"])                                    # [H, E, N]
    assert not acted[h, e, agent[h, e]].any()                           # nor enters any group's statistics


@pytest.mark.slow
def test_the_kl_reference_is_refreshed_to_the_current_policy_every_k_updates():
    trainer = GRPO(Config(kl_coef=0.1, reference_every=2, decoding="legal", episodes=16, group_size=4, layers=1,
                          width=16),
                   TextTreeGame("kuhn_poker"), num_updates=3)
    state = jit_once(trainer.init)(jax.random.PRNGKey(0))
    update = jit_once(trainer.update)
    same = lambda a, b: all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))  # noqa: E731
    one, _ = update(state)
    two, _ = update(one)
    three, _ = update(two)
    assert same(one.reference, state.params) and not same(one.params, state.params)    # the initial policy
    assert same(two.reference, two.params)                                             # refreshed at update 2
    assert same(three.reference, two.params) and not same(three.params, two.params)   # kept until update 4


def test_decoding_restricted_to_legal_moves_never_forfeits_in_training_or_evaluation():
    game = coplay.make("text:tic_tac_toe")
    trainer = GRPO(Config(decoding="legal", bot_share=0.5, episodes=16, group_size=2, layers=1, width=32), game,
                   num_updates=1)
    state = jit_once(trainer.init)(jax.random.PRNGKey(0))
    _, stats = jit_once(trainer.update)(state)
    assert float(stats["invalid"]) == 0.0 and float(stats["finished"]) == 1.0
    # half the groups against the random bot (the rest self-play), with the learner's results there
    assert 0 < float(stats["bot/share"]) < 1
    assert float(stats["bot/win"]) + float(stats["bot/draw"]) + float(stats["bot/loss"]) == pytest.approx(1.0)
    assert float(stats["turns_per_episode"]) >= 5          # no game ended early: nothing was forfeited
    out = jit_once(trainer.evaluator(16))(state.params, jax.random.PRNGKey(1))
    assert np.all(np.asarray(out["invalid_utterance"]) == 0) and np.all(np.asarray(out["finished"]) == 1)
    for k in range(2):   # the dialogues `coplay eval` prints are played under the same restriction
        lines = record_dialogue(trainer.policy(), state.params, jax.random.PRNGKey(k))
        assert any("says:" in line for line in lines) and not any("names no legal move" in line for line in lines)
    # in the game underneath (as a tournament seats it), the game's mask gives it the legal moves
    me = speaker(bare_env(trainer.policy().env), trainer.policy())
    match = jit_once(make_match(game.game, [me, random_policy(game.game)], 32))
    assert np.asarray(match([state.params, None], jax.random.PRNGKey(2))["illegal"]).sum() == 0


@pytest.mark.parametrize("env, opponent, words", [
    ("text:kuhn_poker", "minimax", ["algo.opponent=minimax: the minimax bot plays tic-tac-toe only, not "
                                    "'text:kuhn_poker'; bots that play it: random"]),   # the game asked for
    ("text:nim", "random", ["algo.opponent=random is a scripted bot", "'text:nim' is not a text game",
                            "latest, uniform, pfsp"]),
    ("text:nim", "self", ["algo.bot=random is a scripted bot", "'text:nim' is not a text game",
                          "algo.bot_share=0"]),
])
def test_a_bot_opponent_that_cannot_play_the_game_is_refused(env, opponent, words):
    mixed = ["algo.bot_share=0.5"] if opponent == "self" else []
    with pytest.raises(ConfigError) as err:
        plan(parse_overrides(["algo=grpo", f"env={env}", f"algo.opponent={opponent}", "total_steps=1000", *mixed]))
    for word in words:
        assert word in str(err.value)


def test_the_repetition_penalty_counts_each_agents_identical_utterances_in_the_update():
    trainer = GRPO(Config(repeat_penalty=0.5, repeat_agents="0", layers=1, width=16),
                   coplay.make("text:arithmetic_roles"), num_updates=1)
    a, b, c = [3, 4, 5, PAD], [3, 4, 6, PAD], [7, PAD, PAD, PAD]
    buf = {"tokens": jnp.array([[[a], [a], [b], [a], [c]]], jnp.int32),           # [H=1, E=5, K=1, T]
           "agent": jnp.array([[[0], [0], [0], [1], [0]]], jnp.int32),
           "learner": jnp.array([[[True], [True], [True], [True], [False]]])}
    share = np.asarray(trainer._repeats(buf))[0]                                   # [E, N]
    # agent 0 said a, a, b (the fifth is not the learner's): a is 2 of its 3; agent 1 is not counted
    np.testing.assert_allclose(share[:, 0], [2 / 3, 2 / 3, 1 / 3, 0.0, 0.0], rtol=1e-6)
    assert np.all(share[:, 1:] == 0)
    with pytest.raises(ConfigError, match=r"algo.repeat_agents='3': give 'all' or agent indices 0..2"):
        GRPO(Config(repeat_agents="3"), coplay.make("text:arithmetic_roles"), num_updates=1)


def test_equal_views_get_equal_state_keys():
    views = jnp.array([[5, 6, 7, PAD], [5, 6, 7, PAD], [5, 6, 8, PAD], [6, 5, 7, PAD]], jnp.int32)
    keys = np.asarray(view_keys(views))
    assert keys[0] == keys[1] and len(set(keys[1:].tolist())) == 3


@pytest.mark.parametrize("norm, expected", [
    # two utterances, of 1 and 3 tokens, terms 1 (first) and 2, 2, 2 (second); a third has no weight
    ("sequence", (1.0 + 2.0) / 2),          # mean per utterance, then over utterances
    ("token", (1.0 + 6.0) / 4),             # over every token
    ("constant", (1.0 + 6.0) / (2 * 3)),    # token sums / max_tokens, mean over utterances
])
def test_token_normalisations(norm, expected):
    x = jnp.array([[1.0, 9.0, 9.0], [2.0, 2.0, 2.0], [5.0, 5.0, 5.0]])
    tokens = jnp.array([[True, False, False], [True, True, True], [False, False, False]])
    weight = jnp.array([1.0, 1.0, 0.0])
    assert float(aggregate_tokens(x, tokens, weight, norm, max_tokens=3)) == pytest.approx(expected)


@pytest.mark.slow
def test_kuhn_in_words_self_play_learns_to_speak_with_its_exploitability_scored_every_chunk(tmp_path):
    """From a random token policy, about half of whose utterances name no move, to
    almost none, and from the exploitability of uniform play (0.458) to below 0.4; the
    exact exploitability of the text policy is in every chunk's
    evaluation and matches the tree's score of the final parameters. (Plain GRPO
    self-play often settles on a pure strategy, 0.333, on some machines within 20
    updates: BENCHMARKS.md's grpo_text section; the regularised configuration there is
    the one that goes lower.)"""
    args = KUHN + ["algo.episodes=32", "algo.group_size=8", "total_steps=9216", "chunk_steps=2304",
                   "eval_every=1", "eval_episodes=16", f"out_dir={tmp_path}"]
    run = coplay.train(args)
    rows = list(csv.DictReader((run.run_dir / "metrics.csv").open()))
    assert len(rows) == 4 and all(0.0 <= float(r["eval/exploitability"]) <= 3.0 for r in rows)
    assert float(rows[0]["invalid"]) > 0.1 and float(rows[-1]["invalid"]) < 0.01
    final = run.summary["final"]
    assert final["invalid_utterance"]["iqm"] < 0.01 and final["invalid_mass"]["iqm"] < 0.01
    assert final["exploitability"]["iqm"] < 0.4          # a uniformly random move policy: 0.458
    trainer = plan(parse_overrides(args)).trainer
    params = jax.tree.map(lambda x: x[0], trainer.policy_params(run.state))
    exact = score_text_policy(trainer.env, trainer.model, params)
    assert float(exact.exploitability) == pytest.approx(final["exploitability"]["per_seed"][0], abs=1e-5)

    # Beside a bot, the text policy plays the tree game underneath its text game.
    me = run.run_dir.name
    run_tournament([str(run.run_dir), "random"], games=100, out_dir=tmp_path / "tour", bootstrap=10)
    record = json.loads((tmp_path / "tour" / "tournament.json").read_text())
    assert record["env"] == "tree:kuhn_poker" and record["players"] == [me, "random"]
    assert record["illegal_losses"]["random"] == 0 and record["illegal_losses"][me] <= 10     # of 200 games


@pytest.mark.slow
def test_a_pool_of_snapshots_one_model_per_seat_and_a_baseline_resume_exactly_and_eval_prints_dialogues(
        tmp_path, capsys):
    args = KUHN + ["algo.episodes=16", "algo.group_size=4", "algo.opponent=pfsp", "algo.snapshot_every=2",
                   "algo.share_params=false", "algo.estimator=rae", "algo.kl_coef=0.05", "algo.width=32", "algo.layers=1",
                   "total_steps=384", "chunk_steps=192", "eval_episodes=4", f"out_dir={tmp_path}"]
    full = coplay.train(args + ["name=full"])
    part = coplay.train(args + ["name=part"], stop_after_chunks=1)
    resumed = coplay.train(args + ["name=part", f"resume={part.run_dir}"])
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(resumed.state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    state = full.state
    assert int(state.pool.filled[0].sum()) == 1 + 8 // 2             # 8 updates, a snapshot every 2
    assert np.all(np.asarray(state.baseline) != 0)                     # rae's baseline moved for both seats
    assert jax.tree.leaves(state.params)[0].shape[:2] == (1, 2)        # [seeds, seats]: a model per seat
    rows = list(csv.DictReader((full.run_dir / "metrics.csv").open()))
    assert all(float(r["win"]) + float(r["draw"]) + float(r["loss"]) == pytest.approx(1.0) for r in rows)

    capsys.readouterr()
    assert main(["eval", str(full.run_dir), "--episodes", "4", "--no-gif"]) == 0
    out = capsys.readouterr().out
    assert "dialogue 1:" in out and "player_0 reads: kuhn poker , you are player 0" in out
    assert "player_0 says:" in out and "end: player_0" in out and "exploitability:" in out


def test_a_grpo_run_written_with_the_rollout_fields_names_loads_with_episodes_and_max_turns(tmp_path):
    from coplay.experiment.config import Experiment, parse_overrides

    exp = parse_overrides(KUHN + ["algo.episodes=24", "algo.max_turns=3"])
    older = exp.to_yaml().replace("episodes: 24", "num_envs: 24").replace("max_turns: 3", "rollout_len: 3")
    assert "num_envs: 24" in older and "rollout_len: 3" in older      # as older coplay wrote it
    (tmp_path / "config.yaml").write_text(older)
    loaded = Experiment.load(tmp_path / "config.yaml").algo_config
    assert (loaded.episodes, loaded.max_turns) == (24, 3)
    with pytest.raises(ConfigError, match="unknown config field of algo 'num_envs'"):
        parse_overrides(KUHN + ["algo.num_envs=24"])
