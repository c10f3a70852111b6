"""Text environments: what an agent reads is exactly the text a person reads, each
view is exactly one information state, utterances are parsed into moves, and an
utterance that names no legal move has its documented outcome, counted."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.text import END, PAD, VOCAB
from coplay.envs.text.tree_games import parse
from coplay.envs.trees.kuhn import KuhnRules
from coplay.envs.trees.tree import CHANCE


def _say(*moves: str, length: int = 3) -> jnp.ndarray:
    """Both players' utterances (only the mover's is read)."""
    return jnp.asarray(np.stack([VOCAB.encode(m, length, end=len(m.split()) < length) for m in moves]))


def test_the_vocabulary_round_trips_and_refuses_unknown_words():
    ids = VOCAB.encode("your card : king", 6, end=True)
    assert ids.dtype == np.int32 and list(ids[-2:]) == [END, PAD]
    assert VOCAB.decode(ids) == "your card : king"
    assert VOCAB.decode([VOCAB.index["bet"], END, VOCAB.index["fold"]]) == "bet"   # nothing after <end>
    with pytest.raises(ConfigError, match="'bluff'"):
        VOCAB.encode("i bluff")
    with pytest.raises(ConfigError, match="does not fit in 2"):
        VOCAB.encode("your card : king", 2)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_holdem"])
def test_every_view_is_one_information_state(name):
    env = coplay.make(f"text:{name}")
    nodes = env.game._nodes
    views = np.asarray(env._views)
    seen: dict[str, bytes] = {}
    for n, h in enumerate(nodes.histories):
        if nodes.player[n] == CHANCE:
            continue
        for p in (0, 1):
            key = f"{p}:{env.game.rules.observation_key(h, p)}"
            text = views[n, p].tobytes()
            assert seen.setdefault(key, text) == text, key            # one state, one text
    assert len(set(seen.values())) == len(seen)                        # and one text, one state


def test_a_game_of_kuhn_poker_played_in_words():
    env = coplay.make("text:kuhn_poker")
    step = jax.jit(env.step)
    state, ts = env.reset(jax.random.PRNGKey(0))
    assert VOCAB.decode(ts.obs[0]) == "kuhn poker , you are player 0 , your card : jack , actions : none , your move"
    assert env.render_text(state, viewer=1).endswith("your card : king , actions : none , wait")
    state, ts = step(state, _say("bet", "pass"), jax.random.PRNGKey(1))
    assert bool(ts.active[1]) and VOCAB.decode(ts.obs[1]).endswith("actions : bet , your move")
    # Player 1 folds; tokens after <end> are not read.
    fold = jnp.asarray([[PAD, PAD, PAD], [VOCAB.index["pass"], END, VOCAB.index["raise"]]], jnp.int32)
    state, ts = step(state, fold, jax.random.PRNGKey(2))
    assert bool(ts.done) and ts.reward.tolist() == [1.0, -1.0]
    assert not bool(ts.info["invalid_utterance"].any())


def test_an_utterance_that_names_no_legal_move_forfeits_or_plays_at_random():
    moves = _say("pass", "bet")
    assert int(parse(_say("bet")[0], moves)) == 1
    assert int(parse(jnp.asarray([VOCAB.index["bet"], VOCAB.index["bet"], END]), moves)) == -1   # "bet bet"
    assert int(parse(jnp.asarray([VOCAB.index["bet"], PAD, PAD]), moves)) == -1                 # not ended
    env = coplay.make("text:kuhn_poker")
    state, ts = env.reset(jax.random.PRNGKey(0))
    state, ts = env.step(state, _say("raise", "pass"), jax.random.PRNGKey(1))   # Kuhn has no raise
    assert bool(ts.done) and ts.reward.tolist() == [-2.0, 2.0]                # the speaker pays the stake
    assert ts.info["invalid_utterance"].tolist() == [True, False]
    assert [VOCAB.decode(v).split(" , ")[-1] for v in ts.obs] == ["game over", "game over"]
    assert env.render_text(state, 0).endswith("actions : none , game over")
    lenient = coplay.make("text:kuhn_poker", invalid="random")
    state, ts = lenient.reset(jax.random.PRNGKey(0))
    state, ts = lenient.step(state, _say("king", "pass"), jax.random.PRNGKey(1))
    assert not bool(ts.done) and ts.info["invalid_utterance"].tolist() == [True, False]
    assert "actions : none" not in VOCAB.decode(ts.obs[1])                    # a move was played


def test_bad_text_environments_are_refused_before_compiling(monkeypatch):
    with pytest.raises(UnknownNameError, match="'quit'.*forfeit, random"):
        coplay.make("text:kuhn_poker", invalid="quit")
    with pytest.raises(ConfigError, match="max_tokens=0 is shorter than the longest move"):
        coplay.make("text:kuhn_poker", max_tokens=0)
    with pytest.raises(UnknownNameError, match="'chess'.*kuhn_poker.*nim.*tic_tac_toe"):   # every text:<name>
        coplay.make("text:chess")
    monkeypatch.setattr(KuhnRules, "text_view", lambda self, h, p: None)
    with pytest.raises(ConfigError, match="'kuhn_poker' has no text rendering"):
        coplay.make("text:kuhn_poker")


@pytest.mark.parametrize("name, uniform", [("kuhn_poker", 0.458333), ("leduc_holdem", 2.373611)])
def test_a_text_policy_is_scored_exactly_through_the_tree(name, uniform):
    """A transformer whose logits are all zero says every token with probability 1/V, so
    each move's utterance ("<move> <end>") is equally likely: the uniform strategy, whose
    exploitability the tree gives (Kuhn: 0.458333, OpenSpiel's figure; Leduc: NashConv 4.747)."""
    from coplay.envs.text.scoring import score_text_policy
    from coplay.nets.token_policy import TokenPolicy

    env = coplay.make(f"text:{name}")
    views, owner, moves = env.infoset_views()
    assert views.shape == (len(env.game.tree.infoset_keys), env.spec.obs_space.shape[0])
    for i in (0, len(owner) - 1):   # the view of set i is its owner's, naming its owner
        assert f"you are player {int(owner[i])}" in VOCAB.decode(views[i])
    policy = TokenPolicy(len(VOCAB), 2, env.spec.obs_space.shape[0], env.spec.action_space.shape[0], width=16,
                         layers=1, heads=1)
    params = jax.tree.map(jnp.zeros_like, policy.init(jax.random.PRNGKey(0)))
    score = jax.jit(lambda p: score_text_policy(env, policy, p))(params)
    assert float(score.exploitability) == pytest.approx(uniform, abs=1e-5)
    assert float(score.nash_conv) == pytest.approx(2 * uniform, abs=1e-5)
    legal = np.asarray(env.game.tree.legal)
    np.testing.assert_allclose(np.asarray(score.strategy), legal / legal.sum(1, keepdims=True), atol=1e-6)
    # what is left for utterances that name no legal move: 1 - (legal moves) / V^2
    np.testing.assert_allclose(np.asarray(score.invalid), 1 - legal.sum(1) / len(VOCAB) ** 2, atol=1e-6)
    # Restricted to the moves legal at each set, the same zero logits give them all the mass, evenly
    restricted = TokenPolicy(len(VOCAB), 2, env.spec.obs_space.shape[0], env.spec.action_space.shape[0], width=16,
                             layers=1, heads=1, moves=env.move_tokens())
    score = jax.jit(lambda p: score_text_policy(env, restricted, p, legal_only=True))(params)
    assert float(score.exploitability) == pytest.approx(uniform, abs=1e-5)
    np.testing.assert_allclose(np.asarray(score.invalid), 0.0, atol=1e-6)


@pytest.mark.parametrize("name", ["text:tic_tac_toe", "text:nim", "text:negotiation",
                                  "text:twenty_questions", "text:arithmetic_roles", "text:lewis", "text:matrix_talk"])
def test_a_move_the_move_mask_allows_is_never_invalid(name):
    """Every agent says a random row of `move_tokens()` that `move_mask` allows it, for
    whole episodes: no utterance is ever counted invalid, and the mask marks at least
    one move for every agent that is to speak."""
    env = coplay.make(name)
    moves, n = env.move_tokens(), env.spec.num_agents
    assert moves.shape == (len(env.move_texts), env.spec.action_space.shape[0])

    def episode(key):
        state, ts = env.reset(key)

        def step(carry, k):
            state, ts = carry
            mask = env.move_mask(state)
            rows = jax.random.categorical(k, jnp.where(mask, 0.0, -jnp.inf))
            state, nxt = env.step(state, moves[rows], jax.random.fold_in(k, 1))
            speaking = ts.active & ~ts.done
            return (state, nxt), (nxt.info["invalid_utterance"] & speaking, mask.any(-1) | ~speaking)

        _, (invalid, marked) = jax.lax.scan(step, (state, ts), jax.random.split(key, env.spec.max_steps))
        return invalid, marked

    invalid, marked = jax.jit(jax.vmap(episode))(jax.random.split(jax.random.PRNGKey(0), 16))
    assert not np.asarray(invalid).any() and np.asarray(marked).all()
    assert env.move_mask(env.reset(jax.random.PRNGKey(1))[0]).shape == (n, len(env.move_texts))


# ----- Nim in words ---------------------------------------------------------------------------------


def _nim_play(env, perfect: tuple[bool, bool], games: int, key):
    """Episode returns [games, 2] and whether each game ended: a seat marked in `perfect`
    plays perfectly (a move to xor 0 where there is one, else the first legal move),
    the other uniformly random legal moves; every move is written as its utterance."""
    moves = env._moves
    xor = lambda x: jax.lax.reduce(x, jnp.int32(0), jax.lax.bitwise_xor, (x.ndim - 1,))  # noqa: E731

    def best_move(piles):
        """(a move to xor 0, if any: else 0), and the legal moves [A]."""
        taken = jax.nn.one_hot(env._move_pile, piles.shape[0], dtype=jnp.int32) * env._move_count[:, None]
        legal = env.legal_moves(piles)
        return jnp.argmax(legal & (xor(piles[None, :] - taken) == 0)), legal

    def one(k):
        state, ts = env.reset(k)

        def body(carry, kk):
            state, ts, total = carry
            best, legal = best_move(state.piles)
            good = legal[best] & (xor(state.piles) != 0)
            mine = jnp.where(good, best, jnp.argmax(legal))
            theirs = jax.random.categorical(kk, jnp.where(legal, 0.0, -jnp.inf))
            move = jnp.where(jnp.asarray(perfect)[state.mover], mine, theirs)
            state, ts = env.step(state, jnp.stack([moves[move], moves[move]]), kk)
            return (state, ts, total + ts.reward), None

        (state, _, total), _ = jax.lax.scan(body, (state, ts, jnp.zeros(2)), jax.random.split(k, env.spec.max_steps))
        return total, state.done

    return jax.jit(jax.vmap(one))(jax.random.split(key, games))


@pytest.mark.parametrize("piles, seat", [("1,3,5", 0), ("1,2,3", 1), ("2,5,7", 1), ("4,4,1", 0)])
def test_nim_the_xor_rule_decides_who_wins_with_perfect_play(piles, seat):
    """The player to move wins with perfect play exactly when the xor is not 0: the
    first player from (1, 3, 5) and (4, 4, 1), the second from (1, 2, 3) and (2, 5, 7)."""
    from coplay.envs.text.nim import winning_moves

    sizes = tuple(int(p) for p in piles.split(","))
    assert bool(winning_moves(sizes)) == (seat == 0)
    env = coplay.make("text:nim", piles=piles)
    for perfect in ((seat == 0, seat == 1), (True, True)):   # against random moves, and against itself
        total, done = _nim_play(env, perfect, 256, jax.random.PRNGKey(0))
        assert bool(jnp.all(done)) and bool(jnp.all(total[:, seat] == 1.0))
        assert bool(jnp.all(total[:, 1 - seat] == -1.0))


def test_nim_reads_and_parses_utterances_and_forfeits_or_randomises_invalid_ones():
    env = coplay.make("text:nim")
    state, ts = env.reset(jax.random.PRNGKey(0))
    assert [VOCAB.decode(v) for v in ts.obs] == ["nim , piles : 1 3 5 , your move", "nim , piles : 1 3 5 , wait"]
    assert env.speech_words() == ("take", "1", "from", "2", "3", "4", "5")
    state, ts = env.step(state, _say("take 2 from 3", "", length=5), jax.random.PRNGKey(1))
    assert VOCAB.decode(ts.obs[1]) == "nim , piles : 1 3 3 , your move" and not bool(ts.done)
    for utterance in ("take 4 from 3", "take 1 from 4", "take 1", "bet"):   # too many, no pile, unfinished, nonsense
        _, after = env.step(state, _say("", utterance, length=5), jax.random.PRNGKey(2))
        assert bool(after.done) and after.reward.tolist() == [1.0, -1.0]
        assert after.info["invalid_utterance"].tolist() == [False, True]
    lenient = coplay.make("text:nim", invalid="random")
    s, _ = lenient.reset(jax.random.PRNGKey(0))
    s, after = lenient.step(s, _say("bet", "", length=5), jax.random.PRNGKey(3))
    assert after.info["invalid_utterance"].tolist() == [True, False] and 4 <= int(s.piles.sum()) < 9
    assert int(s.mover) == 1 and not bool(after.done)
    for bad in ("1,11", "0", "", "a,b", "1,1,1,1,1,1,1"):
        with pytest.raises(ConfigError, match="piles="):
            coplay.make("text:nim", piles=bad)
