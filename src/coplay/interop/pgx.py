"""pgx games as coplay environments.

    env = coplay.make("tic_tac_toe")          # also connect_four, kuhn_poker, leduc_holdem
    env = coplay.make("pgx:othello")          # any game of pgx's catalogue, by its pgx id

pgx (`pip install coplay[games]`) is imported when an environment is built, not
when this module is, so `import coplay` works without it.

How pgx's single-mover games meet coplay's contract (N = pgx's num_players,
agent i is pgx player id i):

    obs           [N, *obs_shape] float32  every player's own view of the game
                  (pgx's observation of the state for that player id)
    active        [N] bool   one-hot of the player to move; all False once done
    action_mask   [N, A] bool  the mover's row is pgx's legal_action_mask; every
                  other row is all True, because a player who is not to move
                  has its action ignored, whatever it is
    reward        [N] pgx's rewards for the step (zero-sum in two-player games;
                  the payoff comes on the step that ends the game)
    done          terminated or truncated; truncated: the game reached max_steps
                  without ending (pgx's truncated flag, which coplay sets)
    global_state  [N * prod(obs_shape) + N]: every player's flattened view, then
                  the one-hot of the player to move
    info          illegal_action [N] bool: this agent, the mover, chose an
                  illegal action on this step
                  win [N] bool: on the step that ends the game, this agent's
                  reward is larger than every other agent's (draws: none)

Illegal actions. An action of the mover outside its legal mask (or outside
0..A-1) forfeits the game: the move is not played, so the board or cards stay
as they were; the game ends (done, not truncated); the offender receives pgx's
illegal-action penalty for the game (-1; -3 in backgammon) and the others share
its opposite, so a two-player game gives (-1, +1) as in pgx. pgx 2.6 itself
also runs the illegal move through the game's rules before ending the game,
which can leave an impossible position (a square overwritten, a card count
gone wrong); coplay never applies it. The outcome is reported in
`info["illegal_action"]` and by `render_text`.

max_steps is a true bound on an episode's length: the game's own longest game
where pgx's rules bound it (below), otherwise a time limit (default 1000) at
which coplay truncates the episode; `max_steps=` overrides either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError, unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.text.games import TextGame, check_invalid
from coplay.envs.text.vocab import VOCAB
from coplay.envs.trees.tree import GAME_OVER, WAIT, YOUR_MOVE
from coplay.interop.extras import require

# The longest game each pgx game allows, in moves (one move per step).
GAME_LENGTH = {
    "tic_tac_toe": 9,         # nine squares
    "connect_four": 42,       # 6 x 7 cells
    "kuhn_poker": 3,          # check, bet, then call or fold
    "leduc_holdem": 8,        # two rounds of at most check, raise, raise, call (two raises a round)
    "othello": 120,           # at most 60 placements, and never two passes in a row before the end
    "hex": 122,               # 11 x 11 cells, plus the swap move
    "go_9x9": 162,            # pgx ends Go after 2 * size**2 moves
    "go_19x19": 722,
    "chess": 512,             # pgx's move limits (AlphaZero's)
    "shogi": 512,
    "gardner_chess": 256,
    "animal_shogi": 256,
}
DEFAULT_MAX_STEPS = 1000      # time limit for games with no bound of their own (2048, MinAtar, backgammon, ...)
HISTORY = 64                  # moves kept in the state, for text rendering

GAMES = ("tic_tac_toe", "connect_four", "kuhn_poker", "leduc_holdem")


def _pgx():
    return require("pgx", "games", "pgx games")


def pgx_games() -> list[str]:
    """Every game id that `pgx.make` accepts."""
    return list(_pgx().available_envs())


@struct.dataclass
class PgxState:
    game: Any            # pgx's State
    steps: jax.Array     # [] int32 moves played (illegal ones included)
    history: jax.Array   # [H, 2] int32 (mover, action) of the first H moves; -1 where none yet
    offender: jax.Array  # [] int32 who ended the game with an illegal action, -1 if nobody


class PgxEnv(Env):
    """A pgx game (`pgx.make(env_id)`) under coplay's contract (see the module docstring)."""

    def __init__(self, env_id: str, max_steps: int | None = None, name: str | None = None):
        pgx = _pgx()
        valid = list(pgx.available_envs())
        if env_id not in valid:
            raise unknown_name("pgx game", env_id, valid)
        if max_steps is None:
            max_steps = GAME_LENGTH.get(env_id, DEFAULT_MAX_STEPS)
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigError(f"max_steps={max_steps!r} is out of range; it must be an integer >= 1")
        self.env_id = env_id
        self.game = pgx.make(env_id)
        self.n = int(self.game.num_players)
        self.max_steps = max_steps
        self.history_len = min(max_steps, HISTORY)
        self.penalty = float(getattr(self.game, "_illegal_action_penalty", -1.0))
        # Games that keep pgx's generic step (most board and card games; not 2048,
        # MinAtar or backgammon, which replace it) are stepped by its parts (`_play`).
        core = getattr(pgx, "core", None)
        self._generic_step = core is not None and type(self.game).step is getattr(core.Env, "step", None)

        shapes = jax.eval_shape(lambda k: self._views(self.game.init(k)), jax.random.PRNGKey(0))
        mask = jax.eval_shape(lambda k: self.game.init(k).legal_action_mask, jax.random.PRNGKey(0))
        obs_shape = tuple(shapes.shape[1:])
        self.num_choices = int(mask.shape[0])
        # pgx's boolean feature planes are 0/1; other observations have no stated bounds.
        low, high = (0.0, 1.0) if shapes.dtype == jnp.bool_ else (-np.inf, np.inf)
        state_dim = self.n * int(np.prod(obs_shape)) + self.n
        self.spec = EnvSpec(
            name=name or f"pgx:{env_id}",
            num_agents=self.n,
            obs_space=Box(low, high, obs_shape),
            action_space=Discrete(self.num_choices),
            global_state_space=Box(min(low, 0.0), max(high, 1.0), (state_dim,)),
            max_steps=max_steps,
            teams=tuple(range(self.n)),   # every player for itself: (0, 1) in two-player games
            roles=tuple(f"player_{i}" for i in range(self.n)),
            turn_based=True,
            render_text=self.render_text,
        )

    # --- the contract ------------------------------------------------------------------

    def _views(self, game_state) -> jax.Array:
        """[N, *obs_shape] every player's view of the game."""
        # pgx's public observe() is narrowing to the player to move; every pgx game still
        # implements _observe(state, player_id), which is the per-player view.
        return jnp.stack([self.game._observe(game_state, jnp.int32(i)) for i in range(self.n)])

    def _timestep(self, state: PgxState, reward: jax.Array, illegal: jax.Array, ended: jax.Array,
                  views: jax.Array | None = None) -> TimeStep:
        """The TimeStep of `state`; `views`: its `_views`, where already computed."""
        g = state.game
        done = g.terminated | g.truncated
        active = jax.nn.one_hot(g.current_player, self.n, dtype=jnp.bool_) & ~done
        mask = jnp.where(active[:, None], g.legal_action_mask[None, :].astype(bool), True)
        obs = (self._views(g) if views is None else views).astype(jnp.float32)
        global_state = jnp.concatenate([obs.reshape(-1), active.astype(jnp.float32)])
        return TimeStep(
            obs=obs, reward=reward, done=done, truncated=g.truncated & ~g.terminated,
            active=active, action_mask=mask, global_state=global_state,
            info={"illegal_action": illegal, "win": ended & self._best(reward)},
        )

    def _best(self, reward: jax.Array) -> jax.Array:
        """[N] bool: reward strictly above every other agent's (never with one agent)."""
        if self.n == 1:
            return jnp.zeros(1, bool)
        others = jnp.where(jnp.eye(self.n, dtype=bool), -jnp.inf, reward[None, :])
        return reward > others.max(axis=1)

    def _reset(self, key: jax.Array) -> tuple[PgxState, TimeStep]:
        state = PgxState(
            game=self.game.init(key),
            steps=jnp.zeros((), jnp.int32),
            history=jnp.full((self.history_len, 2), -1, jnp.int32),
            offender=jnp.full((), -1, jnp.int32),
        )
        no = jnp.zeros(self.n, bool)
        return state, self._timestep(state, jnp.zeros(self.n, jnp.float32), no, jnp.zeros((), bool))

    def _step(self, state: PgxState, actions: jax.Array, key: jax.Array) -> tuple[PgxState, TimeStep]:
        g = state.game
        over = g.terminated | g.truncated
        mover = jnp.clip(g.current_player, 0, self.n - 1)
        action = actions.astype(jnp.int32)[mover]
        in_range = (action >= 0) & (action < self.num_choices)
        legal = in_range & g.legal_action_mask[jnp.clip(action, 0, self.num_choices - 1)]
        illegal = ~over & ~legal

        # The generic rules (`_play`) may run an illegal move, as pgx's own generic step
        # does, since its result is discarded for the forfeit: the clipped action needs no
        # search for a legal one. Games with their own step receive a legal action.
        to_play = (jnp.clip(action, 0, self.num_choices - 1) if self._generic_step
                   else jnp.where(legal, action, jnp.argmax(g.legal_action_mask)))
        played = self._play(g, to_play, key)
        g = self._settle(g, over, illegal, played, self._forfeit(g, mover))

        steps = state.steps + (~over).astype(jnp.int32)
        g = g.replace(truncated=g.truncated | (~g.terminated & (steps >= self.max_steps)))
        views = self._views(g)
        if self._generic_step:  # pgx's step ends by observing the new position for its mover
            g = g.replace(observation=views[g.current_player])
        row = jnp.where(~over & (state.steps < self.history_len), state.steps, self.history_len)
        state = PgxState(
            game=g,
            steps=steps,
            history=state.history.at[row].set(jnp.stack([mover, action]), mode="drop"),
            offender=jnp.where(illegal, mover, state.offender),
        )
        ended = ~over & (g.terminated | g.truncated)
        reward = g.rewards.astype(jnp.float32)
        illegal_by = jax.nn.one_hot(mover, self.n, dtype=jnp.bool_) & illegal
        return state, self._timestep(state, reward, illegal_by, ended, views)

    def _play(self, g, action: jax.Array, key: jax.Array):
        """pgx's `step` of game state `g` with `action` ([] int32, in range).

        Where the game keeps pgx's generic `Env.step`, its parts run here: its rules
        (`_step`) and the legal mask of an ended game, without its branches (`cond`)
        for an illegal action and for a finished game, which under `vmap` become selects
        of every field of the state; `_settle` makes those choices, in one select per
        field. Its last part, the mover's observation of the new position, is taken in
        `_step` from every player's views, which the TimeStep needs anyway."""
        if not self._generic_step:
            return self.game.step(g, action, key)
        played = self.game._step(g.replace(_step_count=g._step_count + 1), action, key)
        # As pgx: every action is legal in an ended game (so masks never go empty).
        return played.replace(legal_action_mask=played.legal_action_mask | played.terminated)

    def _settle(self, g, over: jax.Array, illegal: jax.Array, played, forfeit):
        """The state after a step from `g`: `forfeit` where the move was `illegal`; where
        the game had ended (`over`), `g` as it was with zero rewards (pgx's step does
        that itself in games that replace the generic step); otherwise `played`.

        `forfeit` shares every field but four with `g` (`_forfeit`), and those fields
        take one select on `over | illegal` instead of two in a row."""
        if not self._generic_step:
            return jax.tree.map(lambda f, p: jnp.where(illegal, f, p), forfeit, played)
        stay = g.replace(rewards=jnp.zeros_like(g.rewards))
        keep = over | illegal

        def choose(s, f, p):
            if s is f:
                return jnp.where(keep, s, p)
            return jnp.where(illegal, f, jnp.where(over, s, p))

        return jax.tree.map(choose, stay, forfeit, played)

    def _forfeit(self, g, mover: jax.Array):
        """The game `g` ended by `mover`'s illegal action, the move itself not played."""
        others = -self.penalty / (self.n - 1) if self.n > 1 else self.penalty
        rewards = jnp.where(jnp.arange(self.n) == mover, self.penalty, others).astype(jnp.float32)
        return g.replace(
            rewards=rewards.astype(g.rewards.dtype),
            terminated=jnp.ones_like(g.terminated),
            legal_action_mask=jnp.ones_like(g.legal_action_mask),
            _step_count=g._step_count + 1,
        )

    # --- text -----------------------------------------------------------------------------

    def render_text(self, state: PgxState, viewer: int | None = None) -> str:
        """A readable description of one (unbatched) state. With `viewer`, only what
        that player may see (other players' private cards hidden)."""
        render = _RENDERERS.get(self.env_id, _render_generic)
        return render(self, state, viewer)


# --- renderers ----------------------------------------------------------------------------

def _np(x) -> np.ndarray:
    return np.asarray(jax.device_get(x))


def _moves(state: PgxState) -> list[tuple[int, int]]:
    """(mover, action) of the recorded moves that were played, in order (an
    illegal last move was not played and is left out)."""
    moves = [(int(p), int(a)) for p, a in _np(state.history) if p >= 0]
    steps = int(_np(state.steps))
    if int(_np(state.offender)) >= 0 and steps <= len(moves):
        moves = moves[:steps - 1]
    return moves


def _outcome(env: PgxEnv, state: PgxState) -> str:
    """One line for a finished game; empty while it goes on."""
    g = state.game
    if not bool(_np(g.terminated | g.truncated)):
        return ""
    r = _np(g.rewards)
    payoff = ", ".join(f"player_{i} {float(v):+g}" for i, v in enumerate(r))
    offender = int(_np(state.offender))
    if offender >= 0:
        steps = int(_np(state.steps))
        h = _np(state.history)
        what = f"an illegal move ({int(h[steps - 1, 1])})" if steps <= len(h) else "an illegal move"
        return f"Game over: player_{offender} made {what} and forfeits ({payoff})."
    if bool(_np(g.truncated)) and not bool(_np(g.terminated)):
        return f"Game stopped at the limit of {env.max_steps} moves."
    return f"Game over ({payoff})."


def _to_move(env: PgxEnv, state: PgxState, names: Callable[[int], str] = str) -> str:
    g = state.game
    if bool(_np(g.terminated | g.truncated)):
        return _outcome(env, state)
    legal = [names(int(a)) for a in np.flatnonzero(_np(g.legal_action_mask))]
    return f"player_{int(_np(g.current_player))} to move; legal: {', '.join(legal)}."


def _board(env: PgxEnv, state: PgxState, rows: int, cols: int, header: bool) -> str:
    """Tic-tac-toe and connect four: board cells hold -1 (empty) or the color that
    played there, 0 for X (who moves first) and 1 for O."""
    g = state.game
    board = _np(g._x.board).reshape(rows, cols)
    color, player = int(_np(g._x.color)), int(_np(g.current_player))
    x_player = player if color == 0 else 1 - player
    symbol = {-1: ".", 0: "X", 1: "O"}
    lines = [" ".join(str(c) for c in range(cols))] if header else []
    lines += [" ".join(symbol[int(v)] for v in row) for row in board]
    lines.append(f"player_{x_player} is X, player_{1 - x_player} is O.")
    if bool(_np(g.terminated | g.truncated)):
        winner = int(_np(g._x.winner))
        if int(_np(state.offender)) >= 0 or not bool(_np(g.terminated)):
            lines.append(_outcome(env, state))
        elif winner >= 0:
            won = x_player if winner == 0 else 1 - x_player
            lines.append(f"{symbol[winner]} (player_{won}) wins.")
        else:
            lines.append("Draw.")
    else:
        lines.append(f"{symbol[color]} (player_{player}) to move; legal: "
                     f"{', '.join(str(a) for a in np.flatnonzero(_np(g.legal_action_mask)))}.")
    return "\n".join(lines)


def _render_tic_tac_toe(env: PgxEnv, state: PgxState, viewer: int | None) -> str:
    return _board(env, state, 3, 3, header=False)


def _render_connect_four(env: PgxEnv, state: PgxState, viewer: int | None) -> str:
    return _board(env, state, 6, 7, header=True)


CARDS = "JQK"


def _cards_line(cards: list[int], viewer: int | None) -> str:
    shown = [CARDS[c] if viewer is None or i == viewer else "?" for i, c in enumerate(cards)]
    return ", ".join(f"player_{i} holds {c}" for i, c in enumerate(shown))


def _render_kuhn(env: PgxEnv, state: PgxState, viewer: int | None) -> str:
    """pgx's Kuhn poker: cards 0, 1, 2 = J, Q, K; action 0 bets (or calls a bet),
    action 1 passes (checks, or folds to a bet); each player antes 1."""
    g = state.game
    lines = ["Kuhn poker. " + _cards_line([int(c) for c in _np(g._cards)], viewer) + "."]
    said, facing_bet = [], False
    for player, action in _moves(state):
        word = ("call" if action == 0 else "fold") if facing_bet else ("bet" if action == 0 else "check")
        facing_bet = facing_bet or action == 0
        said.append(f"player_{player} {word}")
    lines.append("Betting: " + (", ".join(said) if said else "none yet") + ".")
    chips = 1 + _np(g._pot)
    lines.append(f"Pot: {int(chips.sum())} (player_0 put in {int(chips[0])}, player_1 put in {int(chips[1])}).")
    words = ("call", "fold") if facing_bet else ("bet", "check")
    lines.append(_to_move(env, state, lambda a: words[a]))
    return "\n".join(lines)


def _render_leduc(env: PgxEnv, state: PgxState, viewer: int | None) -> str:
    """pgx's Leduc hold'em: cards 0, 1, 2 = J, Q, K (two of each); action 0 calls
    (checks when nothing is owed), 1 raises (2 chips in round 1, 4 in round 2,
    at most twice a round), 2 folds; each player antes 1."""
    g = state.game
    cards = [int(c) for c in _np(g._cards)]
    rounds = _leduc_rounds(state)
    # pgx's round counter moves on with the call or fold that closes a round, so a
    # fold in the first round also reads 1; the public card is dealt only when
    # the first round was called through.
    rnd = int(_np(g._round))
    folded_first = any(a == 2 for _, a in rounds[0])
    dealt = rnd >= 1 and not folded_first
    current = 1 if dealt else 0
    lines = [f"Leduc hold'em, round {current + 1} of 2. " + _cards_line(cards[:2], viewer) + "."]
    lines.append(f"Public card: {CARDS[cards[2]] if dealt else 'not dealt yet'}.")
    for i, moves in enumerate(rounds):
        if moves or i == current:
            lines.append(f"Round {i + 1} betting: " + (", ".join(_leduc_words(moves)) or "none yet") + ".")
    chips = _np(g._chips)
    lines.append(f"Pot: {int(chips.sum())} (player_0 put in {int(chips[0])}, player_1 put in {int(chips[1])}).")
    owed = int(chips.max() - chips.min()) > 0
    raised = any(a == 1 for _, a in rounds[current])
    lines.append(_to_move(env, state, lambda a: ["call" if owed else "check",
                                                 "raise" if raised else "bet", "fold"][a]))
    return "\n".join(lines)


def _leduc_rounds(state: PgxState) -> list[list[tuple[int, int]]]:
    """The recorded moves split by betting round: a round ends on a fold, or on
    a call that is not the round's first action."""
    rounds: list[list[tuple[int, int]]] = [[], []]
    r = 0
    for player, action in _moves(state):
        rounds[r].append((player, action))
        if r == 0 and action == 0 and len(rounds[0]) > 1:
            r = 1
    return rounds


def _leduc_words(moves: list[tuple[int, int]]) -> list[str]:
    words, raised = [], False
    for player, action in moves:
        if action == 0:
            word = "call" if raised else "check"
        elif action == 1:
            word = "raise" if raised else "bet"
            raised = True
        else:
            word = "fold"
        words.append(f"player_{player} {word}")
    return words


def _render_generic(env: PgxEnv, state: PgxState, viewer: int | None) -> str:
    steps = int(_np(state.steps))
    return f"{env.spec.name} after {steps} move{'s' if steps != 1 else ''}. {_to_move(env, state)}"


_RENDERERS: dict[str, Callable[[PgxEnv, PgxState, int | None], str]] = {
    "tic_tac_toe": _render_tic_tac_toe,
    "connect_four": _render_connect_four,
    "kuhn_poker": _render_kuhn,
    "leduc_holdem": _render_leduc,
}


# --- registration -------------------------------------------------------------------------

def _game(env_id: str) -> Callable[[], PgxEnv]:
    def make() -> PgxEnv:
        return PgxEnv(env_id, name=env_id)

    make.__name__ = make.__qualname__ = env_id
    make.__doc__ = f"pgx's {env_id} (needs `pip install coplay[games]`)."
    return make


def make_pgx(game: str, max_steps: int | None = None) -> PgxEnv:
    """`pgx:<game>`: any pgx game; `max_steps` is the episode limit (default: the
    game's own bound, else 1000)."""
    return PgxEnv(game, max_steps=max_steps)


_DESCRIPTIONS = {
    "tic_tac_toe": "Tic-tac-toe (pgx): two players alternate on a 3x3 board; three in a row wins.",
    "connect_four": "Connect four (pgx): drop discs into a 6x7 grid; four in a line wins.",
    "kuhn_poker": "Kuhn poker (pgx): three cards, one bet; the smallest imperfect-information poker.",
    "leduc_holdem": "Leduc hold'em (pgx): six cards, a private and a public card, two betting rounds.",
}

for _id in GAMES:
    ENVS.register(_id, _game(_id), kind="competitive", description=_DESCRIPTIONS[_id])

ENVS.register_prefix(
    "pgx", make_pgx, kind="games", choices=pgx_games,
    description="Any game of pgx's catalogue by its pgx id, e.g. pgx:othello, pgx:go_9x9, pgx:chess; "
                "env.max_steps sets the episode limit (needs `pip install coplay[games]`).",
)

# --- in words ------------------------------------------------------------------------------

# Board games played in words (`text:<game>`): title, rows, columns.

BOARDS = {"tic_tac_toe": ("tic tac toe", 3, 3), "connect_four": ("connect four", 6, 7)}


class TextBoardGame(TextGame):
    """pgx's tic-tac-toe or connect four in words (`coplay.envs.text.games.TextGame`):

        text:tic_tac_toe    "tic tac toe , you are x : x _ o / _ x _ / _ _ o , your move"   moves "1".."9"
        text:connect_four   "connect four , you are o : <6 rows of 7 cells, top row first> , wait"
                            moves "1".."7"

    A board's cells are `_` (empty), `x` (the first mover's marks) and `o`; squares
    are numbered 1..9 row by row, columns 1..7 from the left. The reader's own
    symbol is in its view, so a view is its reader's state. pgx draws who moves
    first (plays x) from the key. `opening=k`: each episode starts after 0 to k random
    legal moves (`TextGame`)."""

    def __init__(self, name: str = "tic_tac_toe", max_tokens: int = 2, invalid: str = "forfeit", opening: int = 0):
        if name not in BOARDS:
            raise unknown_name("board game in words", name, BOARDS)
        check_invalid(invalid)
        title, rows, cols = BOARDS[name]
        game = PgxEnv(name, name=name)             # the game as registered: `tic_tac_toe`, `connect_four`
        self.rows, self.cols = rows, cols
        self._title = jnp.asarray(VOCAB.encode(f"{title} , you are"))
        self._symbols = jnp.asarray(VOCAB.encode("x o"))
        self._cells = jnp.asarray(VOCAB.encode("_ x o"))           # board values -1, 0 (x), 1 (o)
        self._colon, self._slash, self._comma = (jnp.int32(VOCAB.index[w]) for w in (":", "/", ","))
        self._status = jnp.asarray(np.stack([VOCAB.encode(s, 2) for s in (YOUR_MOVE, WAIT, GAME_OVER)]))
        length = len(self._title) + 2 + rows * cols + rows - 1 + 1 + 2
        super().__init__(game, [str(a + 1) for a in range(game.num_choices)], length, f"text:{name}",
                         max_tokens, invalid, opening)

    def text_views(self, game_state) -> jax.Array:
        g = game_state.game
        n = 2
        done = g.terminated | g.truncated
        x_player = jnp.where(g._x.color == 0, g.current_player, 1 - g.current_player)
        me = jnp.arange(n)
        symbol = self._symbols[jnp.where(me == x_player, 0, 1)]                           # [2]
        cells = self._cells[g._x.board.reshape(self.rows, self.cols) + 1]                 # [rows, cols]
        slashes = jnp.full((self.rows, 1), self._slash)
        board = jnp.concatenate([cells, slashes], axis=1).reshape(-1)[:-1]                # rows joined by "/"
        status = jnp.where(done, 2, jnp.where(me == g.current_player, 0, 1))
        head = jnp.broadcast_to(self._title, (n, self._title.shape[0]))
        middle = jnp.concatenate([self._colon[None], board, self._comma[None]])
        return jnp.concatenate([head, symbol[:, None], jnp.broadcast_to(middle, (n, middle.shape[0])),
                                self._status[status]], axis=1)


def _in_words(name: str):
    def make(max_tokens: int = 2, invalid: str = "forfeit", opening: int = 0) -> TextBoardGame:
        return TextBoardGame(name, max_tokens, invalid, opening)
    make.__doc__ = TextBoardGame.__init__.__doc__
    return make


for _name, (_title, _rows, _cols) in BOARDS.items():
    ENVS.register(f"text:{_name}", _in_words(_name), kind="competitive",
                  description=f"{_title} in words: the board and your symbol as text, a move is the number "
                              f"of a {'square' if _name == 'tic_tac_toe' else 'column'} (pgx's game underneath)")

__all__ = ["BOARDS", "GAMES", "GAME_LENGTH", "PgxEnv", "PgxState", "TextBoardGame", "make_pgx", "pgx_games"]
