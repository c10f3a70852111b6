"""A repeated matrix game with cheap talk: `coplay.make("text:matrix_talk", game="stag_hunt", rounds=3)`.

Two players play `rounds` rounds of a two-action normal-form game (the tables of
`coplay.envs.mixed.matrix`: the prisoner's dilemma, the default, or the stag hunt).
Each round takes two steps, both simultaneous: on the first each player says a
message, on the second each acts. Each reads the whole history so far, its own
words and moves and the other's, and writes an utterance:

    view     "prisoners dilemma , 3 rounds , round 1 : your message"
    message  "i will cooperate <end>"             ("i will defect"; stag hunt: "i will hunt stag" / "hare")
    view     "prisoners dilemma , 3 rounds , round 1 : you said i will cooperate , they said i will defect ,
              your move"
    move     "defect <end>"                       ("cooperate"; stag hunt: "stag" / "hare")
    view     "... , you did defect , they did defect , round 2 : your message"   (then "game over")

    obs      [2, L] int32  each player's view, token ids of coplay's vocabulary
    action   [2, T] int32  both players' utterances, read every step
    reward   [2]           0 on a talk step; the game's payoff on an act step:
                           prisoners_dilemma (cooperate, defect): (3, 3) both cooperate, (0, 5) and (5, 0)
                           cooperate against defect, (1, 1) both defect;
                           stag_hunt (stag, hare): (4, 4) both stag, (0, 3) and (3, 0) stag against hare,
                           (3, 3) both hare
    info     invalid_utterance [2] bool: the player's utterance was not one of the step's two texts

An episode is exactly `2 * rounds` steps. The messages are cheap talk: they bind
nobody and change no payoff. An utterance that is not one of the step's texts (a
move on a talk step, a message on an act step, anything else) forfeits
(`invalid="forfeit"`, the default): the episode ends at once, the speaker gets -1
for that step and the other player 0 (the rewards of earlier rounds stand; every
valid play earns at least 0, so forfeiting is never better); both forfeit where both
spoke so. With `invalid="random"` a uniformly random text of the step is said or
played instead.

Exact facts. In one round of the prisoner's dilemma defecting strictly dominates
(it pays 5 > 3 against cooperate and 1 > 0 against defect); by backward induction
the repeated game's unique subgame-perfect equilibrium, whatever was said, is to
defect in every round, worth `rounds * 1` to each player (against `rounds * 3` for
both cooperating throughout). In the stag hunt both (stag, stag) and (hare, hare)
are equilibria of a round; (stag, stag), worth 4 to each, is the payoff-dominant
one, and (hare, hare), worth 3, the safe one.

The view is the whole history (and whose step it is), so views are states.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.errors import ConfigError, unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, MultiDiscrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.mixed.matrix import payoff_table
from coplay.envs.text.base import TextEnv, move_table
from coplay.envs.text.games import check_invalid, parse
from coplay.envs.text.vocab import PAD, VOCAB
from coplay.envs.trees.tree import GAME_OVER, YOUR_MOVE

MAX_ROUNDS = 20                     # rounds are written with the vocabulary's numbers 1..20
YOUR_MESSAGE = "your message"
FORFEIT_REWARD = -1.0


@dataclass(frozen=True)
class TalkGame:
    """A game's words: its title in views, each action's message and move (in the payoff table's order)."""

    title: str
    messages: tuple[str, str]
    moves: tuple[str, str]


TALK_GAMES = {
    "prisoners_dilemma": TalkGame("prisoners dilemma", ("i will cooperate", "i will defect"), ("cooperate", "defect")),
    "stag_hunt": TalkGame("stag hunt", ("i will hunt stag", "i will hunt hare"), ("stag", "hare")),
}


@struct.dataclass
class MatrixTalkState:
    said: jax.Array     # [R, 2] int32 each round's messages (-1 until said)
    did: jax.Array      # [R, 2] int32 each round's actions (-1 until played)
    t: jax.Array        # [] int32 steps taken (round t // 2, talk on even t, act on odd t)
    done: jax.Array     # [] bool


class TextMatrixTalk(TextEnv):
    """A repeated two-player matrix game with cheap talk, in words (see the module's doc)."""

    views_are_states = True

    def __init__(self, game: str = "prisoners_dilemma", rounds: int = 3, max_tokens: int = 5,
                 invalid: str = "forfeit"):
        if game not in TALK_GAMES:
            raise unknown_name("game with talk", game, TALK_GAMES)
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
            raise ConfigError(f"rounds={rounds!r} is out of range; it must be an integer from 1 to {MAX_ROUNDS}")
        check_invalid(invalid)
        words = TALK_GAMES[game]
        self.game, self.rounds, self.invalid, self.vocab, self.words = game, rounds, invalid, VOCAB, words
        self.payoffs = jnp.asarray(payoff_table(game))                    # [2, 2, 2]: table[a0, a1] = (r0, r1)
        self.move_texts = words.messages + words.moves
        self._utterances = jnp.stack([move_table(texts, max_tokens, "text:matrix_talk")
                                      for texts in (words.messages, words.moves)])      # [talk / act, 2, T]
        self._said_words = jnp.asarray(np.stack([VOCAB.encode(t) for t in words.messages]))   # [2, m]
        self._did_words = jnp.asarray(np.stack([VOCAB.encode(t) for t in words.moves]))       # [2, 1]
        self._status = jnp.asarray(np.stack([VOCAB.encode(s, 2) for s in (YOUR_MESSAGE, YOUR_MOVE, GAME_OVER)]))
        self._layout = {k: jnp.asarray(v) for k, v in self._view_layout(self._said_words.shape[1]).items()}
        # One compiled program, also when called outside `jit` (rendering, eager steps), which
        # would otherwise compile each of its many small operations on its own.
        self._views = jax.jit(self._write_views)   # a nested jit inside step: no compiler options
        length = self._layout["fixed"].shape[0]
        self.spec = EnvSpec(
            name="text:matrix_talk", num_agents=2, obs_space=MultiDiscrete((len(VOCAB),) * length),
            action_space=MultiDiscrete((len(VOCAB),) * max_tokens),
            global_state_space=Box(-1.0, float(2 * rounds), (4 * rounds + 1,)), max_steps=2 * rounds,
            teams=(0, 1), roles=("player_0", "player_1"), turn_based=False, render_text=self.render_text,
        )

    # ----- views ---------------------------------------------------------------------------------
    def _view_layout(self, message_len: int) -> dict[str, np.ndarray]:
        """The longest view's token slots, in order ([F] each): `fixed` the slot's word where it
        is fixed; `fill` what else fills it (0 nothing, 1 a message's word, 2 a move, 3 the status);
        `round`, `whose` (0 the reader's, 1 the other's) and `part` (which word) of what fills it;
        `when` it is shown (0 always, 1 once its round has begun, 2 once the round's messages are
        said, 3 once its moves are played)."""
        slots: list[tuple[int, int, int, int, int, int]] = []

        def words(text: str, k: int, when: int) -> None:
            slots.extend((VOCAB.index[w], 0, k, 0, 0, when) for w in text.split())

        words(f"{self.words.title} , {self.rounds} {'round' if self.rounds == 1 else 'rounds'} ,", 0, 0)
        for k in range(self.rounds):
            words(f"round {k + 1} :", k, 1)
            for whose, who in enumerate(("you", "they")):
                words(f"{who} said", k, 2)
                slots.extend((PAD, 1, k, whose, j, 2) for j in range(message_len))
                words(",", k, 2)
            for whose, who in enumerate(("you", "they")):
                words(f"{who} did", k, 3)
                slots.append((PAD, 2, k, whose, 0, 3))
                words(",", k, 3)
        slots.extend((PAD, 3, 0, 0, j, 0) for j in range(2))
        columns = np.asarray(slots, np.int32).T
        return dict(zip(("fixed", "fill", "round", "whose", "part", "when"), columns))

    def _write_views(self, state: MatrixTalkState) -> jax.Array:
        """[2, L]: each player's view, the layout's slots filled from the history, those not
        shown yet squeezed out (kept words move left, in order) and `<pad>` after them."""
        lay = self._layout
        reader = jnp.arange(2)[:, None]
        who = jnp.where(lay["whose"] == 0, reader, 1 - reader)                             # [2, F]
        said = jnp.clip(state.said[lay["round"], who], 0)
        did = jnp.clip(state.did[lay["round"], who], 0)
        status = self._status[jnp.where(state.done, 2, state.t % 2), lay["part"]]           # [F]
        fill = lay["fill"]
        tokens = jnp.select([fill == 1, fill == 2, fill == 3],
                            [self._said_words[said, lay["part"]], self._did_words[did, 0],
                             jnp.broadcast_to(status, said.shape)], lay["fixed"])
        k = jnp.arange(self.rounds)
        begun = (state.t >= 2 * k) & ~(state.done & (state.t == 2 * k))   # not where a forfeit just ended it
        shown = jnp.stack([jnp.ones_like(begun), begun, state.said[:, 0] >= 0, state.did[:, 0] >= 0])   # [4, R]
        keep = shown[lay["when"], lay["round"]]                                                         # [F]
        at = jnp.where(keep, jnp.cumsum(keep) - 1, keep.shape[0])
        return jnp.full(tokens.shape, PAD, jnp.int32).at[:, at].set(tokens, mode="drop")

    def _timestep(self, state: MatrixTalkState, reward: jax.Array, invalid: jax.Array) -> TimeStep:
        views = self._views(state)
        return TimeStep(
            obs=views, reward=reward, done=state.done, truncated=jnp.bool_(False),
            active=jnp.broadcast_to(~state.done, (2,)), action_mask=jnp.ones((2, 0), bool),
            global_state=jnp.concatenate([state.said.reshape(-1), state.did.reshape(-1),
                                          state.t[None]]).astype(jnp.float32),
            info={"invalid_utterance": invalid},
        )

    def _reset(self, key):
        none = jnp.full((self.rounds, 2), -1, jnp.int32)
        state = MatrixTalkState(said=none, did=none, t=jnp.int32(0), done=jnp.bool_(False))
        return state, self._timestep(state, jnp.zeros(2, jnp.float32), jnp.zeros(2, bool))

    def move_mask(self, state: MatrixTalkState) -> jax.Array:
        """The messages in a round's talk, the moves in its play."""
        talk = jnp.arange(len(self.move_texts)) < len(self.words.messages)
        return jnp.broadcast_to(talk == (state.t % 2 == 0), (2, len(self.move_texts)))

    def _step(self, state: MatrixTalkState, actions, key):
        acting = state.t % 2 == 1                                   # else talking
        table = self._utterances[acting.astype(jnp.int32)]          # [2, T] this step's two texts
        choice = jax.vmap(parse, in_axes=(0, None))(jnp.asarray(actions), table)     # [2]
        invalid = ~state.done & (choice < 0)
        if self.invalid == "random":
            choice = jnp.where(invalid, jax.random.randint(key, (2,), 0, 2), choice)
            forfeit = jnp.zeros(2, bool)
        else:
            forfeit = invalid
        counts = ~state.done & ~forfeit.any()                       # the step is played
        row = jnp.clip(state.t // 2, 0, self.rounds - 1)
        said = jnp.where(counts & ~acting, state.said.at[row].set(choice), state.said)
        did = jnp.where(counts & acting, state.did.at[row].set(choice), state.did)
        payoff = self.payoffs[jnp.clip(choice[0], 0), jnp.clip(choice[1], 0)]
        reward = jnp.where(forfeit, FORFEIT_REWARD, jnp.where(counts & acting, payoff, 0.0)).astype(jnp.float32)
        t = jnp.where(state.done, state.t, state.t + 1)
        done = state.done | forfeit.any() | (t >= 2 * self.rounds)
        new = MatrixTalkState(said=said, did=did, t=t, done=done)
        return new, self._timestep(new, reward, invalid)

    def render_text(self, state: MatrixTalkState, viewer: int | None = None) -> str:
        if viewer is not None:
            return self.vocab.decode(np.asarray(self._views(state)[viewer]))
        said, did, t = np.asarray(state.said), np.asarray(state.did), int(state.t)
        lines = [f"{self.words.title}, {self.rounds} rounds"]
        for k in range(self.rounds):
            if said[k, 0] >= 0:
                line = f"round {k + 1}: said {' / '.join(repr(self.words.messages[i]) for i in said[k])}"
                if did[k, 0] >= 0:
                    r = np.asarray(self.payoffs[did[k, 0], did[k, 1]]).tolist()
                    line += f"; did {' / '.join(self.words.moves[i] for i in did[k])}, payoffs {r}"
                lines.append(line)
        lines.append(GAME_OVER if bool(state.done) else f"round {t // 2 + 1}: {'act' if t % 2 else 'talk'}")
        return "\n".join(lines)


ENVS.register("text:matrix_talk", TextMatrixTalk, kind="mixed",
              description="The repeated prisoner's dilemma or stag hunt with cheap talk: a message, then a move, "
                          "each round; always defecting is the dilemma's unique subgame-perfect equilibrium")
