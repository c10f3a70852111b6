"""pgx's boards in words (`text:tic_tac_toe`, `text:connect_four`) and text policies
in the game underneath: the views are the board, the moves are the game's, and a
text policy meets the game's bots in one round robin, its invalid utterances
counted as the game's illegal moves."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.policy import Policy
from coplay.algos.common.bots import tic_tac_toe_minimax
from coplay.algos.common.matches import env_signature, make_match, no_carry
from coplay.core.errors import UnknownNameError
from coplay.envs.text import VOCAB
from coplay.eval.round_robin import Player, round_robin
from coplay.envs.text.scoring import speaker

pytest.importorskip("pgx")


def _play(env, moves):
    """Play the moves (numbers as words) from a fixed deal; returns the states and time steps."""
    step = jax.jit(env.step)
    state, ts = env.reset(jax.random.PRNGKey(0))
    out = [(state, ts)]
    for m in moves:
        said = jnp.asarray(np.stack([VOCAB.encode(m, 2, end=True)] * 2))
        state, ts = step(state, said, jax.random.PRNGKey(1))
        out.append((state, ts))
    return out


def test_tic_tac_toe_in_words_is_the_board_and_ends_as_the_game_does():
    env = coplay.make("text:tic_tac_toe")
    assert env.speech_words() == tuple(str(k) for k in range(1, 10))
    (state, ts), *rest = _play(env, ["1", "4", "2", "5", "3"])        # x takes the top row
    x = int(jnp.argmax(ts.active))
    assert VOCAB.decode(ts.obs[x]) == "tic tac toe , you are x : _ _ _ / _ _ _ / _ _ _ , your move"
    assert VOCAB.decode(ts.obs[1 - x]).endswith("you are o : _ _ _ / _ _ _ / _ _ _ , wait")
    state, ts = rest[-1]
    assert bool(ts.done) and ts.reward[x] == 1.0 and ts.reward[1 - x] == -1.0
    assert VOCAB.decode(ts.obs[x]) == "tic tac toe , you are x : x x x / o o _ / _ _ _ , game over"
    assert env.render_text(state, 1 - x) == VOCAB.decode(ts.obs[1 - x])
    assert not bool(rest[3][1].done) and not bool(ts.info["invalid_utterance"].any())

    # Saying an occupied square, or a word that is no square, forfeits; with invalid=random a legal move is played.
    for said in ("1", "o"):
        (_, ts0), _, (_, ts) = _play(env, ["1", said])
        o = 1 - int(jnp.argmax(ts0.active))
        assert bool(ts.done) and ts.reward[o] == -1.0 and ts.reward[1 - o] == 1.0
        assert ts.info["invalid_utterance"].tolist() == ts.info["illegal_action"].tolist() == [o == 0, o == 1]
    lenient = coplay.make("text:tic_tac_toe", invalid="random")
    (_, ts0), _, (_, ts) = _play(lenient, ["1", "1"])
    o = 1 - int(jnp.argmax(ts0.active))
    assert not bool(ts.done) and bool(ts.info["invalid_utterance"][o]) and not bool(ts.info["illegal_action"].any())
    assert VOCAB.decode(ts.obs[o]).split(" : ")[1].count("o") == 1         # o's random move is on the board


def test_connect_four_in_words_drops_pieces_to_the_bottom_row():
    env = coplay.make("text:connect_four")
    assert env.spec.obs_space.shape == (5 + 1 + 1 + 42 + 5 + 1 + 2,) and env.speech_words()[-1] == "7"
    steps = _play(env, ["1", "2", "1", "2", "1", "2", "1"])          # four in column 1
    x = int(jnp.argmax(steps[0][1].active))
    _, ts = steps[1]
    rows = VOCAB.decode(ts.obs[x]).split(" : ")[1].split(" , ")[0].split(" / ")
    assert len(rows) == 6 and rows[-1] == "x _ _ _ _ _ _" and set(" ".join(rows[:-1]).split()) == {"_"}
    _, ts = steps[-1]
    assert bool(ts.done) and ts.reward[x] == 1.0 and not bool(steps[-2][1].done)
    with pytest.raises(UnknownNameError, match="'chess'.*connect_four, tic_tac_toe"):
        from coplay.interop.pgx import TextBoardGame
        TextBoardGame("chess")


def _scripted(env, rule) -> Policy:
    """A text policy of `env` that says, for every agent, the square `rule(board [9] cells)` picks."""
    cells = jnp.arange(9) // 3 * 4 + jnp.arange(9) % 3 + 8        # where the cells sit in a view
    words = jnp.asarray([VOCAB.encode(str(k + 1), 2, end=True) for k in range(9)] + [VOCAB.encode("o", 2, end=True)])

    def act(params, obs, mask, key, carry, reset):
        empty = obs[..., cells] == VOCAB.index["_"]
        return words[rule(empty)], carry

    return Policy(act=act, initial_carry=no_carry, env=env)


@pytest.mark.slow
def test_a_text_policy_plays_the_game_underneath_beside_its_bots_with_invalid_utterances_counted():
    text = coplay.make("text:tic_tac_toe")
    first_empty = _scripted(text, lambda empty: jnp.argmax(empty, axis=-1))
    nonsense = _scripted(text, lambda empty: jnp.full(empty.shape[:-1], 9))     # says "o": never a square

    # The same text policies, in words and in the game underneath, play the same games.
    in_words = make_match(text, [first_empty, nonsense], 16)([None, None], jax.random.PRNGKey(3))
    underneath = make_match(text.game, [speaker(text, first_empty), speaker(text, nonsense)], 16)(
        [None, None], jax.random.PRNGKey(3))
    np.testing.assert_array_equal(in_words["return"], underneath["return"])
    np.testing.assert_array_equal(in_words["illegal"], underneath["illegal"])

    game = text.game
    assert env_signature(game) == env_signature(coplay.make("tic_tac_toe"))   # policies trained on it can sit here
    players = [Player("nonsense", speaker(text, nonsense)), Player("minimax", tic_tac_toe_minimax(game))]
    results = round_robin(game, players, games=20, key=jax.random.PRNGKey(0))
    assert results.totals[0, 1].tolist() == [0, 0, 2 * 20]               # nonsense loses every game, both seats
    assert results.illegal.tolist() == [[0, 2 * 20], [0, 0]]             # ... each by an invalid utterance


def test_random_openings_start_from_zero_to_k_random_moves_and_keep_the_contract():
    from coplay.core.errors import ConfigError
    from coplay.testing import check_env

    env = coplay.make("text:tic_tac_toe", opening=3)
    reset = jax.jit(jax.vmap(env.reset))
    state, ts = reset(jax.random.split(jax.random.PRNGKey(0), 200))
    boards = [VOCAB.decode(np.asarray(v)).split(":")[1].split(",")[0].split() for v in ts.obs[:, 0]]
    marks = np.array([board.count("x") + board.count("o") for board in boards])
    assert set(marks.tolist()) == {0, 1, 2, 3}                 # 0 to 3 moves, every count drawn
    assert not np.any(np.asarray(ts.done)) and np.all(np.asarray(ts.reward) == 0)
    assert np.all(np.asarray(ts.active).sum(-1) == 1)         # someone is to move
    # the same key gives the same opening (groups of GRPO share their start)
    again = reset(jax.random.split(jax.random.PRNGKey(0), 200))[1]
    np.testing.assert_array_equal(np.asarray(again.obs), np.asarray(ts.obs))
    check_env(env, retrace=False)
    with pytest.raises(ConfigError, match="opening=-1 is out of range"):
        coplay.make("text:tic_tac_toe", opening=-1)
