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
    with pytest.raises(UnknownNameError):
        coplay.make("text:chess")
    monkeypatch.setattr(KuhnRules, "text_view", lambda self, h, p: None)
    with pytest.raises(ConfigError, match="'kuhn_poker' has no text rendering"):
        coplay.make("text:kuhn_poker")


@pytest.mark.parametrize("name, uniform", [("kuhn_poker", 0.458333), ("leduc_holdem", 2.373611)])
def test_a_text_policy_is_scored_exactly_through_the_tree(name, uniform):
    """A transformer whose logits are all zero says every token with probability 1/V, so
    each move's utterance ("<move> <end>") is equally likely: the uniform strategy, whose
    exploitability the tree gives (Kuhn: 0.458333, OpenSpiel's figure; Leduc: NashConv 4.747)."""
    from coplay.eval.text_policies import score_text_policy
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
