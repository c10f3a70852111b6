"""A Lewis signalling game in words: `coplay.make("text:lewis", states=4)`.

Nature draws one of `states` objects uniformly from the episode's key. The sender
(agent 0) sees it and says one signal word; the receiver (agent 1) sees only the
signal and chooses an object. The signal words ("x", "o", "_", "/", "a", "an", the
first `states` of them) mean nothing to begin with: any meaning is the pair's
convention. Turn-based, the sender first:

    sender's view    "signal game , you are the sender , object 2 , your move"
    its move         "o <end>"
    receiver's view  "signal game , you are the receiver , they said o , your move"
    its move         "choose 2 <end>"
    end              "... , they said o , you chose 2 , game over"

    obs      [2, L] int32  each player's view, token ids of coplay's vocabulary
    action   [2, T] int32  each player's utterance (only the mover's is read)
    reward   [2]           both +1 at the end when the choice is the object, else both 0 (a forfeit: -1, below)
    info     invalid_utterance [2] bool: the mover's utterance was no signal / no "choose <k>"

An utterance that is not one of the mover's texts forfeits (`invalid="forfeit"`, the
default): the episode ends at once, the speaker gets -1 and the other 0, so that any
valid utterance is better than none. With `invalid="random"` a uniformly random
signal (or choice) is made instead.

Exact facts, with K = `states` and the object uniform: a signalling system (the
sender maps objects one-to-one onto signals, the receiver inverts the map) earns
expected reward exactly 1, the optimum; a pooling sender (one signal for every
object) earns exactly 1/K whatever the receiver does; in general, against its best
receiver, a sender that uses d distinct signals earns d/K; and the uniformly random
pair earns 1/K. `outcome(object, signal, choice)` plays one episode from a given
object, so these expectations are computed by enumeration.

Each view is its reader's information state (the sender's object, the signal the
receiver heard), so views are states.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, MultiDiscrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.text.base import TextEnv, move_table
from coplay.envs.text.games import check_invalid, read_move
from coplay.envs.text.vocab import VOCAB
from coplay.envs.trees.tree import GAME_OVER, WAIT, YOUR_MOVE

SIGNALS = ("x", "o", "_", "/", "a", "an")      # the signal alphabet: words with no meaning in this game
MIN_STATES, MAX_STATES = 2, len(SIGNALS)
FORFEIT_REWARD = -1.0


@struct.dataclass
class LewisState:
    obj: jax.Array      # [] int32 the object nature drew, 0 .. K-1
    signal: jax.Array   # [] int32 the sender's signal (-1 until said)
    choice: jax.Array   # [] int32 the receiver's choice (-1 until chosen)
    t: jax.Array        # [] int32 the mover: 0 the sender, 1 the receiver
    done: jax.Array     # [] bool


class TextLewis(TextEnv):
    """A Lewis signalling game in words (see the module's doc)."""

    views_are_states = True

    def __init__(self, states: int = 3, max_tokens: int = 3, invalid: str = "forfeit"):
        if isinstance(states, bool) or not isinstance(states, int) or not MIN_STATES <= states <= MAX_STATES:
            raise ConfigError(f"states={states!r} is out of range; it must be an integer from {MIN_STATES} to "
                              f"{MAX_STATES} (one signal word each: {', '.join(SIGNALS)})")
        check_invalid(invalid)
        self.states, self.invalid, self.vocab = states, invalid, VOCAB
        self.signals = SIGNALS[:states]
        self.choices = tuple(f"choose {k + 1}" for k in range(states))
        self.move_texts = self.signals + self.choices
        self._utterances = jnp.stack([move_table(texts, max_tokens, "text:lewis")
                                      for texts in (self.signals, self.choices)])       # [mover, K, T]
        # Every view, written once: [object, signal + 1, choice + 1, status, player] (status 0 playing, 1 over).
        texts = [[[[[self.view_text(o, s, c, over, p) for p in (0, 1)] for over in (False, True)]
                   for c in range(-1, states)] for s in range(-1, states)] for o in range(states)]
        flat = [v for a in texts for b in a for c in b for d in c for v in d]
        length = max(len(v.split()) for v in flat)
        self._views = jnp.asarray(np.asarray([VOCAB.encode(v, length) for v in flat]).reshape(
            states, states + 1, states + 1, 2, 2, length))
        self.spec = EnvSpec(
            name="text:lewis", num_agents=2, obs_space=MultiDiscrete((len(VOCAB),) * length),
            action_space=MultiDiscrete((len(VOCAB),) * max_tokens),
            global_state_space=Box(-1.0, float(states - 1), (4,)), max_steps=2,
            teams=(0, 0), roles=("sender", "receiver"), turn_based=True, render_text=self.render_text,
        )

    # ----- views ---------------------------------------------------------------------------------
    def view_text(self, obj: int, signal: int, choice: int, over: bool, player: int) -> str:
        """Player `player`'s view (0 the sender, 1 the receiver) as text; -1: not said or chosen yet."""
        if player == 0:
            parts = ["signal game", "you are the sender", f"object {obj + 1}"]
            parts += [f"you said {self.signals[signal]}"] if signal >= 0 else []
            parts += [f"they chose {choice + 1}"] if choice >= 0 else []
        else:
            parts = ["signal game", "you are the receiver"]
            parts += [f"they said {self.signals[signal]}"] if signal >= 0 else []
            parts += [f"you chose {choice + 1}"] if choice >= 0 else []
        mover = 0 if signal < 0 else 1
        return " , ".join([*parts, GAME_OVER if over else YOUR_MOVE if player == mover else WAIT])

    def _timestep(self, state: LewisState, reward: jax.Array, invalid: jax.Array) -> TimeStep:
        views = self._views[state.obj, state.signal + 1, state.choice + 1, state.done.astype(jnp.int32)]
        return TimeStep(
            obs=views, reward=reward, done=state.done, truncated=jnp.bool_(False),
            active=(jnp.arange(2) == state.t) & ~state.done, action_mask=jnp.ones((2, 0), bool),
            global_state=jnp.stack([state.obj, state.signal, state.choice, state.t]).astype(jnp.float32),
            info={"invalid_utterance": invalid},
        )

    def start(self, obj: jax.Array) -> tuple[LewisState, TimeStep]:
        """The first step of an episode whose object is `obj` (0 .. K-1): what `reset` does
        after drawing it."""
        state = LewisState(obj=jnp.asarray(obj, jnp.int32), signal=jnp.int32(-1), choice=jnp.int32(-1),
                           t=jnp.int32(0), done=jnp.bool_(False))
        return state, self._timestep(state, jnp.zeros(2, jnp.float32), jnp.zeros(2, bool))

    def _reset(self, key):
        return self.start(jax.random.randint(key, (), 0, self.states))

    def move_mask(self, state: LewisState) -> jax.Array:
        """The sender's signals, the receiver's choices."""
        return jnp.repeat(jnp.eye(2, dtype=bool), self.states, axis=1)

    def _step(self, state: LewisState, actions, key):
        mover = state.t
        move, invalid, forfeit = read_move(jnp.asarray(actions)[mover], self._utterances[mover],
                                           jnp.ones(self.states, bool), ~state.done, self.invalid, key)
        plays = ~state.done & ~forfeit
        signal = jnp.where(plays & (mover == 0), move, state.signal)
        choice = jnp.where(plays & (mover == 1), move, state.choice)
        chosen = plays & (mover == 1)
        me = jnp.arange(2) == mover
        reward = jnp.where(me & forfeit, FORFEIT_REWARD, jnp.where(chosen & (choice == state.obj), 1.0, 0.0))
        done = state.done | forfeit | chosen
        new = LewisState(obj=state.obj, signal=signal, choice=choice, t=jnp.where(done, mover, 1), done=done)
        return new, self._timestep(new, reward.astype(jnp.float32), me & invalid)

    def outcome(self, obj: jax.Array, signal: jax.Array, choice: jax.Array) -> jax.Array:
        """[2] the rewards of the episode from object `obj` in which the sender says signal
        `signal` and the receiver writes "choose <choice + 1>", played through `step`."""
        state, _ = self.start(obj)
        key = jax.random.PRNGKey(0)
        state, _ = self.step(state, jnp.stack([self._utterances[0, signal]] * 2), key)
        _, ts = self.step(state, jnp.stack([self._utterances[1, choice]] * 2), key)
        return ts.reward

    def render_text(self, state: LewisState, viewer: int | None = None) -> str:
        if viewer is not None:
            obj, sig, cho, over = (int(x) for x in (state.obj, state.signal, state.choice, state.done))
            return self.view_text(obj, sig, cho, bool(over), viewer)
        line = f"signal game, object {int(state.obj) + 1}"
        if int(state.signal) >= 0:
            line += f"; signal {self.signals[int(state.signal)]!r}"
        if int(state.choice) >= 0:
            line += f"; chose {int(state.choice) + 1}"
        return line + (f"; {GAME_OVER}" if bool(state.done) else "")


ENVS.register("text:lewis", TextLewis, kind="cooperative",
              description="A Lewis signalling game in words: the sender names the object with a meaningless "
                          "signal, the receiver chooses; a signalling system earns exactly 1, pooling 1/K")
