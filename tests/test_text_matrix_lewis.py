"""Two small games in words with exact answers: the repeated prisoner's dilemma and stag hunt
with cheap talk (`text:matrix_talk`), and the Lewis signalling game (`text:lewis`)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.text import VOCAB

TEXTS = {   # each game's messages and moves, in its payoff table's action order
    "prisoners_dilemma": (("i will cooperate", "i will defect"), ("cooperate", "defect")),
    "stag_hunt": (("i will hunt stag", "i will hunt hare"), ("stag", "hare")),
}
PAYOFFS = {  # [a0][a1] -> (player 0's payoff, player 1's payoff), written out by hand
    "prisoners_dilemma": [[(3, 3), (0, 5)], [(5, 0), (1, 1)]],
    "stag_hunt": [[(4, 4), (0, 3)], [(3, 0), (3, 3)]],
}


def _say(*utterances: str, length: int) -> jnp.ndarray:
    return jnp.asarray(np.stack([VOCAB.encode(u, length, end=len(u.split()) < length) for u in utterances]))


def _views(ts) -> list[str]:
    return [VOCAB.decode(v) for v in ts.obs]


# ----- the repeated matrix game with cheap talk ----------------------------------------------------------


def test_matrix_talk_a_scripted_dialogue_reads_and_pays_exactly():
    env = coplay.make("text:matrix_talk")                      # the prisoner's dilemma, 3 rounds
    step = jax.jit(env.step)
    assert env.spec.max_steps == 6 and not env.spec.turn_based and env.views_are_states
    assert env.speech_words() == ("i", "will", "cooperate", "defect")
    script = [("i will cooperate", "i will cooperate"), ("cooperate", "cooperate"),    # (3, 3)
              ("i will cooperate", "i will cooperate"), ("cooperate", "defect"),       # (0, 5): a lie
              ("i will defect", "i will cooperate"), ("defect", "defect")]             # (1, 1)
    rewards = [(0, 0), (3, 3), (0, 0), (0, 5), (0, 0), (1, 1)]
    state, ts = env.reset(jax.random.PRNGKey(0))
    assert _views(ts) == ["prisoners dilemma , 3 rounds , round 1 : your message"] * 2
    total = np.zeros(2)
    for i, (said, reward) in enumerate(zip(script, rewards)):
        assert not bool(ts.done) and ts.active.tolist() == [True, True]
        state, ts = step(state, _say(*said, length=5), jax.random.PRNGKey(i))
        assert ts.reward.tolist() == list(reward) and not ts.info["invalid_utterance"].any()
        total += np.asarray(ts.reward)
        if i == 2:
            assert _views(ts)[1] == (
                "prisoners dilemma , 3 rounds , round 1 : you said i will cooperate , they said i will cooperate , "
                "you did cooperate , they did cooperate , round 2 : you said i will cooperate , "
                "they said i will cooperate , your move")
    assert bool(ts.done) and ts.active.tolist() == [False, False] and total.tolist() == [4.0, 9.0]
    assert _views(ts)[0].endswith("round 3 : you said i will defect , they said i will cooperate , "
                                  "you did defect , they did defect , game over")
    assert ts.obs.shape == (2, env.spec.obs_space.shape[0]) and int((ts.obs[0] != 0).sum()) == ts.obs.shape[1]
    # the stag hunt, 2 rounds: (stag, hare) then (stag, stag) -> (0 + 4, 3 + 4)
    env = coplay.make("text:matrix_talk", game="stag_hunt", rounds=2)
    step = jax.jit(env.step)
    state, ts = env.reset(jax.random.PRNGKey(0))
    total = np.zeros(2)
    for i, said in enumerate([("i will hunt stag", "i will hunt stag"), ("stag", "hare"),
                              ("i will hunt hare", "i will hunt stag"), ("stag", "stag")]):
        state, ts = step(state, _say(*said, length=5), jax.random.PRNGKey(i))
        total += np.asarray(ts.reward)
        assert bool(ts.done) == (i == 3)
    assert total.tolist() == [4.0, 7.0]
    assert _views(ts)[1].startswith("stag hunt , 2 rounds , round 1 : you said i will hunt stag , they said i will "
                                    "hunt stag , you did hare , they did stag , round 2 :")


def _every_episode(game: str, rounds: int) -> np.ndarray:
    """Rewards `[4**R, 4**R, 2R, 2]` of every episode through the environment: each sequence of
    joint messages (first axis) with each sequence of joint moves (second axis), step by step;
    joint choice j is (j // 2, j % 2) in the payoff table's order."""
    env = coplay.make("text:matrix_talk", game=game, rounds=rounds)
    messages, moves = (_say(*texts, length=5) for texts in TEXTS[game])
    joint = jnp.asarray(list(itertools.product(range(2), repeat=2)))                     # [4, 2]
    seqs = joint[jnp.asarray(list(itertools.product(range(4), repeat=rounds)))]         # [4**R, R, 2]
    key = jax.random.PRNGKey(0)

    def episode(talk, acts):
        steps = jnp.stack([messages[talk], moves[acts]], axis=1).reshape(2 * rounds, 2, -1)   # talk, act, ...
        state, _ = env.reset(key)

        def body(state, utterances):
            state, ts = env.step(state, utterances, key)
            return state, (ts.reward, ts.done, ts.info["invalid_utterance"])

        _, (reward, done, invalid) = jax.lax.scan(body, state, steps)
        return reward, done, invalid

    every = jax.vmap(jax.vmap(episode, in_axes=(None, 0)), in_axes=(0, None))
    reward, done, invalid = jax.jit(every)(seqs, seqs)
    assert not bool(invalid.any())
    assert bool(jnp.all(done[..., -1])) and not bool(done[..., :-1].any())   # done after exactly 2R steps
    return np.asarray(reward)


@pytest.mark.parametrize("game", ["prisoners_dilemma", "stag_hunt"])
def test_matrix_talk_pays_the_table_on_act_steps_and_talk_changes_nothing(game):
    rewards = _every_episode(game, 2)                     # 16 message sequences x 16 move sequences
    assert np.all(rewards[:, :, 0::2] == 0)               # talk steps pay nothing
    assert np.all(rewards == rewards[:1])                 # whatever was said, the same payoffs
    table = np.asarray(PAYOFFS[game], np.float32)         # [a0, a1, 2]
    for m, acts in enumerate(itertools.product(range(4), repeat=2)):
        for k, j in enumerate(acts):
            assert rewards[0, m, 2 * k + 1].tolist() == table[j // 2, j % 2].tolist()


def _solve_by_backward_induction(rewards: np.ndarray, rounds: int):
    """Backward induction over the joint-move histories (`rewards [4**R, 2R, 2]` of every move
    sequence, talk fixed): at every history, each player's move that strictly dominates given
    the equilibrium continuation (None where neither does), and the root's value."""
    seqs = list(itertools.product(range(4), repeat=rounds))
    row = {s: i for i, s in enumerate(seqs)}
    dominant: dict[tuple, tuple] = {}

    def value(history: tuple) -> np.ndarray:
        k = len(history)
        if k == rounds:
            return np.zeros(2)
        # q[a0, a1] = the stage reward of (a0, a1) after `history` plus the value of what follows
        q = np.zeros((2, 2, 2))
        for j in range(4):
            episode = row[history + (j,) + (0,) * (rounds - k - 1)]
            q[j // 2, j % 2] = rewards[episode, 2 * k + 1] + value(history + (j,))
        best = (next((a for a in (0, 1) if all(q[a, b, 0] > q[1 - a, b, 0] for b in (0, 1))), None),
                next((a for a in (0, 1) if all(q[b, a, 1] > q[b, 1 - a, 1] for b in (0, 1))), None))
        dominant[history] = best
        assert None not in best, f"no strictly dominant move after {history}"
        return q[best[0], best[1]]

    root = value(())
    return dominant, root


@pytest.mark.parametrize("rounds", [1, 3])
def test_matrix_talk_always_defect_is_the_dilemmas_unique_subgame_perfect_equilibrium(rounds):
    """One round: defecting pays more against either move (5 > 3, 1 > 0). Repeated: at every
    history defecting strictly dominates given the continuation, so always-defect is the unique
    subgame-perfect equilibrium, worth exactly rounds x 1 (mutual defection) to each."""
    rewards = _every_episode("prisoners_dilemma", rounds)
    if rounds == 1:
        pay = rewards[0, :, 1]                                                # [joint (a0, a1), player]
        assert pay[2, 0] > pay[0, 0] and pay[3, 0] > pay[1, 0]                # player 0: 5 > 3, 1 > 0
        assert pay[1, 1] > pay[0, 1] and pay[3, 1] > pay[2, 1]                # player 1 alike
        assert (pay[2, 0], pay[0, 0], pay[3, 0], pay[1, 0]) == (5, 3, 1, 0)
    for talk in (0, len(rewards) - 1):                                       # said "cooperate" / "defect" always
        dominant, root = _solve_by_backward_induction(rewards[talk], rounds)
        assert len(dominant) == sum(4 ** k for k in range(rounds))            # every history was solved
        assert set(dominant.values()) == {(1, 1)}                             # defect, defect everywhere
        assert root.tolist() == [float(rounds), float(rounds)]                # rounds x (1, 1)
    # for contrast, cooperating throughout pays rounds x 3 to each
    assert rewards[0, 0].sum(0).tolist() == [3.0 * rounds, 3.0 * rounds]


def test_matrix_talk_the_stag_hunt_has_two_equilibria_and_stag_pays_most():
    pay = _every_episode("stag_hunt", 1)[0, :, 1].reshape(2, 2, 2)              # [a0, a1, player]
    nash = {(a, b) for a in (0, 1) for b in (0, 1)
            if pay[a, b, 0] >= pay[1 - a, b, 0] and pay[a, b, 1] >= pay[a, 1 - b, 1]}
    assert nash == {(0, 0), (1, 1)}                                              # (stag, stag), (hare, hare)
    assert pay[0, 0].tolist() == [4.0, 4.0] and pay[1, 1].tolist() == [3.0, 3.0]   # stag is payoff-dominant


def test_matrix_talk_an_invalid_utterance_forfeits_or_is_replaced_at_random():
    env = coplay.make("text:matrix_talk")
    step = jax.jit(env.step)
    state, ts = env.reset(jax.random.PRNGKey(0))
    _, after = step(state, _say("i will cooperate", "cooperate", length=5), jax.random.PRNGKey(1))  # a move
    assert bool(after.done) and after.reward.tolist() == [0.0, -1.0]                                  # in talk
    assert after.info["invalid_utterance"].tolist() == [False, True]
    assert _views(after) == ["prisoners dilemma , 3 rounds , round 1 : game over"] * 2
    total = np.zeros(2)
    for i, said in enumerate([("i will defect", "i will cooperate"), ("defect", "cooperate"),    # (5, 0)
                              ("i will defect", "i will defect")]):
        state, ts = step(state, _say(*said, length=5), jax.random.PRNGKey(i))
        total += np.asarray(ts.reward)
    for said, reward, invalid in [(("i will defect", "defect"), [-1.0, 0.0], [True, False]),
                                  (("bet", "defect defect"), [-1.0, -1.0], [True, True])]:
        over, after = step(state, _say(*said, length=5), jax.random.PRNGKey(5))
        assert bool(after.done) and after.reward.tolist() == reward
        assert after.info["invalid_utterance"].tolist() == invalid
        assert (total + np.asarray(after.reward)).tolist() == [5.0 + reward[0], 0.0 + reward[1]]  # round 1 stands
        assert _views(after)[0].endswith("round 2 : you said i will defect , they said i will defect , game over")
        _, later = step(over, _say("defect", "defect", length=5), jax.random.PRNGKey(6))      # over: nothing
        assert bool(later.done) and later.reward.tolist() == [0.0, 0.0] and _views(later) == _views(after)
    lenient = coplay.make("text:matrix_talk", invalid="random")
    step = jax.jit(lenient.step)
    state, ts = lenient.reset(jax.random.PRNGKey(0))
    state, ts = step(state, _say("bet", "i will defect", length=5), jax.random.PRNGKey(1))
    assert not bool(ts.done) and ts.info["invalid_utterance"].tolist() == [True, False]
    assert int(state.said[0, 0]) in (0, 1) and int(state.said[0, 1]) == 1
    state, ts = step(state, _say("defect", "i will defect", length=5), jax.random.PRNGKey(2))
    assert ts.info["invalid_utterance"].tolist() == [False, True] and int(state.did[0, 1]) in (0, 1)
    assert ts.reward.tolist() in ([5.0, 0.0], [1.0, 1.0])                      # defect against either move


# ----- the Lewis signalling game -------------------------------------------------------------------------


def test_lewis_a_game_read_and_played_in_words():
    env = coplay.make("text:lewis", states=4)
    assert env.spec.turn_based and env.spec.teams == (0, 0) and env.spec.max_steps == 2
    assert env.speech_words() == ("x", "o", "_", "/", "choose", "1", "2", "3", "4")
    draw = jax.jit(jax.vmap(lambda key: env.reset(key)[0].obj))
    objects = set(np.asarray(draw(jax.random.split(jax.random.PRNGKey(0), 64))).tolist())
    step = jax.jit(env.step)
    assert objects == {0, 1, 2, 3}                                              # the key draws the object
    for choice, reward in ((3, 1.0), (1, 0.0)):
        state, ts = env.start(2)                                                # object 3
        assert _views(ts) == ["signal game , you are the sender , object 3 , your move",
                              "signal game , you are the receiver , wait"]
        assert ts.active.tolist() == [True, False]
        state, ts = step(state, _say("/", "choose 1", length=3), jax.random.PRNGKey(1))   # the sender's read
        assert ts.active.tolist() == [False, True] and ts.reward.tolist() == [0.0, 0.0] and not bool(ts.done)
        assert _views(ts) == ["signal game , you are the sender , object 3 , you said / , wait",
                              "signal game , you are the receiver , they said / , your move"]
        state, ts = step(state, _say("x", f"choose {choice}", length=3), jax.random.PRNGKey(2))
        assert bool(ts.done) and ts.reward.tolist() == [reward, reward] and ts.active.tolist() == [False, False]
        assert _views(ts)[1] == f"signal game , you are the receiver , they said / , you chose {choice} , game over"
        assert env.render_text(state, 0) == _views(ts)[0]


@pytest.mark.parametrize("k", [3, 4])
def test_lewis_expected_rewards_are_exact_by_enumeration(k):
    """With the object uniform: every signalling system earns exactly 1; every pooling sender
    earns exactly 1/K whatever the receiver; a sender using d signals earns d/K against its best
    receiver; the uniformly random pair earns 1/K. Each from every (object, signal, choice)
    episode played through the environment, no sampling."""
    env = coplay.make("text:lewis", states=k)
    grid = np.asarray(list(itertools.product(range(k), repeat=3)))             # (object, signal, choice)
    rewards = np.asarray(jax.jit(jax.vmap(env.outcome))(*(jnp.asarray(c) for c in grid.T)))
    assert np.all(rewards[:, 0] == rewards[:, 1])                               # one shared reward
    won = rewards[:, 0].reshape(k, k, k).astype(int)                            # [object, signal, choice]
    assert np.array_equal(won, np.broadcast_to(np.eye(k, dtype=int)[:, None, :], (k, k, k)))

    def expected(sender, receiver) -> Fraction:                                 # object -> signal -> choice
        return Fraction(sum(int(won[s, sender[s], receiver[sender[s]]]) for s in range(k)), k)

    systems = list(itertools.permutations(range(k)))
    assert len(systems) == math.factorial(k)
    for sender in systems:
        assert expected(sender, np.argsort(sender)) == 1                        # the receiver inverts the map
    receivers = np.asarray(list(itertools.product(range(k), repeat=k)))         # [K**K, signal] -> choice
    for sender in itertools.product(range(k), repeat=k):
        signals = np.asarray(sender)
        wins = won[np.arange(k), signals, receivers[:, signals]].sum(1)         # [receiver]: objects guessed
        if len(set(sender)) == 1:                                                # pooling: 1/K, any receiver
            assert set(wins.tolist()) == {1}
        assert Fraction(int(wins.max()), k) == Fraction(len(set(sender)), k)
    assert Fraction(int(won.sum()), k ** 3) == Fraction(1, k)                   # uniform signal and choice


def test_lewis_an_invalid_utterance_forfeits_or_is_replaced_at_random():
    env = coplay.make("text:lewis")
    state, ts = env.start(0)
    for speaker, said in ((0, ("choose 1", "")), (0, ("x o", "")), (1, None)):
        if said is None:      # the receiver names no choice after a valid signal
            s, _ = env.step(state, _say("x", "", length=3), jax.random.PRNGKey(0))
            s, after = env.step(s, _say("x", "x", length=3), jax.random.PRNGKey(1))
        else:
            s, after = env.step(state, _say(*said, length=3), jax.random.PRNGKey(1))
        assert bool(after.done) and after.reward.tolist() == [-1.0 if p == speaker else 0.0 for p in (0, 1)]
        assert after.info["invalid_utterance"].tolist() == [speaker == 0, speaker == 1]
        assert _views(after)[speaker].endswith("game over")
    lenient = coplay.make("text:lewis", invalid="random")
    state, ts = lenient.start(1)
    state, ts = lenient.step(state, _say("bet", "", length=3), jax.random.PRNGKey(3))
    assert not bool(ts.done) and ts.info["invalid_utterance"].tolist() == [True, False]
    assert int(state.signal) in (0, 1, 2) and ts.active.tolist() == [False, True]
    state, ts = lenient.step(state, _say("", "choose 9", length=3), jax.random.PRNGKey(4))
    assert bool(ts.done) and int(state.choice) in (0, 1, 2)
    assert ts.reward.tolist() == [float(int(state.choice) == 1)] * 2


def test_bad_settings_are_refused_with_the_valid_choices():
    with pytest.raises(UnknownNameError, match="'rps'.*prisoners_dilemma, stag_hunt"):
        coplay.make("text:matrix_talk", game="rps")
    for rounds in (0, 21, 2.5):
        with pytest.raises(ConfigError, match=f"rounds.*{rounds}"):
            coplay.make("text:matrix_talk", rounds=rounds)
    for rounds in (0, 21):
        with pytest.raises(ConfigError, match=f"rounds={rounds}.*from 1 to 20"):
            coplay.make("text:matrix_talk", rounds=rounds)
    with pytest.raises(ConfigError, match="max_tokens=3 is shorter"):
        coplay.make("text:matrix_talk", game="stag_hunt", max_tokens=3)            # "i will hunt stag"
    for states in (1, 7):
        with pytest.raises(ConfigError, match=f"states={states}.*from 2 to 6.*x, o, _, /, a, an"):
            coplay.make("text:lewis", states=states)
    with pytest.raises(ConfigError, match="max_tokens=1 is shorter"):
        coplay.make("text:lewis", max_tokens=1)
    for name in ("text:matrix_talk", "text:lewis"):
        with pytest.raises(UnknownNameError, match="'quit'.*forfeit, random"):
            coplay.make(name, invalid="quit")
