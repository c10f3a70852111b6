"""TextArena's games in coplay, and coplay's text games behind TextArena's loop.

    env = coplay.make("textarena:TicTacToe-v0")       # a HostTextEnv (needs coplay[textarena])
    game = env.game(); turn = game.reset(seed=0)      # coplay.envs.text.host_game's contract
    arena = to_textarena("text:kuhn_poker")           # reset / get_observation / step / close

**TextArena -> coplay** (`TextArenaGame`, `env=textarena:<id>`). A copy of the game
behind the host text game contract: a turn is TextArena's `get_observation()` (the
player to move and everything it has been shown), a reply goes to `step`, and the
rewards are what `close()` reports once the game is done. What coplay adds:

- **invalid moves counted per player**, from the game's own error counter (TextArena
  lets a player retry once, then the game's rule for a repeated invalid move applies);
- **legal moves where the game lists them**: the quoted bracketed moves of the last
  line of the observation that names the available moves or actions (`legal_moves`);
  None where there is no such line (the reply is then the game's alone to parse);
- **one step's information like every other's** (`turn`, `player`, `reason`), where
  TextArena's own is empty on most steps and names the end's reason on the last;
- **determinism per copy**: TextArena's games draw from Python's global `random`
  (and some from NumPy's); each copy keeps its own streams and swaps them in around
  its calls, so a seed gives the same game whatever other copies do in between;
- **status**: a game that raises ends `failed` (its exception in `reason`), one that
  reaches `max_turns` replies first ends `truncated`; neither has rewards.

`catalogue()` tries every registered game once with uniformly random legal replies and
says which work here and, for the others, why (`benchmarks/textarena_games.py`).

**coplay -> TextArena** (`to_textarena`). A coplay text environment (compiled, stepped
one game at a time on the host) with TextArena's loop API: `reset(num_players, seed)`,
`get_observation() -> (player, text)`, `step(text) -> (done, info)`, `close() ->
(rewards, game_info)`. The observation is the view coplay's environment writes, then
the line `Available moves: '[m1]', '[m2]', ...` with *this player's* legal moves
(`move_mask(state)`, never another player's), and `step`'s info has the same keys from
the first step on; in simultaneous games the players to move speak one after another
and the environment steps once all have spoken. A reply is read as coplay's
language-model players' replies are (`coplay.envs.text.vocab.utterance`).
"""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from coplay.core.errors import ConfigError, HostEnvError, UnknownNameError, did_you_mean
from coplay.core.registry import ENVS
from coplay.envs.text.host_game import HostTextEnv, HostTextGame, Outcome, Status, Step, Turn
from coplay.envs.text.vocab import VOCAB, utterance
from coplay.interop.extras import require

_AVAILABLE = re.compile(r"(available|valid|legal)\s+(moves|actions)", re.IGNORECASE)
_QUOTED = re.compile(r"'(\[[^\]\n]*\])'")
PLAYER_COUNTS = (2, 1, 3, 4, 5, 6)


def legal_moves(observation: str) -> tuple[str, ...] | None:
    """The quoted bracketed moves (`'[4]'`, `'[check]'`) of the last line of `observation`
    that names the available (valid, legal) moves or actions; None where no line does."""
    for line in reversed(observation.splitlines()):
        if _AVAILABLE.search(line):
            moves = tuple(dict.fromkeys(_QUOTED.findall(line)))
            return moves or None
    return None


def _textarena() -> Any:
    return require("textarena", "textarena", "env=textarena:<id>")


def registered() -> list[str]:
    """Every game id TextArena registers (its `-raw` and `-train` variants included)."""
    from textarena.envs.registration import ENV_REGISTRY  # noqa: PLC0415 - an extra, imported on use

    _textarena()
    return sorted(ENV_REGISTRY)


class _Streams:
    """A copy's own Python and NumPy global random streams, swapped in around its calls."""

    def __init__(self, seed: int):
        keep_py, keep_np = random.getstate(), np.random.get_state()
        random.seed(seed)
        np.random.seed(seed % 2**32)
        self.py, self.np = random.getstate(), np.random.get_state()
        random.setstate(keep_py)
        np.random.set_state(keep_np)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        keep_py, keep_np = random.getstate(), np.random.get_state()
        random.setstate(self.py)
        np.random.set_state(self.np)
        try:
            yield
        finally:
            self.py, self.np = random.getstate(), np.random.get_state()
            random.setstate(keep_py)
            np.random.set_state(keep_np)


class TextArenaGame(HostTextGame):
    """One copy of a game with TextArena's loop API (`make()` builds it: `ta.make(id)` or
    `to_textarena(...)`) behind the host text game contract (see the module's doc)."""

    def __init__(self, name: str, make: Callable[[], Any], num_players: int, max_turns: int):
        self.name, self.num_players, self.max_turns = name, num_players, max_turns
        self.env = make()
        self._streams = _Streams(0)
        self._turn: Turn | None = None
        self._status: Status = "failed"
        self._reason, self._turns = "not started", 0
        self._rewards = np.full(num_players, np.nan)
        self._invalid = np.zeros(num_players, np.int64)

    def _state(self) -> Any:
        env = self.env
        while not hasattr(env, "state") and hasattr(env, "env"):
            env = env.env
        return getattr(env, "state", None)

    def _fail(self, error: BaseException) -> None:
        self._status, self._reason, self._turn = "failed", f"{type(error).__name__}: {error}", None

    def _observe(self) -> None:
        player, observation = self.env.get_observation()
        if not isinstance(observation, str):   # some games hand a list of (sender, message, kind)
            observation = "\n".join(str(m[1]) if isinstance(m, tuple) and len(m) > 1 else str(m)
                                    for m in observation)
        self._turn = Turn(int(player), observation, legal_moves(observation))

    def reset(self, seed: int) -> Turn:
        self._streams = _Streams(seed)
        self._rewards = np.full(self.num_players, np.nan)
        self._invalid = np.zeros(self.num_players, np.int64)
        self._status, self._reason, self._turns = "complete", "", 0
        with self._streams.active():
            try:
                self.env.reset(num_players=self.num_players, seed=seed)
                self._observe()
            except Exception as e:  # noqa: BLE001 - a game that raises fails, with its error kept
                self._fail(e)
                raise HostEnvError(f"{self.name}: reset raised {type(e).__name__}: {e}") from e
        assert self._turn is not None
        return self._turn

    def step(self, reply: str) -> Step:
        turn = self._turn
        if turn is None:
            raise HostEnvError(f"{self.name}: step after the game ended (status {self._status}); reset it")
        state = self._state()
        errors = getattr(state, "error_count", 0)
        flagged = bool((getattr(state, "game_info", None) or {}).get(turn.player, {}).get("invalid_move", False))
        info: dict[str, Any] = {}
        with self._streams.active():
            try:
                done, info = self.env.step(str(reply))
                info = dict(info or {})
                state = self._state()
                game_info = getattr(state, "game_info", None) or {}
                invalid = (info.get("invalid_move") is True or getattr(state, "error_count", 0) > errors
                           or (not flagged and bool(game_info.get(turn.player, {}).get("invalid_move", False))))
                self._invalid[turn.player] += int(invalid)
                self._turns += 1
                if done:
                    self._finish()
                elif self._turns >= self.max_turns:
                    self._status, self._reason, self._turn = "truncated", f"{self.max_turns} replies", None
                else:
                    self._observe()
            except Exception as e:  # noqa: BLE001 - a game that raises fails, with its error kept
                invalid = False
                self._fail(e)
        reason = str(info.get("reason", "")) if self._turn is None and self._status == "complete" else ""
        return Step(self._turn, bool(invalid),
                    {"turn": self._turns, "player": turn.player, "reason": reason or self._reason})

    def _finish(self) -> None:
        rewards, game_info = self.env.close()
        self._turn = None
        if not rewards:
            self._status, self._reason = "failed", "the game ended without rewards"
            return
        self._rewards = np.asarray([float(rewards.get(p, np.nan)) for p in range(self.num_players)])
        if not np.isfinite(self._rewards).all():
            self._status, self._reason = "failed", f"rewards {rewards} do not name every player"
            return
        reasons = {str(v.get("reason")) for v in (game_info or {}).values() if isinstance(v, dict) and v.get("reason")}
        self._reason = "; ".join(sorted(reasons))

    def outcome(self) -> Outcome:
        if self._turn is not None:
            raise HostEnvError(f"{self.name}: the game is not over")
        rewards = self._rewards if self._status == "complete" else np.full(self.num_players, np.nan)
        return Outcome(rewards, self._invalid.copy(), self._status, self._reason, self._turns)


class TextArenaEnv(HostTextEnv):
    """`env=textarena:<id>`: a TextArena game as a registered host text environment."""

    def __init__(self, game_id: str, num_players: int | None = None, max_turns: int = 200):
        ta = _textarena()
        ids = registered()
        if game_id not in ids:
            base = [i for i in ids if re.fullmatch(r"[^-]+-v\d+", i)]
            raise UnknownNameError(f"unknown TextArena game {game_id!r}{did_you_mean(game_id, ids)} the games (each "
                                   f"also with variants such as -raw and -train): {', '.join(base)}")
        if max_turns < 1:
            raise ConfigError(f"textarena:{game_id}: max_turns={max_turns} must be at least 1")
        self.game_id = game_id
        self._make = lambda: ta.make(game_id)
        players = self._players(num_players)
        super().__init__(f"textarena:{game_id}", players, max_turns)

    def _players(self, asked: int | None) -> int:
        """`asked`, or the first of 2, 1, 3, 4, 5, 6 players the game resets with."""
        tried: list[str] = []
        for n in ([asked] if asked is not None else PLAYER_COUNTS):
            env = self._make()
            keep = random.getstate(), np.random.get_state()
            try:
                env.reset(num_players=n, seed=0)
                return n
            except Exception as e:  # noqa: BLE001 - each refusal is reported below
                tried.append(f"{n}: {type(e).__name__}: {e}"[:160])
            finally:
                random.setstate(keep[0])
                np.random.set_state(keep[1])
        raise ConfigError(f"textarena:{self.game_id} does not start with "
                          + ("num_players=" + str(asked) if asked is not None else "1 to 6 players")
                          + f" ({'; '.join(tried)})")

    def game(self) -> TextArenaGame:
        return TextArenaGame(self.spec.name, self._make, self.num_players, self.max_turns)


def make_textarena(game_id: str, num_players: int | None = None, max_turns: int = 200) -> TextArenaEnv:
    return TextArenaEnv(game_id, num_players=num_players, max_turns=max_turns)


ENVS.register_prefix(
    "textarena", make_textarena, kind="host text",
    description="A TextArena game by its id, e.g. textarena:TicTacToe-v0, textarena:KuhnPoker-v0; free text "
                "played on the host, in text matches (needs `pip install coplay[textarena]`).",
)


def random_legal_reply(turn: Turn, rng: np.random.Generator) -> str:
    """A uniformly drawn legal move where the game lists them, else a quoted bracketed
    move the observation mentions, else `[pass]`."""
    moves = turn.legal or tuple(dict.fromkeys(_QUOTED.findall(turn.observation)))
    return str(moves[int(rng.integers(len(moves)))]) if moves else "[pass]"


def catalogue(ids: list[str] | None = None, seed: int = 0, max_turns: int = 200) -> list[dict[str, Any]]:
    """Try each game (default: every registered id) for one game of random legal replies
    under the contract's checks (`check_game`). One row per id: `works`, `players`,
    `status`, `turns`, `seconds` and, where it does not work, `why`."""
    from coplay.envs.text.host_game import check_game  # noqa: PLC0415

    rows = []
    for game_id in ids if ids is not None else registered():
        row: dict[str, Any] = {"id": game_id, "works": False, "players": None, "status": "", "turns": 0, "why": ""}
        t = time.perf_counter()
        try:
            env = TextArenaEnv(game_id, max_turns=max_turns)
            row["players"] = env.num_players
            out = check_game(env.game(), random_legal_reply, seed=seed, max_turns=max_turns)
            row.update(status=out.status, turns=out.turns)
            if out.status == "complete":
                row["works"] = True
            else:
                row["why"] = f"the game ended {out.status}: {out.reason}"[:300]
        except Exception as e:  # noqa: BLE001 - the row says why
            row["why"] = f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
        row["seconds"] = round(time.perf_counter() - t, 3)
        rows.append(row)
    return rows


# ----- coplay -> TextArena ---------------------------------------------------------------------------------


class CoplayArena:
    """A coplay text environment with TextArena's loop API (see the module's doc).

    `reset(num_players, seed)`; `get_observation() -> (player, text)`; `step(text) ->
    (done, info)` with `info` keys `invalid_move`, `turn`, `reason` at every step;
    `close() -> (rewards, game_info)`, rewards the players' episode returns and
    `game_info[p]` with `role`, `invalid_move` (moves the environment did not
    understand) and `turn_count`."""

    def __init__(self, env: Any):
        from coplay.envs.text.base import TextEnv  # noqa: PLC0415

        if isinstance(env, str):
            env = ENVS.make(env)
        if not isinstance(getattr(env, "unwrapped", env), TextEnv) and not isinstance(env, TextEnv):
            raise ConfigError(f"to_textarena takes a coplay text environment (text:...), not {env.spec.name!r}")
        self.env = env
        self.spec = env.spec
        self.max_tokens = int(env.spec.action_space.shape[-1])
        self._reset = jax.jit(env.reset)
        self._step = jax.jit(env.step)
        self._mask = jax.jit(env.move_mask)
        self.state: Any = None
        self._ts: Any = None

    def reset(self, num_players: int, seed: int | None = None) -> None:
        n = self.spec.num_agents
        if num_players != n:
            raise ValueError(f"{self.spec.name} is a game of {n} players, not num_players={num_players}")
        self._key = jax.random.PRNGKey(0 if seed is None else seed)
        self.state, self._ts = self._reset(jax.random.fold_in(self._key, 0))
        self._returns = np.zeros(n)
        self._invalid = np.zeros(n, np.int64)
        self._turns = np.zeros(n, np.int64)
        self._steps, self._done = 0, False
        self._spoken: dict[int, str] = {}
        self._legal = np.asarray(self._mask(self.state))
        self._to_speak = [int(a) for a in np.flatnonzero(np.asarray(self._ts.active))]

    def get_observation(self) -> tuple[int, str]:
        if self.state is None:
            raise RuntimeError("reset the game first")
        if self._done:
            raise RuntimeError("the game is over; close() it")
        player = self._to_speak[0]
        view = VOCAB.decode(np.asarray(self._ts.obs)[player])
        moves = [self.env.move_texts[m] for m in np.flatnonzero(self._legal[player])]
        return player, f"{view}\nAvailable moves: " + ", ".join(f"'[{m}]'" for m in moves)

    def step(self, action: str) -> tuple[bool, dict[str, Any]]:
        if self.state is None or self._done:
            raise RuntimeError("reset the game first" if self.state is None else "the game is over; close() it")
        player = self._to_speak.pop(0)
        self._spoken[player] = str(action)
        self._turns[player] += 1
        invalid = False
        if not self._to_speak:   # every player to move has spoken: the environment steps
            n = self.spec.num_agents
            actions = np.zeros((n, self.max_tokens), np.int32)
            for p, text in self._spoken.items():
                actions[p] = utterance(text, self.max_tokens)
            self._steps += 1
            self.state, self._ts = self._step(self.state, actions, jax.random.fold_in(self._key, self._steps))
            self._returns += np.asarray(self._ts.reward, np.float64).reshape(n)
            bad = np.asarray(self._ts.info.get("invalid_utterance", np.zeros(n, bool))).reshape(n)
            for p in self._spoken:
                self._invalid[p] += int(bad[p])
            invalid = bool(bad[player])
            self._spoken = {}
            self._done = bool(self._ts.done)
            if not self._done:
                self._legal = np.asarray(self._mask(self.state))
                self._to_speak = [int(a) for a in np.flatnonzero(np.asarray(self._ts.active))]
        reason = "" if not self._done else ("the step limit" if bool(self._ts.truncated) else "the game's end")
        return self._done, {"invalid_move": invalid, "turn": int(self._turns.sum()), "reason": reason}

    def close(self) -> tuple[dict[int, float], dict[int, dict[str, Any]]]:
        roles = self.spec.roles
        rewards = {p: float(r) for p, r in enumerate(self._returns)} if self._done else None
        info = {p: {"role": roles[p], "invalid_move": bool(self._invalid[p]), "turn_count": int(self._turns[p])}
                for p in range(self.spec.num_agents)}
        return rewards, info   # type: ignore[return-value]  # None before the end, as TextArena's


def to_textarena(env: Any) -> CoplayArena:
    """coplay text environment `env` (or its registered name) behind TextArena's loop API."""
    return CoplayArena(env)


def coplay_game(env: Any, max_turns: int = 200) -> TextArenaGame:
    """A coplay text environment, through `to_textarena`, as a host text game: the same
    contract, and the same matches, as a TextArena game's."""
    arena = to_textarena(env)
    return TextArenaGame(arena.spec.name, lambda: arena, arena.spec.num_agents, max_turns)


__all__ = ["CoplayArena", "TextArenaEnv", "TextArenaGame", "catalogue", "coplay_game", "legal_moves",
           "make_textarena", "random_legal_reply", "registered", "to_textarena"]
