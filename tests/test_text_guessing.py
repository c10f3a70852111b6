"""Guessing games in words (twenty questions against a table, guess the number): the
environment answers exactly, a scripted questioner that reads only its view reaches
the optimum for every secret, and brute force over every strategy shows that no
strategy does better."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.text import VOCAB

# The table as the module's doc states it: object k is the binary code of k - 1,
# bit 0 red (else blue), bit 1 big (small), bit 2 round (square), bit 3 soft (hard), bit 4 heavy (light).
PAIRS = (("red", "blue"), ("big", "small"), ("round", "square"), ("soft", "hard"), ("heavy", "light"))
WORDS = tuple(w for pair in PAIRS for w in pair)


def _has(k: int, word: str) -> bool:
    """Whether object k (1-based) is `word`."""
    bit = next(i for i, pair in enumerate(PAIRS) if word in pair)
    return bool((k - 1) >> bit & 1) == (word == PAIRS[bit][0])


def _say(env, text: str) -> jnp.ndarray:
    t = env.spec.action_space.shape[0]
    return jnp.asarray(VOCAB.encode(text, t, end=len(text.split()) < t))[None]


def _view(ts) -> str:
    return VOCAB.decode(ts.obs[0])


# ----- twenty questions ----------------------------------------------------------------------------


def test_the_table_is_the_documented_code_and_the_secret_is_drawn_from_the_key():
    env = coplay.make("text:twenty_questions", objects=20)
    assert env.move_texts[:3] == ("is it red ?", "is it blue ?", "is it big ?")
    assert env.move_texts[-1] == "guess object 20" and len(env.move_texts) == 10 + 20
    for k, words in [(1, "blue small square hard light"), (6, "red small round hard light"),
                     (16, "red big round soft light"), (17, "blue small square hard heavy")]:
        assert " ".join(w for w, has in zip(WORDS, env.table[k - 1]) if has) == words
    np.testing.assert_array_equal(env.table, [[_has(k, w) for w in WORDS] for k in range(1, 21)])
    assert len({row.tobytes() for row in env.table}) == 20                     # every object told apart
    default = coplay.make("text:twenty_questions")
    secrets = jax.jit(jax.vmap(lambda k: default.reset(k)[0].secret))(jax.random.split(jax.random.PRNGKey(0), 256))
    assert set(np.asarray(secrets).tolist()) == set(range(16))


def _halving_questioner(view: str, objects: int) -> str:
    """Reads only the view: keeps the objects consistent with the answers, guesses when
    one is left, else asks about the first attribute that splits them most evenly."""
    consistent = set(range(1, objects + 1))
    for entry in view.split(" , ")[1:-1]:
        _, _, word, _, answer = entry.split()
        consistent = {k for k in consistent if _has(k, word) == (answer == "yes")}
    if len(consistent) == 1:
        return f"guess object {consistent.pop()}"
    word = min(WORDS, key=lambda w: max(sum(_has(k, w) for k in consistent), sum(not _has(k, w) for k in consistent)))
    return f"is it {word} ?"


@pytest.mark.parametrize("objects", [16, 5, 20])
def test_the_halving_questioner_names_every_secret_after_ceil_log2_n_questions(objects):
    env = coplay.make("text:twenty_questions", objects=objects)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    fewest = math.ceil(math.log2(objects))
    asked = []
    for secret in range(objects):
        state, ts = reset(jax.random.PRNGKey(0))
        state = state.replace(secret=jnp.int32(secret))
        moves = 0
        while not bool(ts.done):
            state, ts = step(state, _say(env, _halving_questioner(env.render_text(state, 0), objects)),
                             jax.random.PRNGKey(moves))
            moves += 1
        questions = moves - 1
        assert _view(ts).endswith(f"guess object {secret + 1} correct , game over")
        assert bool(ts.info["win"][0]) and not bool(ts.info["invalid_utterance"][0])
        assert float(ts.reward[0]) == pytest.approx(1 - 0.05 * questions) and int(state.count) == questions
        asked.append(questions)
    assert max(asked) == fewest                                       # ceil(log2 N), reached
    if objects == 16:                                                 # a power of two: for every secret
        assert asked == [fewest] * objects


@functools.cache
def _fewest_sure(objects: frozenset) -> float:
    """Brute force over every adaptive questioning strategy: the fewest questions after
    which the answers leave one object, for every secret in `objects`."""
    if len(objects) <= 1:
        return 0
    splits = [(frozenset(k for k in objects if _has(k, w)), frozenset(k for k in objects if not _has(k, w)))
              for w in WORDS]
    return 1 + min((max(_fewest_sure(yes), _fewest_sure(no)) for yes, no in splits if yes and no), default=math.inf)


@functools.cache
def _best_expected(objects: frozenset, asked: int, cost: float, limit: int) -> float:
    """Brute force: the greatest expected return from here, over every strategy (questions and
    guesses, gambles included), the secret uniform over `objects`; a wrong guess earns 0."""
    n = len(objects)
    best = (1 - cost * asked) / n                                     # guess one of them
    if asked < limit:
        for w in WORDS:
            yes = frozenset(k for k in objects if _has(k, w))
            value = sum(len(part) / n * _best_expected(part, asked + 1, cost, limit)
                        for part in (yes, objects - yes) if part)
            best = max(best, value)
    return best


@pytest.mark.parametrize("objects", [2, 3, 5, 8, 9, 16, 17, 20])
def test_no_strategy_is_sure_of_the_object_with_fewer_questions(objects):
    assert _fewest_sure(frozenset(range(1, objects + 1))) == math.ceil(math.log2(objects))


def test_the_halving_questioners_return_is_the_greatest_expected_return():
    """Defaults (16 objects, cost 0.05, 8 questions): 1 - 4 x 0.05 = 0.8, which the halving
    questioner earns in every game (above); a costlier question makes gambling pay."""
    assert _best_expected(frozenset(range(1, 17)), 0, 0.05, 8) == pytest.approx(0.8, abs=1e-12)
    # with 0.3 a question, ask two and guess among the four left: (1 - 2 x 0.3) / 4 = 0.1 beats
    # asking 0, 1 or 3 (1/16, 0.7/8, 0.1/2) and every sure strategy (1 - 4 x 0.3 < 0)
    assert _best_expected(frozenset(range(1, 17)), 0, 0.3, 8) == pytest.approx(0.1, abs=1e-12)


def test_twenty_questions_views_rewards_and_invalid_utterances():
    env = coplay.make("text:twenty_questions")
    step = jax.jit(env.step)
    start, ts = env.reset(jax.random.PRNGKey(0))
    start = start.replace(secret=jnp.int32(5))                       # object 6: red small round hard light
    assert _view(ts) == "twenty questions , your move" and env.speech_words()[:4] == ("is", "it", "red", "?")
    assert ts.obs.shape == (1, 3 + 6 * 8 + 7) and bool(ts.active[0])
    state, ts = step(start, _say(env, "is it red ?"), jax.random.PRNGKey(1))
    state, ts = step(state, _say(env, "is it big ?"), jax.random.PRNGKey(2))
    assert _view(ts) == "twenty questions , is it red ? yes , is it big ? no , your move"
    assert ts.reward.tolist() == [0.0] and not bool(ts.done)
    right, ts = step(state, _say(env, "guess object 6"), jax.random.PRNGKey(3))
    assert _view(ts) == "twenty questions , is it red ? yes , is it big ? no , guess object 6 correct , game over"
    assert float(ts.reward[0]) == pytest.approx(0.9) and bool(ts.done) and not bool(ts.active[0])
    _, ts = step(state, _say(env, "guess object 7"), jax.random.PRNGKey(3))
    assert _view(ts).endswith("guess object 7 wrong , game over") and ts.reward.tolist() == [0.0]
    assert bool(ts.done) and ts.info["win"].tolist() == [False]
    _, after = step(right, _say(env, "guess object 6"), jax.random.PRNGKey(4))   # the game is over
    assert after.reward.tolist() == [0.0] and not bool(after.info["invalid_utterance"][0])
    assert env.render_text(state) == ("twenty questions, secret: object 6 (red small round hard light); "
                                      "asked: red, big; 6 questions left")
    for nonsense in ("bet", "is it", "guess object 17", "is it red ? yes"):
        _, ts = step(state, _say(env, nonsense), jax.random.PRNGKey(5))
        assert bool(ts.done) and ts.reward.tolist() == [-1.0] and ts.info["invalid_utterance"].tolist() == [True]
        assert _view(ts) == "twenty questions , is it red ? yes , is it big ? no , forfeited , game over"
    one = coplay.make("text:twenty_questions", max_questions=1)
    s, ts = one.reset(jax.random.PRNGKey(0))
    s, ts = one.step(s, _say(one, "is it soft ?"), jax.random.PRNGKey(1))
    _, ts = one.step(s, _say(one, "is it soft ?"), jax.random.PRNGKey(2))   # none left: only a guess
    assert ts.reward.tolist() == [-1.0] and ts.info["invalid_utterance"].tolist() == [True]
    lenient = coplay.make("text:twenty_questions", max_questions=0, invalid="random")
    s, ts = lenient.reset(jax.random.PRNGKey(0))
    assert _view(ts) == "twenty questions , your move" and ts.obs.shape == (1, 10)
    s, ts = lenient.step(s, _say(lenient, "is it red ?"), jax.random.PRNGKey(1))   # a random guess instead
    assert bool(ts.done) and ts.info["invalid_utterance"].tolist() == [True] and int(s.guess) >= 0
    assert ts.reward.tolist() == [float(int(s.guess) == int(s.secret))] and " guess object " in _view(ts)


def test_bad_twenty_questions_are_refused():
    for kwargs, match in [({"objects": 1}, "objects=1"), ({"objects": 21}, "objects=21"),
                          ({"max_questions": -1}, "max_questions=-1"), ({"max_questions": 21}, "max_questions=21"),
                          ({"question_cost": -0.1}, "question_cost=-0.1"), ({"max_tokens": 3}, "max_tokens=3")]:
        with pytest.raises(ConfigError, match=match):
            coplay.make("text:twenty_questions", **kwargs)
    with pytest.raises(UnknownNameError, match="'quit'.*forfeit, random"):
        coplay.make("text:twenty_questions", invalid="quit")


# ----- guess the number ----------------------------------------------------------------------------


def test_every_answer_is_exact():
    env = coplay.make("text:guess_number")
    pairs = np.array([(s, g) for s in range(1, 17) for g in range(1, 17)])
    utterances = jnp.stack([_say(env, f"guess {g}") for g in range(1, 17)])[pairs[:, 1] - 1]

    @jax.jit
    def one(secret, utterance):
        state, _ = env.reset(jax.random.PRNGKey(0))
        return env.step(state.replace(secret=secret), utterance, jax.random.PRNGKey(1))[1]

    ts = jax.vmap(one)(jnp.asarray(pairs[:, 0], jnp.int32), utterances)
    for (s, g), view, done, reward in zip(pairs, np.asarray(ts.obs[:, 0]), np.asarray(ts.done),
                                          np.asarray(ts.reward[:, 0])):
        answer = "higher" if s > g else "lower" if s < g else "correct"
        status = "game over" if s == g else "your move"
        assert VOCAB.decode(view) == f"guess the number between 1 and 16 , {g} {answer} , {status}"
        assert bool(done) == (s == g) and reward == float(s == g)


def _binary_search(view: str, n: int) -> str:
    """Reads only the view: the numbers still possible are lo..hi; guess the middle."""
    lo, hi = 1, n
    for entry in view.split(" , ")[1:-1]:
        guess, answer = entry.split()
        if answer == "higher":
            lo = max(lo, int(guess) + 1)
        else:
            hi = min(hi, int(guess) - 1)
    return f"guess {(lo + hi) // 2}"


@pytest.mark.parametrize("n", [16, 20, 5])
def test_binary_search_finds_every_secret_within_floor_log2_n_plus_one_guesses(n):
    env = coplay.make("text:guess_number", n=n)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    counts = []
    for secret in range(1, n + 1):
        state, ts = reset(jax.random.PRNGKey(0))
        state = state.replace(secret=jnp.int32(secret))
        while not bool(ts.done):
            state, ts = step(state, _say(env, _binary_search(env.render_text(state, 0), n)), jax.random.PRNGKey(0))
        assert _view(ts).endswith(f"{secret} correct , game over") and bool(ts.info["win"][0])
        guesses = int(state.count)
        assert float(ts.reward[0]) == pytest.approx(1 - 0.1 * (guesses - 1))
        counts.append(guesses)
    assert max(counts) == math.floor(math.log2(n)) + 1                # reached for some secret
    if n == 16:                                                       # depths of a balanced tree: 1+2x2+4x3+8x4+1x5
        assert sum(counts) == 54 and counts.count(5) == 1


@functools.cache
def _fewest_sure_guesses(m: int) -> float:
    """Brute force over every strategy: the fewest guesses that find each of m consecutive
    numbers (a guess at j leaves the j - 1 below or the m - j above)."""
    if m == 0:
        return 0
    return 1 + min(max(_fewest_sure_guesses(j - 1), _fewest_sure_guesses(m - j)) for j in range(1, m + 1))


@functools.cache
def _best_expected_return(m: int, made: int, cost: float, limit: int) -> float:
    """Brute force: the greatest expected return with m numbers left (the secret uniform among
    them) after `made` guesses, over every strategy; not finding it earns 0."""
    if m == 0 or made == limit:
        return 0.0
    return max((1 - cost * made) / m + (j - 1) / m * _best_expected_return(j - 1, made + 1, cost, limit)
               + (m - j) / m * _best_expected_return(m - j, made + 1, cost, limit) for j in range(1, m + 1))


def test_no_strategy_finds_every_secret_sooner_and_binary_search_is_optimal_on_average():
    assert [_fewest_sure_guesses(n) for n in range(1, 21)] == [math.floor(math.log2(n)) + 1 for n in range(1, 21)]
    # defaults (n 16, cost 0.1, 8 guesses): binary search's 38 wrong guesses over 16 secrets
    assert _best_expected_return(16, 0, 0.1, 8) == pytest.approx(1 - 0.1 * 38 / 16, abs=1e-12)
    # with 4 guesses a search finds at most 1 + 2 + 4 + 8 = 15 secrets, one at each depth of a full tree
    assert _best_expected_return(16, 0, 0.1, 4) == pytest.approx((1 + 2 * 0.9 + 4 * 0.8 + 8 * 0.7) / 16, abs=1e-12)


def test_guess_number_views_rewards_and_invalid_utterances():
    env = coplay.make("text:guess_number")
    step = jax.jit(env.step)
    state, ts = env.reset(jax.random.PRNGKey(0))
    state = state.replace(secret=jnp.int32(6))
    assert _view(ts) == "guess the number between 1 and 16 , your move" and ts.obs.shape == (1, 8 + 3 * 8 + 4)
    assert env.speech_words() == ("guess", *map(str, range(1, 17)))
    state, ts = step(state, _say(env, "guess 8"), jax.random.PRNGKey(1))
    state, ts = step(state, _say(env, "guess 4"), jax.random.PRNGKey(2))
    assert _view(ts) == "guess the number between 1 and 16 , 8 lower , 4 higher , your move"
    assert ts.reward.tolist() == [0.0] and not bool(ts.done) and bool(ts.active[0])
    _, ts = step(state, _say(env, "guess 6"), jax.random.PRNGKey(3))
    assert _view(ts) == "guess the number between 1 and 16 , 8 lower , 4 higher , 6 correct , game over"
    assert float(ts.reward[0]) == pytest.approx(0.8) and bool(ts.done) and not bool(ts.active[0])
    assert env.render_text(state) == "guess the number in 1..16, secret: 6; guesses: 8 4; 6 guesses left"
    for nonsense in ("7", "guess 17", "guess 0", "bet", "guess"):
        _, ts = step(state, _say(env, nonsense), jax.random.PRNGKey(4))
        assert bool(ts.done) and ts.reward.tolist() == [-1.0] and ts.info["invalid_utterance"].tolist() == [True]
        assert _view(ts) == "guess the number between 1 and 16 , 8 lower , 4 higher , forfeited , game over"
    short = coplay.make("text:guess_number", max_guesses=2)
    s, ts = short.reset(jax.random.PRNGKey(0))
    s = s.replace(secret=jnp.int32(6))
    s, ts = short.step(s, _say(short, "guess 1"), jax.random.PRNGKey(1))
    s, ts = short.step(s, _say(short, "guess 2"), jax.random.PRNGKey(2))    # out of guesses
    assert bool(ts.done) and ts.reward.tolist() == [0.0] and not bool(ts.info["invalid_utterance"][0])
    assert _view(ts) == "guess the number between 1 and 16 , 1 higher , 2 higher , game over"
    lenient = coplay.make("text:guess_number", invalid="random")
    s, ts = lenient.reset(jax.random.PRNGKey(0))
    s, ts = lenient.step(s, _say(lenient, "bet"), jax.random.PRNGKey(1))    # a random guess instead
    assert int(s.count) == 1 and 1 <= int(s.guesses[0]) <= 16 and ts.info["invalid_utterance"].tolist() == [True]
    assert bool(ts.done) == (int(s.guesses[0]) == int(s.secret))


def test_bad_guess_numbers_are_refused():
    for kwargs, match in [({"n": 1}, "n=1"), ({"n": 21}, "n=21"), ({"max_guesses": 0}, "max_guesses=0"),
                          ({"max_guesses": 21}, "max_guesses=21"), ({"guess_cost": -1.0}, "guess_cost=-1.0"),
                          ({"max_tokens": 1}, "max_tokens=1")]:
        with pytest.raises(ConfigError, match=match):
            coplay.make("text:guess_number", **kwargs)
    with pytest.raises(UnknownNameError, match="'quit'.*forfeit, random"):
        coplay.make("text:guess_number", invalid="quit")
