"""Negotiation in words (`text:negotiation`): scripted dialogues score exactly the values
computed by hand, in both reward modes; invalid utterances forfeit or are replaced, and
are counted; the game ends without a deal at exactly `max_turns`; the pool and values
are drawn from the key; `best_split` is the brute-force optimum of joint value."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.text import VOCAB
from coplay.envs.text.negotiation import best_split, value_vectors

# The hand-made episode: 1 book, 2 hats, 3 balls; player 0 values them 3 2 1, player 1 0 2 2
# (both value the whole pool at 10).
COUNTS, VALUES = (1, 2, 3), ((3, 2, 1), (0, 2, 2))


def _say(text: str, length: int = 5) -> jnp.ndarray:
    """Both players' utterances (only the mover's is read)."""
    ids = VOCAB.encode(text, length, end=len(text.split()) < length) if text else np.zeros(length, np.int32)
    return jnp.asarray(np.stack([ids, ids]))


@functools.cache
def _env(**kwargs):
    """`text:negotiation` with `kwargs`, made once per setting (so each compiles once)."""
    return coplay.make("text:negotiation", **kwargs)


@functools.cache
def _compiled(env):
    """`env`'s compiled reset and step."""
    return jax.jit(env.reset), jax.jit(env.step)


@functools.cache
def _drawn():
    """The pools [1000, 3] and values [1000, 2, 3] of 1000 episodes of the default setting."""
    states, _ = jax.jit(jax.vmap(_env().reset))(jax.random.split(jax.random.PRNGKey(0), 1000))
    return np.asarray(states.counts), np.asarray(states.values)


def _start(env, key=0):
    """A fresh episode of `env` with the hand-made pool and values in place of the drawn ones."""
    state, _ = _compiled(env)[0](jax.random.PRNGKey(key))
    return state.replace(counts=jnp.asarray(COUNTS, jnp.int32), values=jnp.asarray(VALUES, jnp.int32))


def _play(env, state, utterances):
    """Play `utterances` in turn; the TimeSteps after each."""
    step, out = _compiled(env)[1], []
    for i, text in enumerate(utterances):
        state, ts = step(state, _say(text), jax.random.PRNGKey(100 + i))
        out.append(ts)
    return state, out


@pytest.mark.parametrize("mode, final", [("general", [5.0, 8.0]), ("zero_sum", [-3.0, 3.0])])
def test_a_scripted_dialogue_scores_the_hand_computed_deal(mode, final):
    """0 proposes to keep 1 2 0, 1 counters with 0 2 3, 0 proposes 1 1 0, 1 accepts: player 0
    keeps 1 book and 1 hat (3 + 2 = 5), player 1 gets 1 hat and 3 balls (2 + 3 * 2 = 8);
    zero-sum: 5 - 8 = -3 and 8 - 5 = 3."""
    env = _env(reward=mode)
    state = _start(env)
    assert env.render_text(state, 0) == "negotiation , items : 1 2 3 , my values : 3 2 1 , turn 1 of 6 , your move"
    assert env.render_text(state, 1) == "negotiation , items : 1 2 3 , my values : 0 2 2 , turn 1 of 6 , wait"
    state, steps = _play(env, state, ["propose 1 2 0", "propose 0 2 3", "propose 1 1 0", "accept"])
    assert [ts.active.tolist() for ts in steps] == [[False, True], [True, False], [False, True], [False, False]]
    assert [bool(ts.done) for ts in steps] == [False, False, False, True]
    assert [ts.reward.tolist() for ts in steps] == [[0.0, 0.0]] * 3 + [final]
    assert [bool(ts.info["deal"]) for ts in steps] == [False, False, False, True]
    assert not any(bool(ts.info["invalid_utterance"].any()) for ts in steps)
    assert not bool(steps[-1].truncated)
    assert VOCAB.decode(steps[2].obs[1]) == ("negotiation , items : 1 2 3 , my values : 0 2 2 , turn 4 of 6 , "
                                             "they propose 1 2 0 , i propose 0 2 3 , they propose 1 1 0 , "
                                             "your move")
    assert VOCAB.decode(steps[3].obs[0]).endswith("they propose 0 2 3 , i propose 1 1 0 , they accept , game over")
    assert VOCAB.decode(steps[3].obs[1]).endswith("i propose 0 2 3 , they propose 1 1 0 , i accept , game over")
    # once over, nothing moves: no reward, no invalid utterance, the same state
    after, ts = _compiled(env)[1](state, _say("bet"), jax.random.PRNGKey(9))
    assert ts.reward.tolist() == [0.0, 0.0] and not bool(ts.info["invalid_utterance"].any())
    assert int(after.offers) == 3 and int(after.outcome) == int(state.outcome) and bool(ts.done)


def test_the_best_split_proposed_and_accepted_makes_the_most_joint_value():
    """`best_split` is the brute-force maximum of joint value over every split, on the
    hand-made pool (3 + 2 * 2 + 3 * 2 = 13, the hats to player 0 on the tie) and on
    drawn ones; proposed and accepted, it pays exactly that much in all."""
    assert best_split(COUNTS, *VALUES) == (13, (1, 2, 0))
    env = _env()
    drawn_counts, drawn_values = _drawn()
    for counts, (v0, v1) in [(COUNTS, VALUES)] + list(zip(drawn_counts[:50], drawn_values[:50])):
        splits = np.asarray(list(itertools.product(*(range(c + 1) for c in counts))))
        joint = splits @ np.asarray(v0) + (np.asarray(counts) - splits) @ np.asarray(v1)
        best, keep = best_split(counts, v0, v1)
        assert best == joint.max() and np.dot(keep, v0) + np.dot(np.subtract(counts, keep), v1) == best
    _, steps = _play(env, _start(env), ["propose 1 2 0", "accept"])
    assert steps[-1].reward.tolist() == [7.0, 6.0]          # 3 + 2 * 2, and 3 balls at 2: 13 in all


@pytest.mark.parametrize("utterance", ["accept", "propose 2 0 0", "propose 0 0 4", "propose 1 2", "bet", ""])
def test_an_invalid_utterance_forfeits(utterance):
    """Accepting with no standing proposal, keeping more than the pool holds (2 books of 1;
    4 balls of 3), an unfinished proposal, a word that is no move,
    silence: the speaker forfeits (-1), the other gets no_deal, and it is counted."""
    env = _env(no_deal=0.5)
    _, (ts,) = _play(env, _start(env), [utterance])
    assert bool(ts.done) and ts.reward.tolist() == [-1.0, 0.5] and not bool(ts.info["deal"])
    assert ts.info["invalid_utterance"].tolist() == [True, False]
    assert VOCAB.decode(ts.obs[0]).endswith("turn 1 of 6 , i forfeited , game over")
    assert VOCAB.decode(ts.obs[1]).endswith("turn 1 of 6 , they forfeited , game over")


def test_forfeits_in_zero_sum_and_a_random_move_for_an_invalid_one():
    zero = _env(reward="zero_sum", no_deal=0.5)
    _, (_, ts) = _play(zero, _start(zero), ["propose 1 1 1", "propose 3 0 0"])       # player 1 forfeits
    assert bool(ts.done) and ts.reward.tolist() == [1.5, -1.5]                     # 0.5 - (-1), and its opposite
    assert ts.info["invalid_utterance"].tolist() == [False, True]
    lenient = _env(invalid="random")
    start = _start(lenient)
    legal = np.asarray(lenient.legal_moves(start))
    assert legal.sum() == 2 * 3 * 4 and not legal[-1]        # every split of 1, 2, 3 items; no accept yet
    for k in range(5):
        state, ts = _compiled(lenient)[1](start, _say("accept"), jax.random.PRNGKey(k))
        assert not bool(ts.done) and ts.info["invalid_utterance"].tolist() == [True, False]
        assert int(state.offers) == 1 and bool(jnp.all(state.history[0] <= state.counts))   # a legal proposal
        assert bool(ts.active[1]) and ts.reward.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("mode, final", [("general", [0.5, 0.5]), ("zero_sum", [0.0, 0.0])])
def test_no_agreement_ends_the_game_at_exactly_max_turns(mode, final):
    env = _env(max_turns=4, reward=mode, no_deal=0.5)
    assert env.spec.max_steps == 4
    _, steps = _play(env, _start(env), ["propose 1 2 3", "propose 1 2 3", "propose 0 0 0", "propose 1 0 0"])
    assert [bool(ts.done) for ts in steps] == [False, False, False, True]
    assert [ts.reward.tolist() for ts in steps] == [[0.0, 0.0]] * 3 + [final]
    assert not bool(steps[-1].truncated) and not bool(steps[-1].info["deal"])
    assert VOCAB.decode(steps[-1].obs[0]) == (
        "negotiation , items : 1 2 3 , my values : 3 2 1 , turn 4 of 4 , i propose 1 2 3 , they propose 1 2 3 , "
        "i propose 0 0 0 , they propose 1 0 0 , no deal , game over")
    # the last turn may still accept: player 0 keeping nothing leaves player 1 all it values, 10
    _, steps = _play(env, _start(env), ["propose 1 2 3", "propose 1 2 3", "propose 0 0 0", "accept"])
    assert bool(steps[-1].done) and bool(steps[-1].info["deal"])
    assert steps[-1].reward.tolist() == ([0.0, 10.0] if mode == "general" else [-10.0, 10.0])


def test_pools_and_values_are_drawn_from_the_key():
    env = _env()
    counts, values = _drawn()
    # every pool of 1 to 4 of each type but (3, 3, 3) and (4, 4, 4), which no values price at 10
    pools = {tuple(c) for c in itertools.product(range(1, 5), repeat=3)} - {(3, 3, 3), (4, 4, 4)}
    assert {tuple(int(k) for k in c) for c in counts} == pools
    assert np.all(np.einsum("bpk,bk->bp", values, counts) == 10)           # each player values the pool at 10
    assert values.min() == 0 and not np.array_equal(values[:, 0], values[:, 1])     # drawn for each player
    again, _ = _compiled(env)[0](jax.random.PRNGKey(7))
    first, _ = _compiled(env)[0](jax.random.PRNGKey(7))
    assert np.array_equal(again.counts, first.counts) and np.array_equal(again.values, first.values)
    assert len({(tuple(c), tuple(v.reshape(-1))) for c, v in zip(counts[:10], values[:10])}) == 10
    # (1, 1, 1) items valued at 10: C(12, 2) = 66 value vectors; (2, 2, 2) items never sum to 9;
    # one type of 2 items valued at 10: 5 each, always
    assert len(value_vectors((1, 1, 1), 10)) == 66 and len(value_vectors((2, 2, 2), 9)) == 0
    one = _env(types=1, min_count=2, max_count=2)
    state, ts = _compiled(one)[0](jax.random.PRNGKey(1))
    assert state.values.tolist() == [[5], [5]] and VOCAB.decode(ts.obs[0]).startswith(
        "negotiation , items : 2 , my values : 5 , turn 1 of 6")
    assert one.move_texts == ("propose 0", "propose 1", "propose 2", "accept")


def test_moves_are_an_explicit_table():
    env = _env()
    assert len(env.move_texts) == 5 ** 3 + 1 and env.move_texts[0] == "propose 0 0 0"
    assert env.move_texts[-2:] == ("propose 4 4 4", "accept")
    assert env.speech_words() == ("propose", "0", "1", "2", "3", "4", "accept")
    assert env.spec.turn_based and env.views_are_states and env.spec.obs_space.shape == (61,)


@pytest.mark.parametrize("kwargs, message", [
    ({"max_turns": 0}, "max_turns=0"), ({"max_turns": 1}, "max_turns=1"), ({"max_turns": 21}, "max_turns=21"),
    ({"types": 0}, "types=0"), ({"types": 4}, "types=4"),
    ({"min_count": 0}, "min_count=0"), ({"max_count": 7}, "max_count=7"),
    ({"min_count": 3, "max_count": 2}, "min_count=3, max_count=2"),
    ({"total": 0}, "total=0"), ({"total": 21}, "total=21"),
    ({"total": 9, "min_count": 2, "max_count": 2}, "total=9: no item counts"),
    ({"no_deal": -1.0}, "no_deal=-1.0"), ({"no_deal": float("nan")}, "no_deal=nan"),
    ({"max_tokens": 3}, "max_tokens=3 is shorter than the longest move"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        coplay.make("text:negotiation", **kwargs)


def test_unknown_modes_are_refused_with_the_choices():
    with pytest.raises(UnknownNameError, match="'zerosum'.*general, zero_sum"):
        coplay.make("text:negotiation", reward="zerosum")
    with pytest.raises(UnknownNameError, match="'quit'.*forfeit, random"):
        coplay.make("text:negotiation", invalid="quit")
