"""TextArena both ways: its games under coplay's host text game contract, coplay's text
games behind TextArena's loop API (with the checks that would have caught TextArena's
reported bugs), and matches that seat a language model beside scripted bots."""

from __future__ import annotations

import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError, HostEnvError, UnknownNameError
from coplay.envs.text.host_game import HostTextGame, Outcome, Step, Turn, check_game
from coplay.eval.text_match import first_legal, play_matches, random_legal
from coplay.interop.textarena import CoplayArena, TextArenaGame, coplay_game, legal_moves, to_textarena

pytest.importorskip("textarena")

SPIRAL = ("KuhnPoker-v0", "TicTacToe-v0", "SimpleNegotiation-v0")


def _history(game, seed: int, interleave=None) -> list:
    """The turns and the outcome of one game of random legal replies from `seed`;
    `interleave()` runs between its steps (another copy's play)."""
    rng = np.random.default_rng(seed)
    turn, seen = game.reset(seed), []
    while turn is not None:
        seen.append((turn.player, turn.observation, turn.legal))
        if interleave is not None:
            interleave()
        turn = game.step(random_legal(turn, rng)).turn
    out = game.outcome()
    return [*seen, (out.status, tuple(out.rewards), tuple(out.invalid))]


@pytest.mark.parametrize("game_id", SPIRAL)
def test_spiral_games_keep_the_host_text_contract_and_are_deterministic_per_copy(game_id):
    env = coplay.make(f"textarena:{game_id}")
    assert env.num_players == 2 and env.spec.name == f"textarena:{game_id}"
    for seed in range(3):
        out = check_game(env.game(), random_legal, seed=seed)
        assert out.status == "complete" and out.rewards.shape == (2,) and np.isfinite(out.rewards).all()
    # the same seed gives the same game, even with another copy drawing from the global streams in between
    other = env.game()
    other.reset(99)

    def disturb():
        np.random.random()
        __import__("random").random()

    a = _history(env.game(), 5)
    b = _history(env.game(), 5, interleave=disturb)
    assert a == b
    assert _history(env.game(), 6) != a or game_id == "SimpleNegotiation-v0"   # a seed is a game


def test_turns_name_the_player_to_move_and_its_own_legal_moves():
    game = coplay.make("textarena:KuhnPoker-v0").game()
    turn = game.reset(0)
    assert turn.legal == ("[check]", "[bet]")
    first = turn.player
    step = game.step("[bet]")
    assert not step.invalid and step.turn.player == 1 - first
    assert step.turn.legal == ("[fold]", "[call]")          # facing a bet: the other player's own moves
    assert legal_moves("Rules: '[x]'\nno list here") is None


def test_invalid_moves_are_counted_and_the_games_own_rule_applies():
    game = coplay.make("textarena:TicTacToe-v0").game()
    turn = game.reset(0)
    first = turn.player
    s1 = game.step("nonsense")
    assert s1.invalid and s1.turn is not None and s1.turn.player == first   # TextArena lets it retry once
    s2 = game.step("[42]")
    assert s2.invalid and s2.turn is None                                    # a repeated invalid move loses
    out = game.outcome()
    assert out.status == "complete" and out.invalid[first] == 2 and out.invalid[1 - first] == 0
    assert out.rewards[first] == -1 and out.rewards[1 - first] == 1
    # every step's information has the same keys, the first step's as the last's
    assert set(s1.info) == set(s2.info) == {"turn", "player", "reason"}


def test_games_that_do_not_finish_or_raise_are_truncated_or_failed_never_scored():
    env = coplay.make("textarena:TicTacToe-v0", max_turns=3)
    out = check_game(env.game(), random_legal, seed=0)
    assert out.status == "truncated" and np.isnan(out.rewards).all() and out.turns == 3

    class Raises(CoplayArena):
        def step(self, action):
            if self._steps >= 1:
                raise RuntimeError("a rule bug")
            return super().step(action)

    broken = TextArenaGame("broken", lambda: Raises("text:tic_tac_toe"), 2, 50)
    out = check_game(broken, random_legal, seed=0)
    assert out.status == "failed" and "a rule bug" in out.reason and np.isnan(out.rewards).all()
    result = play_matches(lambda: TextArenaGame("broken", lambda: Raises("text:tic_tac_toe"), 2, 50),
                          [random_legal, first_legal], games=2)
    assert result.statuses == {"failed": 2} and result.dropped == [2, 2] and result.rewards == [[], []]


def test_bad_names_and_compiled_learners_are_refused_by_name():
    with pytest.raises(UnknownNameError, match="TicTacToe-v0"):
        coplay.make("textarena:TicTacTo-v0")
    with pytest.raises(ConfigError, match="free text"):
        coplay.train(["algo=ippo", "env=textarena:TicTacToe-v0", "progress=false"])
    with pytest.raises(ConfigError, match="num_players=3"):
        coplay.make("textarena:TicTacToe-v0", num_players=3)


def _available(text: str) -> set[str]:
    line = text.splitlines()[-1]
    assert line.startswith("Available moves:")
    return set(legal_moves(line) or ())


@pytest.mark.parametrize("name", ["text:tic_tac_toe", "text:kuhn_poker"])
def test_coplay_games_behind_textarenas_loop_keep_the_checks_textarena_failed(name):
    """What would have caught TextArena's reported bugs: the first step's info like every
    later one's, and each player shown its own legal moves (Santorini showed player 0's)."""
    arena = to_textarena(name)
    env = arena.env
    rng = np.random.default_rng(0)
    for seed in range(4):
        arena.reset(num_players=2, seed=seed)
        keys, done = None, False
        while not done:
            player, text = arena.get_observation()
            own = {f"[{env.move_texts[m]}]" for m in np.flatnonzero(np.asarray(env.move_mask(arena.state))[player])}
            assert _available(text) == own
            done, info = arena.step(sorted(own)[rng.integers(len(own))])
            keys = keys or set(info)
            assert set(info) == keys == {"invalid_move", "turn", "reason"}
        rewards, game_info = arena.close()
        assert set(rewards) == {0, 1} and set(game_info) == {0, 1}
        assert abs(sum(rewards.values())) < 1e-6   # zero-sum games
    with pytest.raises(ValueError, match="num_players=3"):
        arena.reset(num_players=3)


def test_the_legal_move_check_catches_a_game_that_shows_player_0s_moves():
    class Santorini(CoplayArena):   # the reported bug, made on purpose: every player sees player 0's moves
        def get_observation(self):
            player, text = super().get_observation()
            view = text.rsplit("\n", 1)[0]
            moves = [self.env.move_texts[m] for m in np.flatnonzero(self._legal[0])]
            return player, view + "\nAvailable moves: " + ", ".join(f"'[{m}]'" for m in moves)

    arena = Santorini("text:tic_tac_toe")
    arena.reset(num_players=2, seed=0)
    arena.step(arena.get_observation()[1].splitlines()[-1].split("'")[1])   # player 0 moves
    player, text = arena.get_observation()
    own = {f"[{arena.env.move_texts[m]}]"
           for m in np.flatnonzero(np.asarray(arena.env.move_mask(arena.state))[player])}
    assert player == 1 and _available(text) != own                       # the check above would fail


def test_a_match_seats_a_language_model_beside_scripted_bots_in_one_textarena_game():
    from coplay.lm.text_agent import LMTextAgent

    lm = LMTextAgent("tiny", seed=0, max_new_tokens=6)
    env = coplay.make("textarena:TicTacToe-v0")
    result = play_matches(env, [lm, random_legal, first_legal], games=6, seed=0)
    assert result.names == ["lm:tiny(seed=0)", "random_legal", "first_legal"]
    assert [len(r) for r in result.rewards] == [4, 4, 4]                    # each agent sat in 4 of the 6 games
    assert result.replies[0] > 0 and result.invalid[0] == result.replies[0]  # random weights write no move
    prompt, reply = lm.last
    assert prompt[-len(reply.tokens):] != reply.tokens and len(reply.log_probs) == len(reply.tokens)
    assert sum(result.wins) <= 6
    # coplay's own game through TextArena's loop: the model, a coplay text policy (a token-level policy of
    # algo=grpo that writes legal moves only) and a scripted bot at one table
    import jax

    from coplay.algos.grpo import GRPO, Config
    from coplay.eval.text_match import PolicyTextAgent

    text_env = coplay.make("text:kuhn_poker")
    grpo = GRPO(Config(decoding="legal", layers=1, width=16), text_env, num_updates=1)
    policy = PolicyTextAgent(grpo.policy(), grpo.init(jax.random.PRNGKey(0)).params, text_env)
    kuhn = play_matches(lambda: coplay_game("text:kuhn_poker"), [lm, policy, random_legal], games=12, seed=1)
    assert kuhn.statuses == {"complete": 12} and [len(r) for r in kuhn.rewards] == [8, 8, 8]
    assert kuhn.invalid[1] == 0 and kuhn.replies[1] > 0                      # it writes legal moves only
    assert abs(sum(sum(r) for r in kuhn.rewards)) < 1e-6                       # zero-sum


def test_a_game_that_breaks_the_contract_is_named():
    class Counting(HostTextGame):
        """Counts replies; `info` gains a key after the first step (TextArena's empty first info)."""

        num_players = 2

        def reset(self, seed):
            self.t = 0
            return Turn(0, "say anything")

        def step(self, reply):
            self.t += 1
            return Step(Turn(self.t % 2, "again"), False, {"turn": self.t} if self.t > 1 else {})

        def outcome(self):
            return Outcome(np.zeros(2), np.zeros(2, np.int64), "complete")

    with pytest.raises(HostEnvError, match="info keys"):
        check_game(Counting(), random_legal, max_turns=20)

    class Endless(Counting):
        def step(self, reply):
            self.t += 1
            return Step(Turn(self.t % 2, "again"), False, {})

    with pytest.raises(HostEnvError, match="did not end within 20"):
        check_game(Endless(), random_legal, max_turns=20)


def test_lm_grpo_plays_a_textarena_game_in_groups_and_drops_what_did_not_finish():
    from coplay.algos.lm_grpo import LMGRPO, Config
    from coplay.lm.models import tiny_model

    env = coplay.make("textarena:KuhnPoker-v0")
    config = Config(model="tiny", episodes=4, group_size=2, max_new_tokens=4)
    learner = LMGRPO(config, env, seeds=1, seed=0, loaded=tiny_model(seed=2))
    played = learner.play(0, 0, 4, 2)
    rec = played.turns
    assert played.complete.all() and set(rec.status) == {"complete"}
    first = {e: rec.prompts[rec.episode.index(e)] for e in range(4)}
    assert first[0] == first[1] and first[2] == first[3]          # a group starts from one deal
    for e in range(4):                                              # the game's rewards, at its last turn
        last = max(t for i, t in enumerate(rec.step) if rec.episode[i] == e)
        assert played.reward[e].sum(0).tolist() == played.reward[e, last].tolist() and played.reward[e, last].any()
    again = LMGRPO(config, env, seeds=1, seed=0, loaded=tiny_model(seed=2)).play(0, 0, 4, 2).turns
    assert again.replies == rec.replies and again.prompts == rec.prompts   # deterministic per key
    metrics = learner.update(0, 0)
    assert np.isfinite([metrics["loss"], metrics["invalid"]]).all() and metrics["truncated"] == 0.0
    # a game cut off by max_turns has no result: dropped, not scored
    cut = LMGRPO(config, coplay.make("textarena:TicTacToe-v0", max_turns=1), seeds=1, seed=0,
                 loaded=tiny_model(seed=2))
    short = cut.play(0, 0, 4, 2)
    assert not short.complete.any() and set(short.turns.status) == {"truncated"}   # one reply ends no game
    assert not short.turns.scored().any() and np.all(cut.advantages(0, short) == 0)
    with pytest.raises(ConfigError, match="decoding=free"):
        LMGRPO(Config(model="tiny", decoding="choose_legal"), env, seeds=1, seed=0, loaded=tiny_model(seed=2))
    with pytest.raises(ConfigError, match="text matches"):
        learner.policy()
