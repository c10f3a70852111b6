"""The token-level policy: what it samples is what it scores, its probabilities over
every possible utterance sum to one, the role changes what it says, and gradients
through an utterance's log-probability teach it to say that utterance."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from coplay.envs.text.vocab import END, PAD, spoken
from coplay.nets.token_policy import TokenPolicy

V, L, T = 6, 5, 3      # a small vocabulary, so that every utterance can be enumerated
POLICY = TokenPolicy(vocab_size=V, num_roles=2, view_len=L, max_tokens=T, width=32, layers=2, heads=2)
VIEW = jnp.array([3, 4, 5, PAD, PAD], jnp.int32)


def _utterances() -> np.ndarray:
    """Every distinct utterance of T tokens: anything up to the first <end>, <pad> after it."""
    out = set()
    for seq in itertools.product(range(V), repeat=T):
        s = list(seq)
        if END in s:
            s = s[:s.index(END) + 1] + [PAD] * (T - s.index(END) - 1)
        out.add(tuple(s))
    return np.array(sorted(out), np.int32)


def test_sampled_utterances_score_what_they_were_sampled_with_and_all_sum_to_one():
    params = POLICY.init(jax.random.PRNGKey(0))
    gen = jax.jit(jax.vmap(POLICY.generate, in_axes=(None, None, None, 0, None)))
    score = jax.jit(jax.vmap(POLICY.log_prob, in_axes=(None, None, None, 0, None)))
    for temperature in (1.0, 0.5):
        out = gen(params, VIEW, jnp.int32(1), jax.random.split(jax.random.PRNGKey(1), 64), temperature)
        tokens = np.asarray(out.tokens)
        said = np.asarray(jax.vmap(spoken)(out.tokens))
        assert np.all(tokens[~said] == PAD) and np.array_equal(said.sum(1), np.asarray(out.length))
        scored, _ = score(params, VIEW, jnp.int32(1), out.tokens, temperature)
        np.testing.assert_allclose(np.asarray(scored), np.asarray(out.log_prob), atol=1e-5)
        every = jnp.asarray(_utterances())
        logp, _ = score(params, VIEW, jnp.int32(1), every, temperature)
        assert abs(float(jnp.exp(logp).sum()) - 1.0) < 1e-4


@pytest.mark.slow
def test_the_role_changes_what_it_says_and_training_teaches_an_utterance():
    params = POLICY.init(jax.random.PRNGKey(0))
    target = jnp.array([4, END, PAD], jnp.int32)
    score = jax.jit(POLICY.log_prob)
    p0, _ = score(params, VIEW, jnp.int32(0), target)
    p1, _ = score(params, VIEW, jnp.int32(1), target)
    assert abs(float(p0) - float(p1)) > 1e-3

    opt = optax.adam(1e-2)

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(lambda p: -POLICY.log_prob(p, VIEW, jnp.int32(0), target)[0])(params)
        updates, state = opt.update(grads, state)
        return optax.apply_updates(params, updates), state, loss

    state = opt.init(params)
    for _ in range(60):
        params, state, loss = step(params, state)
    assert float(jnp.exp(-loss)) > 0.9
    out = jax.jit(POLICY.generate)(params, VIEW, jnp.int32(0), jax.random.PRNGKey(5))
    assert out.tokens.tolist() == [4, END, PAD]


@pytest.mark.slow
def test_per_token_log_probabilities_add_up_and_an_alphabet_bars_every_other_token():
    allowed = np.zeros(V, bool)
    allowed[[END, 4]] = True
    for policy in (POLICY, TokenPolicy(V, 2, L, T, width=32, layers=2, heads=2, alphabet=allowed)):
        params = policy.init(jax.random.PRNGKey(0))
        keys = jax.random.split(jax.random.PRNGKey(3), 32)
        out = jax.vmap(policy.generate, in_axes=(None, None, None, 0))(params, VIEW, jnp.int32(0), keys)
        per_token, _ = jax.vmap(policy.token_log_probs, in_axes=(None, None, None, 0))(params, VIEW, jnp.int32(0),
                                                                                        out.tokens)
        np.testing.assert_allclose(np.asarray(out.token_log_prob), np.asarray(per_token), atol=1e-5)
        np.testing.assert_allclose(np.asarray(out.token_log_prob.sum(-1)), np.asarray(out.log_prob), atol=1e-5)
    said = np.asarray(out.tokens)[np.asarray(jax.vmap(spoken)(out.tokens))]
    assert set(said.tolist()) <= {END, 4} and 4 in said.tolist()
    every = jnp.asarray(_utterances())
    logp, _ = jax.vmap(policy.log_prob, in_axes=(None, None, None, 0))(params, VIEW, jnp.int32(0), every)
    assert abs(float(jnp.exp(logp).sum()) - 1.0) < 1e-4          # still a distribution over utterances


# Moves with shared prefixes (a trie): "4", "4 3", "5 3 4", "5 4" (ids of the small vocabulary above).
MOVES = np.array([[4, END, PAD], [4, 3, END], [5, 3, 4], [5, 4, END]], np.int32)
RESTRICTED = TokenPolicy(vocab_size=V, num_roles=2, view_len=L, max_tokens=T, width=32, layers=2, heads=2,
                         moves=MOVES)


def test_decoding_restricted_to_moves_writes_only_them_and_their_probabilities_sum_to_one():
    params = RESTRICTED.init(jax.random.PRNGKey(0))
    every = jnp.asarray(_utterances())
    is_move = np.array([any(np.array_equal(u, m) for m in MOVES) for u in np.asarray(every)])
    score = jax.jit(jax.vmap(RESTRICTED.log_prob, in_axes=(None, None, None, 0, None, None)))
    gen = jax.jit(jax.vmap(RESTRICTED.generate, in_axes=(None, None, None, 0, None, None)))
    keys = jax.random.split(jax.random.PRNGKey(3), 256)
    for legal in (np.ones(4, bool), np.array([False, True, True, False])):
        logp, _ = score(params, VIEW, jnp.int32(0), every, 1.0, jnp.asarray(legal))
        p = np.exp(np.asarray(logp))
        allowed = np.array([any(np.array_equal(u, m) for m in MOVES[legal]) for u in np.asarray(every)])
        assert allowed.sum() == legal.sum() and np.all(p[~allowed] == 0.0)
        assert abs(p[allowed].sum() - 1.0) < 1e-5 and np.all(p[allowed] > 0)
        # every sampled utterance is a legal move, scored with the probability it was sampled with
        out = gen(params, VIEW, jnp.int32(0), keys, 1.0, jnp.asarray(legal))
        rows = [next(i for i, m in enumerate(MOVES) if np.array_equal(u, m)) for u in np.asarray(out.tokens)]
        assert set(rows) == set(np.flatnonzero(legal))
        scored, _ = score(params, VIEW, jnp.int32(0), out.tokens, 1.0, jnp.asarray(legal))
        np.testing.assert_allclose(np.asarray(scored), np.asarray(out.log_prob), atol=1e-5)
    # Without `legal`, all four moves; the unrestricted policy gives the rest of the utterances mass
    free, _ = jax.jit(jax.vmap(POLICY.log_prob, in_axes=(None, None, None, 0)))(
        POLICY.init(jax.random.PRNGKey(0)), VIEW, jnp.int32(0), every)
    assert float(np.exp(np.asarray(free))[~is_move].sum()) > 0.1
    logp, _ = score(params, VIEW, jnp.int32(0), every, 1.0, None)
    assert abs(float(np.exp(np.asarray(logp))[is_move].sum()) - 1.0) < 1e-5
