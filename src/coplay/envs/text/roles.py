"""Propose, solve, verify: `coplay.make("text:arithmetic_roles", operators="plus,times")`.

Three agents, one per role, take turns on a small arithmetic problem:

    proposer   reads   "proposer , your move"
               writes  "3 plus 4 equals 7"                 a problem and its claimed answer
    solver     reads   "solver , problem : 3 plus 4 , your answer"           (not the claim)
               writes  "7 <end>"
    verifier   reads   "verifier , problem : 3 plus 4 equals 7 , answer : 7 , your move"
               writes  "correct <end>"  or  "wrong <end>"  about the solver's answer

One episode is three turns (proposer, solver, verifier); with `attempts=k` the
solver answers k times in a row from the same view (so its answers are
independent samples of its policy) and the verifier judges the first answer:
k + 2 turns. A player who is not speaking reads its view ending in "wait", and
every view ends in "game over" once the episode has ended.

Problems. The problem table holds every `a <operator> b` with operands
`0..max_operand` and an operator of `operators` (plus, minus, times) whose true
value lies in the vocabulary's numbers 0..20 (so "2 minus 5" and "5 times 9"
are not problems). Answers and claims are the numbers 0..M, M the largest true
value in the table. A problem whose claimed answer is wrong is still a
problem: it is played out, the solver and the verifier are scored against the
true value (the claim is only the proposer's reference answer, which a
verifier may trust or check), and the proposer earns no credit for the claim.

Rewards, per role, each paid at the turn that settles it (`reward_scale`
multiplies each role's rewards, the -1 included):

    solver     +1/k for each attempt whose answer is the true value
    verifier   +1 when its verdict ("correct" or "wrong") agrees with whether the
               solver's first answer is the true value
    proposer   +c when its claim is the true value (c = `claim_reward`, 1 by
               default), plus, after the last attempt,
               the learnability term  L = 4 m (k - m) / (k (k - 1))  of the m
               attempts (of k) that were right (a problem's difficulty does not
               depend on its claim, so L is paid whether the claim is right or not)

Learnability: `4 p (1 - p)` is 1 for a problem the solver gets right half the
time and 0 for one it always or never gets right (the shape of the
"learnability" rewards of proposer/solver self-play: Absolute Zero, R-Zero),
and `L` is its unbiased estimate from k independent attempts:
`E[m (k - m)] = k (k - 1) p (1 - p)` for `m ~ Binomial(k, p)`. It needs two
attempts at least: whatever a reward makes of one attempt, its expectation is
affine in p, so a term for a single solve pulls the proposer to problems
the solver always solves (a reward for the solve) or never solves (a reward for
the failure). With `attempts=1` (the default, three turns) the proposer is
therefore scored on stating its problem correctly only (L = 0), and
`attempts=2` or more adds the learnability term.

Optimum. The solver's best is to answer every problem right (return 1), the
verifier's to judge every answer right (1); against a solver that answers
problem x right with probability p_x, the proposer's best is to pose, with its
true value, a problem that maximises `4 p_x (1 - p_x)`: return `c + max_x
4 p_x (1 - p_x)` with two attempts or more (at most c + 1; c against a solver
that never errs), c with one attempt.

    obs           [3, L] int32  each role's view, token ids of coplay's vocabulary
    action        [3, T] int32  each role's utterance (only the speaker's is read)
    reward        [3]           as above (proposer, solver, verifier)
    info          invalid_utterance [3] bool: the speaker's utterance named no move of its role;
                  and, summed over an episode: proposed (the proposer named a problem),
                  claim_correct, solved (the solver's share of right attempts), verified,
                  learnability (the proposer's L)

An utterance that names no move of its speaker's role (a proposer's "3 plus
4", a problem outside the table, a solver's "21" or "correct", a verifier's
"7") costs the speaker -1 and, with `invalid="forfeit"` (the default), ends the
episode; the roles that spoke before keep what they had earned. With
`invalid="random"` the speaker still gets -1, in place of what its turn would
have earned, and a uniformly random move of its role (a row of the problem
table with a random claim, a random number, a random verdict) is played
instead, so the episode goes on: the others are scored on the game as played,
and the proposer earns no learnability term for a problem it did not pose or
for attempts the solver did not make. Views are the roles' information states
with one attempt (`views_are_states`); with several, the solver's view does not
say which attempt it is on.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.errors import ConfigError, unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, MultiDiscrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.text.base import TextEnv, move_table
from coplay.envs.text.games import check_invalid, parse
from coplay.envs.text.vocab import PAD, VOCAB
from coplay.envs.trees.tree import GAME_OVER, WAIT, YOUR_MOVE

OPERATORS = ("plus", "minus", "times")
ROLES = ("proposer", "solver", "verifier")
PROPOSER, SOLVER, VERIFIER = 0, 1, 2
LARGEST = 20            # the vocabulary's largest number
MAX_ATTEMPTS = 4
YOUR_ANSWER = "your answer"
_APPLY = {"plus": lambda a, b: a + b, "minus": lambda a, b: a - b, "times": lambda a, b: a * b}


@struct.dataclass
class ArithmeticState:
    problem: jax.Array   # [] int32 row of the problem table (-1 before the proposer has spoken)
    claim: jax.Array     # [] int32 the proposer's claimed answer (-1 before)
    answers: jax.Array   # [k] int32 the solver's answers (-1 before each attempt)
    verdict: jax.Array   # [] int32 0 "correct", 1 "wrong" (-1 before)
    turn: jax.Array      # [] int32 0 proposer, 1..k the solver's attempts, k + 1 verifier
    own: jax.Array       # [k + 2] bool the utterance of each turn so far was its speaker's (not replaced)
    done: jax.Array      # [] bool


def parse_operators(operators: str) -> tuple[str, ...]:
    """"plus,times" -> ("plus", "times"), or an error naming the bad value and the choices."""
    names = tuple(o for o in str(operators).replace(" ", "").split(",") if o)
    if not names:
        raise ConfigError(f"operators={operators!r}: name one or more of {', '.join(OPERATORS)}, separated by "
                          f"commas (e.g. operators=\"plus,times\")")
    for name in names:
        if name not in OPERATORS:
            raise unknown_name("operator", name, OPERATORS)
    if len(set(names)) != len(names):
        raise ConfigError(f"operators={operators!r} names an operator twice")
    return names


def parse_scale(reward_scale: str) -> tuple[float, float, float]:
    """"1,100,1" -> (1.0, 100.0, 1.0): one positive multiplier per role (proposer, solver, verifier)."""
    try:
        scale = tuple(float(s) for s in str(reward_scale).replace(" ", "").split(","))
    except ValueError:
        scale = ()
    if len(scale) != 3 or not all(math.isfinite(s) and s > 0 for s in scale):
        raise ConfigError(f"reward_scale={reward_scale!r}: give three positive numbers, the multipliers of the "
                          f"proposer's, the solver's and the verifier's rewards (e.g. reward_scale=\"1,100,1\")")
    return scale[0], scale[1], scale[2]


def problem_table(operators: tuple[str, ...], max_operand: int) -> list[tuple[int, str, int, int]]:
    """Every (a, operator, b, true value) with operands 0..max_operand whose value is
    in 0..20, by operator (in `operators`' order), then a, then b."""
    return [(a, op, b, _APPLY[op](a, b)) for op in operators for a in range(max_operand + 1)
            for b in range(max_operand + 1) if 0 <= _APPLY[op](a, b) <= LARGEST]


def learnability(right: jax.Array, attempts: int) -> jax.Array:
    """`4 m (k - m) / (k (k - 1))` for m right attempts of k: the unbiased estimate of
    `4 p (1 - p)` (0 where k = 1, which cannot estimate it)."""
    if attempts < 2:
        return jnp.zeros_like(right, jnp.float32)
    return 4.0 * right * (attempts - right) / (attempts * (attempts - 1))


class TextArithmeticRoles(TextEnv):
    """Proposer, solver and verifier on arithmetic problems, in words (see the module's doc)."""

    def __init__(self, operators: str = "plus,minus,times", max_operand: int = 9, attempts: int = 1,
                 reward_scale: str = "1,1,1", max_tokens: int = 5, invalid: str = "forfeit",
                 claim_reward: float = 1.0):
        check_invalid(invalid)
        if isinstance(claim_reward, bool) or not isinstance(claim_reward, (int, float)) \
                or not 0 <= claim_reward < float("inf"):
            raise ConfigError(f"claim_reward={claim_reward!r}: what a right claim earns the proposer, a finite "
                              f"number >= 0 (1 by default; below 1 the learnability term weighs more beside it)")
        self.claim_reward = float(claim_reward)
        ops = parse_operators(operators)
        if not isinstance(max_operand, int) or not 1 <= max_operand <= LARGEST:
            raise ConfigError(f"max_operand={max_operand!r}: operands run from 0 to max_operand, which must be an "
                              f"integer from 1 to {LARGEST} (the vocabulary's numbers)")
        if not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS:
            raise ConfigError(f"attempts={attempts!r}: the solver's attempts per problem, 1 to {MAX_ATTEMPTS}")
        self.operators, self.max_operand, self.attempts, self.invalid = ops, max_operand, attempts, invalid
        self.reward_scale = parse_scale(reward_scale)
        self.vocab = VOCAB
        table = problem_table(ops, max_operand)
        self.values = np.asarray([v for *_, v in table], np.int32)
        self.largest = int(self.values.max())              # answers and claims are 0..largest
        numbers = self.largest + 1
        self.problem_texts = tuple(f"{a} {op} {b}" for a, op, b, _ in table)
        proposals = tuple(f"{p} equals {c}" for p in self.problem_texts for c in range(numbers))
        answers = tuple(str(n) for n in range(numbers))
        self.move_texts = proposals + answers + ("correct", "wrong")
        sizes = (len(proposals), len(answers), 2)
        self._first = jnp.asarray(np.cumsum((0,) + sizes[:2]), jnp.int32)       # each role's first row
        self._count = jnp.asarray(sizes, jnp.int32)
        self._moves = move_table(self.move_texts, max_tokens, "text:arithmetic_roles")
        k = attempts
        self._speaker = jnp.asarray([PROPOSER] + [SOLVER] * k + [VERIFIER], jnp.int32)   # who speaks at each turn
        self._values = jnp.asarray(self.values)
        self._a = jnp.asarray([a for a, *_ in table], jnp.int32)
        self._b = jnp.asarray([b for _, _, b, _ in table], jnp.int32)
        self._op = jnp.asarray([OPERATORS.index(op) for _, op, _, _ in table], jnp.int32)
        word = lambda w: jnp.int32(VOCAB.index[w])  # noqa: E731
        self._numbers = jnp.asarray([VOCAB.index[str(n)] for n in range(LARGEST + 1)], jnp.int32)
        self._op_words = jnp.asarray([VOCAB.index[o] for o in OPERATORS], jnp.int32)
        self._equals, self._comma, self._colon = word("equals"), word(","), word(":")
        self._problem_word, self._answer_word = word("problem"), word("answer")
        self._role_words = jnp.asarray([VOCAB.index[r] for r in ROLES], jnp.int32)
        # status: 0 your move, 1 wait, 2 game over, 3 your answer
        self._status = jnp.asarray(np.stack([VOCAB.encode(s, 2) for s in (YOUR_MOVE, WAIT, GAME_OVER, YOUR_ANSWER)]))
        self._scale = jnp.asarray(self.reward_scale, jnp.float32)
        self.views_are_states = attempts == 1
        length = len("verifier , problem : 3 plus 4 equals 7 , answer : 7 , your move".split())
        self.spec = EnvSpec(
            name="text:arithmetic_roles", num_agents=3, obs_space=MultiDiscrete((len(VOCAB),) * length),
            action_space=MultiDiscrete((len(VOCAB),) * max_tokens),
            global_state_space=Box(-1.0, float(LARGEST), (k + 6,)), max_steps=k + 2,
            teams=(0, 0, 0), roles=ROLES, turn_based=True, render_text=self.render_text,
        )

    # ----- views ---------------------------------------------------------------------------------
    def _views(self, state: ArithmeticState) -> jax.Array:
        """[3, L]: each role's view (segments not yet known are left out)."""
        p = jnp.clip(state.problem, 0)
        posed, answered = state.problem >= 0, state.answers[0] >= 0
        problem = jnp.stack([self._problem_word, self._colon, self._numbers[self._a[p]], self._op_words[self._op[p]],
                             self._numbers[self._b[p]]])
        claim = jnp.stack([self._equals, self._numbers[jnp.clip(state.claim, 0)]])
        answer = jnp.stack([self._answer_word, self._colon, self._numbers[jnp.clip(state.answers[0], 0)],
                            self._comma])
        speaker = self._speaker[state.turn]
        status = jnp.where(state.done, 2, jnp.where(jnp.arange(3) == speaker, 0, 1))        # [3]
        status = jnp.where((jnp.arange(3) == SOLVER) & (status == 0), 3, status)
        head = jnp.stack([self._role_words, jnp.full(3, self._comma)], axis=1)               # [3, 2]
        gap = lambda x, keep: jnp.where(keep, x, PAD)  # noqa: E731
        comma = self._comma[None]
        rows = [
            [head[0], gap(problem, posed), gap(claim, posed), gap(comma, posed), gap(answer, False)],
            [head[1], gap(problem, posed), gap(claim, False), gap(comma, posed), gap(answer, False)],
            [head[2], gap(problem, posed), gap(claim, posed), gap(comma, posed), gap(answer, answered)],
        ]
        full = jnp.stack([jnp.concatenate([*r, self._status[status[i]]]) for i, r in enumerate(rows)])
        order = jnp.argsort(full == PAD, axis=1, stable=True)           # the words first, in order
        return jnp.take_along_axis(full, order, axis=1)

    def _timestep(self, state: ArithmeticState, reward: jax.Array, invalid: jax.Array,
                  facts: dict[str, jax.Array]) -> TimeStep:
        p = jnp.clip(state.problem, 0)
        known = state.problem >= 0
        numbers = jnp.stack([jnp.where(known, self._a[p], -1), jnp.where(known, self._op[p], -1),
                             jnp.where(known, self._b[p], -1), state.claim])
        return TimeStep(
            obs=self._views(state), reward=reward, done=state.done, truncated=jnp.bool_(False),
            active=(jnp.arange(3) == self._speaker[state.turn]) & ~state.done, action_mask=jnp.ones((3, 0), bool),
            global_state=jnp.concatenate([numbers, state.answers, state.verdict[None],
                                          state.turn[None]]).astype(jnp.float32),
            info={"invalid_utterance": invalid, **facts},
        )

    def _reset(self, key):
        k = self.attempts
        state = ArithmeticState(problem=jnp.int32(-1), claim=jnp.int32(-1), answers=jnp.full(k, -1, jnp.int32),
                                verdict=jnp.int32(-1), turn=jnp.int32(0), own=jnp.zeros(k + 2, bool),
                                done=jnp.bool_(False))
        zero = jnp.float32(0.0)
        facts = dict.fromkeys(("proposed", "claim_correct", "solved", "verified", "learnability"), zero)
        return state, self._timestep(state, jnp.zeros(3, jnp.float32), jnp.zeros(3, bool), facts)

    def move_mask(self, state: ArithmeticState) -> jax.Array:
        """Each role's own moves (the proposer's problems, the solver's answers, the verifier's verdicts)."""
        rows = jnp.arange(len(self.move_texts))
        return (rows >= self._first[:, None]) & (rows < (self._first + self._count)[:, None])

    def _step(self, state: ArithmeticState, actions, key):
        k = self.attempts
        turn, live = state.turn, ~state.done
        speaker = self._speaker[turn]
        first, count = self._first[speaker], self._count[speaker]
        row = parse(jnp.asarray(actions)[speaker], self._moves)
        own = live & (row >= first) & (row < first + count)
        invalid = live & ~own
        if self.invalid == "random":
            row = jnp.where(invalid, first + jax.random.randint(key, (), 0, count), row)
            goes_on = jnp.bool_(True)
        else:
            goes_on = ~invalid
        move = jnp.clip(row - first, 0)                                  # the move within its role's rows
        plays = live & goes_on
        numbers = self.largest + 1
        proposing, verifying = plays & (speaker == PROPOSER), plays & (speaker == VERIFIER)
        attempt = jnp.clip(turn - 1, 0, k - 1)
        solving = plays & (speaker == SOLVER)
        problem = jnp.where(proposing, move // numbers, state.problem)
        claim = jnp.where(proposing, move % numbers, state.claim)
        answers = state.answers.at[attempt].set(jnp.where(solving, move, state.answers[attempt]))
        verdict = jnp.where(verifying, move, state.verdict)
        owns = state.own.at[turn].set(jnp.where(live, own, state.own[turn]))
        truth = self._values[jnp.clip(problem, 0)]
        # what the turn earns its speaker (where the utterance was its own) and the proposer's L
        claim_right = own & (speaker == PROPOSER) & (claim == truth)
        right = own & (speaker == SOLVER) & (answers[attempt] == truth)
        judged = own & (speaker == VERIFIER) & ((verdict == 0) == (answers[0] == truth))
        last = solving & (turn == k)
        scored = owns[: k + 1].all()
        learn = jnp.where(last & scored, learnability(jnp.sum(answers == truth).astype(jnp.float32), k), 0.0)
        earned = jnp.where(speaker == PROPOSER, self.claim_reward * claim_right,
                           jnp.where(speaker == SOLVER, right / k, judged.astype(jnp.float32)))
        me = jnp.arange(3) == speaker
        reward = jnp.where(me, jnp.where(invalid, -1.0, earned), 0.0)
        reward = reward + jnp.where(jnp.arange(3) == PROPOSER, learn, 0.0)
        done = state.done | (live & (~goes_on | (turn == k + 1)))
        new = ArithmeticState(problem=problem, claim=claim, answers=answers, verdict=verdict,
                              turn=jnp.where(live & ~done, turn + 1, turn), own=owns, done=done)
        f32 = lambda x: x.astype(jnp.float32)  # noqa: E731
        facts = {"proposed": f32(own & (speaker == PROPOSER)), "claim_correct": f32(claim_right),
                 "solved": f32(right) / k, "verified": f32(judged), "learnability": learn}
        return new, self._timestep(new, (reward * self._scale).astype(jnp.float32), me & invalid, facts)

    # ----- for people and for exact evaluation ----------------------------------------------------------
    def solver_views(self) -> jax.Array:
        """`[P, L]`: the view the solver reads at its turn for each problem of the table."""
        k = self.attempts

        def view(p):
            state = ArithmeticState(problem=p, claim=jnp.int32(0), answers=jnp.full(k, -1, jnp.int32),
                                    verdict=jnp.int32(-1), turn=jnp.int32(1), own=jnp.zeros(k + 2, bool),
                                    done=jnp.bool_(False))
            return self._views(state)[SOLVER]

        return jax.vmap(view)(jnp.arange(len(self.values), dtype=jnp.int32))

    def role_moves(self, role: int) -> jax.Array:
        """`[A, T]`: the utterances of `role`'s moves (the proposer's: problem-major, then claim 0..M)."""
        first = int(self._first[role])
        return self._moves[first: first + int(self._count[role])]

    def render_text(self, state: ArithmeticState, viewer: int | None = None) -> str:
        if viewer is not None:
            return self.vocab.decode(np.asarray(self._views(state)[viewer]))
        parts = []
        if int(state.problem) >= 0:
            parts.append(f"proposer: {self.problem_texts[int(state.problem)]} equals {int(state.claim)}")
        answers = [str(int(a)) for a in np.asarray(state.answers) if a >= 0]
        if answers:
            parts.append(f"solver: {', '.join(answers)}")
        if int(state.verdict) >= 0:
            parts.append(f"verifier: {('correct', 'wrong')[int(state.verdict)]}")
        turn = GAME_OVER if bool(state.done) else f"{ROLES[int(self._speaker[int(state.turn)])]} to speak"
        return "; ".join(parts + [turn])


ENVS.register("text:arithmetic_roles", TextArithmeticRoles, kind="cooperative",
              description="proposer, solver and verifier on arithmetic problems in words, each with its own "
                          "reward (the proposer's: a correct claim plus learnability)")
