"""pgx games under coplay's contract: scripted games with exact outcomes, the
illegal-action rule, text rendering, zero-sum random play, the `pgx:` prefix
and its lookups. (The contract suite runs on tic_tac_toe, connect_four,
kuhn_poker and leduc_holdem in test_contract.py, which covers every registered
environment; here it runs on one more game through the prefix.)"""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

import coplay  # noqa: E402
from coplay.core.compile import jit_once
from coplay.core.errors import ConfigError, UnknownNameError  # noqa: E402
from coplay.core.registry import ENVS  # noqa: E402
from coplay.experiment.config import parse_overrides  # noqa: E402
from coplay.interop import MissingExtraError  # noqa: E402
from coplay.testing import check_env, random_rollout  # noqa: E402

OFF_TURN = -1  # what the player who is not to move sends; it must be ignored


class Game:
    """One environment with its compiled reset and step, and scripted play."""

    def __init__(self, name: str, **kwargs):
        self.env = coplay.make(name, **kwargs)
        self.reset = jax.jit(self.env.reset)
        self.step = jax.jit(self.env.step)

    def key_where_first(self, player: int) -> jax.Array:
        """A reset key after which `player` moves first (pgx draws the first mover)."""
        for seed in range(100):
            key = jax.random.PRNGKey(seed)
            if bool(self.reset(key)[1].active[player]):
                return key
        raise AssertionError(f"no seed lets player_{player} move first")

    def play(self, moves, first: int = 0, state=None):
        """Play `moves` (the mover's action each step); returns the state and every TimeStep."""
        if state is None:
            state, ts = self.reset(self.key_where_first(first))
        else:
            ts = None
        steps = [ts]
        for i, move in enumerate(moves):
            mover = int(state.game.current_player)
            actions = jnp.full(self.env.num_agents, OFF_TURN, jnp.int32).at[mover].set(move)
            state, ts = self.step(state, actions, jax.random.PRNGKey(100 + i))
            steps.append(ts)
        return state, steps


@pytest.fixture(scope="module")
def ttt():
    return Game("tic_tac_toe")


# --- tic-tac-toe: exact outcomes --------------------------------------------------------

def test_x_wins_turns_alternate(ttt):
    # player_0 is X: 0, 1, 2 make the top row; O plays 3, 4.
    _, steps = ttt.play([0, 3, 1, 4, 2], first=0)
    actives = [np.asarray(ts.active).tolist() for ts in steps]
    assert actives == [[True, False], [False, True], [True, False], [False, True], [True, False], [False, False]]
    for ts in steps[:-1]:
        assert not bool(ts.done) and np.asarray(ts.reward).tolist() == [0.0, 0.0]
        # the mover's row is the legal mask; the other's row is all True (its action is ignored)
        other = 1 - int(np.argmax(ts.active))
        assert bool(ts.action_mask[other].all())
    end = steps[-1]
    assert np.asarray(end.reward).tolist() == [1.0, -1.0]
    assert bool(end.done) and not bool(end.truncated)
    assert np.asarray(end.info["win"]).tolist() == [True, False]
    assert not any(bool(ts.info["illegal_action"].any()) for ts in steps)


def test_draw_lasts_the_whole_board(ttt):
    # X O X / X O O / O X X: nine moves, nobody has three in a row.
    _, steps = ttt.play([0, 1, 2, 4, 3, 5, 7, 6, 8], first=0)
    assert [bool(ts.done) for ts in steps[1:]] == [False] * 8 + [True]
    assert np.asarray(steps[-1].reward).tolist() == [0.0, 0.0]
    assert np.asarray(steps[-1].info["win"]).tolist() == [False, False]
    assert ttt.env.spec.max_steps == 9


@pytest.mark.parametrize("bad", [0, 9, -1], ids=["occupied", "past-the-end", "negative"])
def test_illegal_move_forfeits_without_being_played(ttt, bad):
    state, steps = ttt.play([0], first=0)             # X takes square 0
    before = steps[-1]
    state, steps = ttt.play([bad], state=state)       # O plays an illegal action
    ts = steps[-1]
    assert bool(ts.done) and not bool(ts.truncated)
    assert np.asarray(ts.reward).tolist() == [1.0, -1.0]          # the offender loses
    assert np.asarray(ts.info["illegal_action"]).tolist() == [False, True]
    assert np.asarray(ts.info["win"]).tolist() == [True, False]
    assert not bool(ts.active.any())
    np.testing.assert_array_equal(ts.obs, before.obs)            # the board is as it was
    text = ttt.env.spec.render_text(state)
    assert text == ("X . .\n. . .\n. . .\nplayer_0 is X, player_1 is O.\n"
                    f"Game over: player_1 made an illegal move ({bad}) and forfeits (player_0 +1, player_1 -1).")
    # a finished game stays finished, with nothing more to pay
    state2, after = ttt.play([4], state=state)
    assert bool(after[-1].done) and np.asarray(after[-1].reward).tolist() == [0.0, 0.0]
    assert not bool(after[-1].info["illegal_action"].any())
    np.testing.assert_array_equal(state2.game._x.board, state.game._x.board)


def test_render_tic_tac_toe(ttt):
    state, _ = ttt.play([0, 4, 8], first=0)
    assert ttt.env.spec.render_text(state) == (
        "X . .\n"
        ". O .\n"
        ". . X\n"
        "player_0 is X, player_1 is O.\n"
        "O (player_1) to move; legal: 1, 2, 3, 5, 6, 7."
    )
    state, _ = ttt.play([0, 3, 1, 4, 2], first=0)
    assert ttt.env.spec.render_text(state).endswith("X X X\nO O .\n. . .\nplayer_0 is X, player_1 is O.\n"
                                                    "X (player_0) wins.")


def test_time_limit_truncates():
    game = Game("pgx:tic_tac_toe", max_steps=4)
    assert game.env.spec.name == "pgx:tic_tac_toe" and game.env.spec.max_steps == 4
    _, steps = game.play([0, 1, 2, 4], first=0)
    end = steps[-1]
    assert bool(end.done) and bool(end.truncated)
    assert np.asarray(end.reward).tolist() == [0.0, 0.0]
    assert not bool(end.info["win"].any()) and not bool(end.active.any())


def test_connect_four_vertical_win_and_render():
    game = Game("connect_four")
    state, steps = game.play([3, 0, 3, 0, 3, 0, 3], first=1)   # player_1 is X and stacks column 3
    assert np.asarray(steps[-1].reward).tolist() == [-1.0, 1.0]
    assert [bool(ts.done) for ts in steps[1:]] == [False] * 6 + [True]
    assert game.env.spec.render_text(state) == (
        "0 1 2 3 4 5 6\n"
        ". . . . . . .\n"
        ". . . . . . .\n"
        ". . . X . . .\n"
        "O . . X . . .\n"
        "O . . X . . .\n"
        "O . . X . . .\n"
        "player_1 is X, player_0 is O.\n"
        "X (player_1) wins."
    )


# --- the adapter's game state is pgx's ------------------------------------------------------

@pytest.mark.parametrize("game_id", ["tic_tac_toe", "connect_four", "leduc_holdem", "othello", "2048"])
def test_game_state_follows_pgx_step(game_id):
    # coplay runs pgx's generic Env.step by its parts (2048 replaces that step and goes
    # through pgx's own); either way, with legal moves, every field of the game state,
    # the observation and step count included, must be what pgx's step gives, also
    # after the game has ended (zero rewards, nothing moves) and with chance moves.
    import pgx

    env, game = coplay.make(f"pgx:{game_id}"), pgx.make(game_id)
    steps, games = min(env.spec.max_steps + 2, 40), 8

    def run(key):
        k_init, k_run = jax.random.split(key)
        init_keys = jax.random.split(k_init, games)
        ours, _ = jax.vmap(env.reset)(init_keys)
        theirs = jax.vmap(game.init)(init_keys)

        def body(c, k):
            ours, theirs = c
            k_act, k_step = jax.random.split(k)
            action = jax.random.categorical(k_act, jnp.where(theirs.legal_action_mask, 0.0, -jnp.inf))
            rows = jnp.broadcast_to(action[:, None], (games, env.num_agents)).astype(jnp.int32)
            step_keys = jax.random.split(k_step, games)
            ours, _ = jax.vmap(env.step)(ours, rows, step_keys)
            theirs = jax.vmap(game.step)(theirs, action, step_keys)
            return (ours, theirs), (ours.game, theirs)

        _, (ours, theirs) = jax.lax.scan(body, (ours, theirs), jax.random.split(k_run, steps))
        return ours, theirs

    ours, theirs = jit_once(run)(jax.random.PRNGKey(3))
    flat_ours, tree_ours = jax.tree.flatten_with_path(ours)
    flat_theirs, tree_theirs = jax.tree.flatten_with_path(theirs)
    assert tree_ours == tree_theirs
    for (path, a), (_, b) in zip(flat_ours, flat_theirs):
        np.testing.assert_array_equal(a, b, err_msg=f"{game_id}: field {jax.tree_util.keystr(path)}")
    if steps == env.spec.max_steps + 2:  # every game ended and was stepped on after
        assert bool(np.asarray(theirs.terminated)[-1].all())


# --- poker: rendering, longest game, zero-sum random play ---------------------------------

def _deal(game: Game, cards, first: int = 0):
    state, _ = game.reset(game.key_where_first(first))
    return state.replace(game=state.game.replace(_cards=jnp.asarray(cards, jnp.int32)))


def test_kuhn_betting_and_render():
    game = Game("kuhn_poker")
    state = _deal(game, [2, 0])                              # player_0 K, player_1 J
    state, _ = game.play([1, 0], state=state)                # check, bet
    render = game.env.spec.render_text
    assert render(state) == (
        "Kuhn poker. player_0 holds K, player_1 holds J.\n"
        "Betting: player_0 check, player_1 bet.\n"
        "Pot: 3 (player_0 put in 1, player_1 put in 2).\n"
        "player_0 to move; legal: call, fold."
    )
    assert render(state, viewer=1).startswith("Kuhn poker. player_0 holds ?, player_1 holds J.\n")
    state, steps = game.play([0], state=state)               # call: K beats J for 2
    assert np.asarray(steps[-1].reward).tolist() == [2.0, -2.0] and bool(steps[-1].done)
    assert render(state).endswith("Betting: player_0 check, player_1 bet, player_0 call.\n"
                                  "Pot: 4 (player_0 put in 2, player_1 put in 2).\n"
                                  "Game over (player_0 +2, player_1 -2).")


def test_leduc_longest_game_and_render():
    game = Game("leduc_holdem")
    state = _deal(game, [1, 2, 1])                           # player_0 Q, player_1 K, public Q
    state, steps = game.play([1, 0], state=state)            # bet, call: round 2 begins
    assert game.env.spec.render_text(state) == (
        "Leduc hold'em, round 2 of 2. player_0 holds Q, player_1 holds K.\n"
        "Public card: Q.\n"
        "Round 1 betting: player_0 bet, player_1 call.\n"
        "Round 2 betting: none yet.\n"
        "Pot: 6 (player_0 put in 3, player_1 put in 3).\n"
        "player_0 to move; legal: check, bet."
    )
    # The longest game: check, bet, raise, call in both rounds, eight moves.
    state = _deal(game, [1, 2, 1])
    state, steps = game.play([0, 1, 1, 0, 0, 1, 1, 0], state=state)
    assert [bool(ts.done) for ts in steps[1:]] == [False] * 7 + [True]
    assert game.env.spec.max_steps == 8
    assert np.asarray(steps[-1].reward).tolist() == [13.0, -13.0]   # a pair of queens takes 13 chips
    text = game.env.spec.render_text(state, viewer=0)
    assert "player_0 holds Q, player_1 holds ?" in text
    assert "Round 2 betting: player_0 check, player_1 bet, player_0 raise, player_1 call." in text
    assert text.endswith("Pot: 26 (player_0 put in 13, player_1 put in 13).\nGame over (player_0 +13, player_1 -13).")


def _random_games(env, n_games: int, key: jax.Array):
    """n_games of uniformly random legal play, each max_steps + 2 steps (no reset)."""
    _, ts = jax.vmap(random_rollout(env, env.spec.max_steps + 2))(jax.random.split(key, n_games))
    return ts.reward, ts.done, ts.info["win"], ts.info["illegal_action"]


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_holdem"])
def test_poker_random_play_is_zero_sum_and_bounded(name):
    env = coplay.make(name)
    rewards, done, win, illegal = (np.asarray(x) for x in _random_games(env, 512, jax.random.PRNGKey(7)))
    max_steps = env.spec.max_steps
    assert done[:, max_steps - 1].all(), "a game outlasted max_steps"
    assert (done[:, 1:] >= done[:, :-1]).all(), "done went back to False"
    ends = done.argmax(axis=1)                               # index of the ending step
    after = np.arange(done.shape[1])[None, :] > ends[:, None]
    assert (rewards[after] == 0).all(), "a finished game paid again"
    totals = rewards.sum(axis=1)                              # [games, 2]
    np.testing.assert_array_equal(totals.sum(axis=1), 0.0)
    assert (totals != 0).any()
    np.testing.assert_array_equal(win.sum(axis=1), totals > 0)
    assert not illegal.any()
    if name == "kuhn_poker":
        assert ends.max() + 1 == 3 and set(np.abs(totals[:, 0]).tolist()) == {1.0, 2.0}


# --- the pgx: prefix, lookups and the optional dependency ---------------------------------

def test_contract_through_prefix():
    check_env(coplay.make("pgx:hex"), retrace=False)   # the adapter was traced anew under the registered games


def test_prefix_names_resolve_and_unknown_names_explain():
    assert "pgx:othello" in ENVS and "tic_tac_toe" in ENVS
    assert "pgx:othelo" not in ENVS and "nope" not in ENVS
    assert ENVS.parameters("pgx:othello") == {"max_steps": None}
    assert ENVS.parameters("kuhn_poker") == {}
    env = coplay.make("pgx:othello", max_steps=50)
    assert env.spec.name == "pgx:othello" and env.spec.max_steps == 50 and env.spec.turn_based
    assert coplay.make("pgx:othello").spec.max_steps == 120
    with pytest.raises(UnknownNameError, match="othello"):
        ENVS.get("pgx:othelo")
    with pytest.raises(UnknownNameError, match=r"pgx:<name>"):
        ENVS.get("atari:pong")
    with pytest.raises(UnknownNameError, match="max_steps"):
        coplay.make("pgx:othello", max_step=3)
    with pytest.raises(ConfigError, match="max_steps=0"):
        coplay.make("pgx:othello", max_steps=0)


def test_config_and_cli_accept_pgx_names(capsys):
    exp = parse_overrides(["algo=ippo", "env=pgx:othello", "env.max_steps=50"])
    assert exp.env == "pgx:othello" and exp.env_config == {"max_steps": 50}
    assert parse_overrides(["env=tic_tac_toe"]).env == "tic_tac_toe"
    with pytest.raises(UnknownNameError, match="did you mean 'tic_tac_toe'"):
        parse_overrides(["env=tic_tac_to"])
    from coplay.cli.main import main

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("tic_tac_toe", "connect_four", "kuhn_poker", "leduc_holdem", "pgx:<name>"):
        assert word in out


def test_missing_pgx_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pgx", None)             # import pgx now fails
    with pytest.raises(MissingExtraError, match=r"pip install coplay\[games\]"):
        coplay.make("tic_tac_toe")
    with pytest.raises(MissingExtraError, match=r"coplay\[games\]"):
        parse_overrides(["env=pgx:othello"])
    assert "pgx:othello" not in ENVS


def test_import_coplay_does_not_import_pgx():
    # nor the other libraries whose environments coplay adapts
    code = ("import sys, coplay; assert not {'pgx', 'jaxmarl', 'jumanji'} & set(sys.modules); "
            "assert 'tic_tac_toe' in coplay.list_envs()")
    subprocess.run([sys.executable, "-c", code], check=True)
