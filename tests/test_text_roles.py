"""Proposer, solver and verifier on arithmetic in words (`text:arithmetic_roles`): what
each role reads, the exact reward of every role in scripted episodes, the learnability
term, invalid utterances, per-role reward scales, and the problem table."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.compile import jit_once
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.text import VOCAB
from coplay.envs.text.roles import PROPOSER, SOLVER, VERIFIER, learnability

KEY = jax.random.PRNGKey(0)
_ENVS: dict = {}


def _env(**kwargs):
    """One environment (and one compiled step) per setting, shared by the tests."""
    name = tuple(sorted(kwargs.items()))
    if name not in _ENVS:
        env = coplay.make("text:arithmetic_roles", **kwargs)
        _ENVS[name] = (env, jax.jit(env.step))
    return _ENVS[name][0]


def _step_of(env):
    return next(s for e, s in _ENVS.values() if e is env)


def _say(role: int, text: str, length: int = 5) -> jnp.ndarray:
    """Every role's utterance: `text` for `role`, nothing (<pad>) for the others (only the speaker's is read)."""
    said = np.zeros((3, length), np.int32)
    said[role] = VOCAB.encode(text, length, end=len(text.split()) < length)
    return jnp.asarray(said)


def _play(env, turns, key=KEY):
    """Play `turns` [(role, text)] from a reset (compiled steps); returns the time steps
    after each turn, the final state and the returns [3]."""
    step = _step_of(env)
    state, ts = env.reset(key)
    steps, total = [], np.zeros(3)
    for i, (role, text) in enumerate(turns):
        assert bool(ts.active[role]) and int(ts.active.sum()) == 1, (i, role)
        state, ts = step(state, _say(role, text), jax.random.fold_in(key, i))
        steps.append(ts)
        total += np.asarray(ts.reward)
    return steps, state, total


def _views(ts) -> list[str]:
    return [VOCAB.decode(v) for v in ts.obs]


def test_each_role_reads_its_view_and_a_correct_episode_pays_every_role_one():
    env = _env()
    _, ts = env.reset(KEY)
    assert _views(ts) == ["proposer , your move", "solver , wait", "verifier , wait"]
    assert ts.active.tolist() == [True, False, False]
    steps, state, total = _play(env, [(PROPOSER, "3 plus 4 equals 7"), (SOLVER, "7"), (VERIFIER, "correct")])
    assert _views(steps[0]) == ["proposer , problem : 3 plus 4 equals 7 , wait",
                                "solver , problem : 3 plus 4 , your answer",      # the claim is not shown
                                "verifier , problem : 3 plus 4 equals 7 , wait"]
    assert _views(steps[1])[2] == "verifier , problem : 3 plus 4 equals 7 , answer : 7 , your move"
    assert _views(steps[2])[1] == "solver , problem : 3 plus 4 , game over"
    # each reward is paid at the turn that settles it
    assert [s.reward.tolist() for s in steps] == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert [bool(s.done) for s in steps] == [False, False, True]
    assert total.tolist() == [1, 1, 1]
    assert env.render_text(state) == "proposer: 3 plus 4 equals 7; solver: 7; verifier: correct; game over"
    info = {k: float(sum(np.sum(s.info[k]) for s in steps)) for k in steps[0].info}
    assert info == {"invalid_utterance": 0, "proposed": 1, "claim_correct": 1, "solved": 1, "verified": 1,
                    "learnability": 0}


@pytest.mark.parametrize("claim, answer, verdict, returns", [
    ("7", "7", "wrong", [1, 1, 0]),       # the solver was right: "wrong" is the verifier's error
    ("7", "6", "wrong", [1, 0, 1]),       # a wrong answer caught
    ("7", "6", "correct", [1, 0, 0]),
    ("8", "7", "correct", [0, 1, 1]),     # a wrong claim is still a problem: the answer is judged on the truth
    ("8", "8", "correct", [0, 0, 0]),     # ... so trusting the claim costs the verifier
    ("8", "8", "wrong", [0, 0, 1]),
])
def test_rewards_of_every_role_in_scripted_episodes(claim, answer, verdict, returns):
    env = _env()
    _, _, total = _play(env, [(PROPOSER, f"3 plus 4 equals {claim}"), (SOLVER, answer), (VERIFIER, verdict)])
    assert total.tolist() == returns


def test_minus_and_times_problems_are_scored_on_their_true_values():
    env = _env()
    for problem, value in (("9 minus 9", 0), ("4 times 5", 20), ("2 times 0", 0), ("8 minus 3", 5)):
        _, _, total = _play(env, [(PROPOSER, f"{problem} equals {value}"), (SOLVER, str(value)),
                                  (VERIFIER, "correct")])
        assert total.tolist() == [1, 1, 1], problem


@pytest.mark.parametrize("attempts, answers, solver, learn", [
    (2, ("7", "6"), 0.5, 2.0),              # m = 1 of 2: 4 * 1 * 1 / (2 * 1)
    (2, ("6", "7"), 0.5, 2.0),
    (2, ("7", "7"), 1.0, 0.0),              # always solved: no learnability
    (2, ("6", "5"), 0.0, 0.0),              # never solved: none either
    (3, ("7", "6", "6"), 1 / 3, 4 / 3),     # 4 * 1 * 2 / (3 * 2)
    (3, ("7", "7", "6"), 2 / 3, 4 / 3),
    (4, ("7", "7", "6", "6"), 0.5, 4 / 3),  # 4 * 2 * 2 / (4 * 3)
])
def test_several_attempts_pay_the_proposer_the_learnability_of_its_problem(attempts, answers, solver, learn):
    env = _env(attempts=attempts)
    assert env.spec.max_steps == attempts + 2
    turns = [(PROPOSER, "3 plus 4 equals 7")] + [(SOLVER, a) for a in answers] + [(VERIFIER, "correct")]
    steps, state, total = _play(env, turns)
    first_right = answers[0] == "7"
    assert total == pytest.approx([1 + learn, solver, float(first_right)])      # the verifier judges the first answer
    assert steps[attempts].reward[PROPOSER] == pytest.approx(learn)               # paid after the last attempt
    solver_views = [VOCAB.decode(s.obs[SOLVER]) for s in steps[:attempts]]
    assert solver_views == ["solver , problem : 3 plus 4 , your answer"] * attempts   # the same view each time
    assert bool(state.done) and int(steps[-1].info["invalid_utterance"].sum()) == 0


def test_the_learnability_term_is_unbiased_for_four_p_one_minus_p():
    """E[L] over m ~ Binomial(k, p) is 4 p (1 - p), and one attempt gives no term."""
    from math import comb

    for k in (2, 3, 4):
        for p in (0.1, 0.5, 0.8):
            mean = sum(comb(k, m) * p**m * (1 - p) ** (k - m) * float(learnability(jnp.float32(m), k))
                       for m in range(k + 1))
            assert mean == pytest.approx(4 * p * (1 - p), abs=1e-6)
    assert float(learnability(jnp.float32(1), 1)) == 0.0


@pytest.mark.parametrize("turns, speaker, returns", [
    ([(PROPOSER, "3 plus 4")], PROPOSER, [-1, 0, 0]),                       # no claim
    ([(PROPOSER, "2 minus 5 equals 0")], PROPOSER, [-1, 0, 0]),             # not a problem of the table
    ([(PROPOSER, "7")], PROPOSER, [-1, 0, 0]),                              # another role's move
    ([(PROPOSER, "3 plus 4 equals 7"), (SOLVER, "correct")], SOLVER, [1, -1, 0]),   # the proposer keeps its +1
    ([(PROPOSER, "3 plus 4 equals 7"), (SOLVER, "7 7")], SOLVER, [1, -1, 0]),
    ([(PROPOSER, "3 plus 4 equals 7"), (SOLVER, "7"), (VERIFIER, "7")], VERIFIER, [1, 1, -1]),
])
def test_an_invalid_utterance_costs_its_speaker_one_and_ends_the_episode(turns, speaker, returns):
    env = _env()
    steps, state, total = _play(env, turns)
    assert total.tolist() == returns and bool(steps[-1].done)
    assert steps[-1].info["invalid_utterance"].tolist() == [i == speaker for i in range(3)]
    assert not bool(steps[-1].active.any())
    assert all(v.endswith("game over") for v in _views(steps[-1]))
    # stepping on after the end changes nothing and pays nothing
    again, after = env.step(state, _say(speaker, "correct"), KEY)
    assert after.reward.tolist() == [0, 0, 0] and not bool(after.info["invalid_utterance"].any())
    assert all(bool(jnp.all(a == b)) for a, b in zip(jax.tree.leaves(again), jax.tree.leaves(state)))


def test_a_solver_answer_beyond_the_games_numbers_is_invalid():
    env = _env(operators="plus", max_operand=3)     # answers 0..6
    assert env.largest == 6
    _, _, total = _play(env, [(PROPOSER, "3 plus 3 equals 6"), (SOLVER, "7")])
    assert total.tolist() == [1, -1, 0]


def test_with_invalid_random_the_speaker_pays_one_and_a_random_move_is_played():
    env = _env(attempts=2, invalid="random")
    step = _step_of(env)
    state, ts = env.reset(KEY)
    state, ts = step(state, _say(PROPOSER, "3 plus 4"), KEY)
    assert not bool(ts.done) and ts.reward.tolist() == [-1, 0, 0]
    assert ts.info["invalid_utterance"].tolist() == [True, False, False] and float(ts.info["proposed"]) == 0
    problem, truth = int(state.problem), int(env.values[int(state.problem)])
    assert problem >= 0 and 0 <= int(state.claim) <= 20 and bool(ts.active[SOLVER])
    assert VOCAB.decode(ts.obs[SOLVER]) == f"solver , problem : {env.problem_texts[problem]} , your answer"
    # one right and one wrong attempt (m = 1 of 2) earn no learnability for a problem the proposer did not pose
    state, ts = step(state, _say(SOLVER, str(truth)), KEY)
    assert ts.reward.tolist() == [0, 0.5, 0]
    state, ts = step(state, _say(SOLVER, str((truth + 1) % 21)), KEY)
    assert ts.reward.tolist() == [0, 0, 0] and float(ts.info["learnability"]) == 0
    # a verifier's nonsense: -1, a random verdict is played and the episode ends
    state, ts = step(state, _say(VERIFIER, "7"), KEY)
    assert bool(ts.done) and ts.reward.tolist() == [0, 0, -1] and int(state.verdict) in (0, 1)
    # a solver's invalid attempt: -1 in place of what it would have earned, the game goes on
    state, _ = env.reset(KEY)
    state, _ = step(state, _say(PROPOSER, "3 plus 4 equals 7"), KEY)
    state, ts = step(state, _say(SOLVER, "correct"), KEY)
    assert ts.reward.tolist() == [0, -1, 0] and not bool(ts.done) and 0 <= int(state.answers[0]) <= 20


def test_reward_scale_multiplies_each_roles_rewards():
    env = _env(reward_scale="2,100,0.5")
    assert env.reward_scale == (2.0, 100.0, 0.5)
    _, _, total = _play(env, [(PROPOSER, "3 plus 4 equals 7"), (SOLVER, "7"), (VERIFIER, "correct")])
    assert total.tolist() == [2, 100, 0.5]
    _, _, total = _play(env, [(PROPOSER, "3 plus 4 equals 7"), (SOLVER, "6"), (VERIFIER, "7")])
    assert total.tolist() == [2, 0, -0.5]                                       # the -1 is scaled too
    _, _, total = _play(env, [(PROPOSER, "3 plus")])
    assert total.tolist() == [-2, 0, 0]
    learn = _env(attempts=2, reward_scale="3,1,1")
    _, _, total = _play(learn, [(PROPOSER, "3 plus 4 equals 7"), (SOLVER, "7"), (SOLVER, "6"), (VERIFIER, "correct")])
    assert total.tolist() == [3 * (1 + 2), 0.5, 1]
    # claim_reward weighs a right claim only: not the learnability term, not the -1 of an invalid proposal
    light = _env(attempts=2, claim_reward=0.25)
    _, _, total = _play(light, [(PROPOSER, "3 plus 4 equals 7"), (SOLVER, "7"), (SOLVER, "6"), (VERIFIER, "correct")])
    assert total.tolist() == [0.25 + 2, 0.5, 1]
    _, _, total = _play(light, [(PROPOSER, "3 plus 4 equals 8"), (SOLVER, "7"), (SOLVER, "7"), (VERIFIER, "correct")])
    assert total.tolist() == [0, 1, 1]
    _, _, total = _play(light, [(PROPOSER, "3 plus")])
    assert total.tolist() == [-1, 0, 0]


def test_the_problem_table_holds_exactly_the_problems_whose_value_is_a_vocabulary_number():
    env = _env()
    # plus: all 10 x 10 (at most 18); minus: a >= b, 55; times: a * b <= 20, 19 with a zero + 42 without
    assert len(env.problem_texts) == 100 + 55 + 61 and env.largest == 20
    small = coplay.make("text:arithmetic_roles", operators="minus,times", max_operand=2)
    assert small.problem_texts == ("0 minus 0", "1 minus 0", "1 minus 1", "2 minus 0", "2 minus 1", "2 minus 2",
                                   "0 times 0", "0 times 1", "0 times 2", "1 times 0", "1 times 1", "1 times 2",
                                   "2 times 0", "2 times 1", "2 times 2")
    assert small.values.tolist() == [0, 1, 0, 2, 1, 0, 0, 0, 0, 0, 1, 2, 0, 2, 4] and small.largest == 4
    # every problem with each claim 0..largest, the answers 0..largest, and the two verdicts
    assert len(small.move_texts) == 15 * 5 + 5 + 2
    assert small.move_texts[:6] == ("0 minus 0 equals 0", "0 minus 0 equals 1", "0 minus 0 equals 2",
                                    "0 minus 0 equals 3", "0 minus 0 equals 4", "1 minus 0 equals 0")
    assert small.move_texts[-7:] == ("0", "1", "2", "3", "4", "correct", "wrong")
    assert set(small.speech_words()) == {"0", "1", "2", "3", "4", "minus", "times", "equals", "correct", "wrong"}
    times = coplay.make("text:arithmetic_roles", operators="times", max_operand=5)
    assert len(times.problem_texts) == 35 and "5 times 5" not in times.problem_texts        # 25 > 20
    assert "4 times 5" in times.problem_texts and times.largest == 20
    wide = coplay.make("text:arithmetic_roles", operators="plus", max_operand=12)
    assert len(wide.problem_texts) == sum(1 for a in range(13) for b in range(13) if a + b <= 20)
    assert "12 plus 9" not in wide.problem_texts and "12 plus 8" in wide.problem_texts


def test_the_solver_views_and_role_moves_serve_exact_evaluation():
    env = coplay.make("text:arithmetic_roles", operators="plus", max_operand=2)
    views = env.solver_views()
    assert [VOCAB.decode(v) for v in views[:2]] == ["solver , problem : 0 plus 0 , your answer",
                                                    "solver , problem : 0 plus 1 , your answer"]
    assert views.shape == (9, env.spec.obs_space.shape[0])
    assert [VOCAB.decode(u) for u in env.role_moves(SOLVER)] == ["0", "1", "2", "3", "4"]
    assert VOCAB.decode(env.role_moves(PROPOSER)[6]) == "0 plus 1 equals 1"
    assert [VOCAB.decode(u) for u in env.role_moves(VERIFIER)] == ["correct", "wrong"]


@pytest.mark.parametrize("kwargs, error, words", [
    ({"operators": "divide"}, UnknownNameError, "'divide'.*minus, plus, times"),
    ({"operators": ""}, ConfigError, "operators=''"),
    ({"operators": "plus,plus"}, ConfigError, "names an operator twice"),
    ({"max_operand": 0}, ConfigError, "max_operand=0"),
    ({"max_operand": 21}, ConfigError, "max_operand=21"),
    ({"attempts": 0}, ConfigError, "attempts=0"),
    ({"attempts": 5}, ConfigError, "attempts=5"),
    ({"reward_scale": "1,100"}, ConfigError, "reward_scale='1,100'"),
    ({"reward_scale": "1,-1,1"}, ConfigError, "three positive numbers"),
    ({"reward_scale": "1,x,1"}, ConfigError, "reward_scale='1,x,1'"),
    ({"reward_scale": "1,inf,1"}, ConfigError, "reward_scale='1,inf,1'"),
    ({"invalid": "quit"}, UnknownNameError, "'quit'.*forfeit, random"),
    ({"claim_reward": -0.5}, ConfigError, "claim_reward=-0.5.*>= 0"),
    ({"claim_reward": float("inf")}, ConfigError, "claim_reward=inf"),
    ({"claim_reward": "x"}, ConfigError, "claim_reward must be a number, got 'x'"),
    ({"max_tokens": 4}, ConfigError, "max_tokens=4 is shorter than the longest move"),
])
def test_bad_settings_are_refused_naming_the_value_and_the_choices(kwargs, error, words):
    with pytest.raises(error, match=words):
        coplay.make("text:arithmetic_roles", **kwargs)


@pytest.mark.slow
def test_grpo_trains_on_the_three_roles():
    """Two compiled GRPO updates: every role speaks (each update's returns per role are
    finite) and the parameters move."""
    from coplay.algos.grpo import GRPO, Config

    env = coplay.make("text:arithmetic_roles", operators="plus", max_operand=2, attempts=2, invalid="random")
    trainer = GRPO(Config(episodes=8, group_size=4, width=16, layers=1, heads=1, estimator="dr_mas"), env, 2)
    state = jit_once(trainer.init)(KEY)
    after, metrics = jax.jit(lambda s: jax.lax.scan(lambda c, _: trainer.update(c), s, None, length=2))(state)
    assert metrics["turns_per_episode"].tolist() == [4.0, 4.0]          # invalid="random": every episode is played out
    assert all(bool(jnp.all(jnp.isfinite(metrics[f"return/{i}"]))) for i in range(3))
    moved = jax.tree.map(lambda a, b: jnp.any(a != b), state.params, after.params)
    assert any(bool(x) for x in jax.tree.leaves(moved))
