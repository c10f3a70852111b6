"""A token-level policy: a small decoder-only transformer that reads an agent's view
(token ids) and writes its utterance one token at a time, inside compiled code.

The sequence it models is `[view (L tokens), utterance (T tokens)]`: causal
self-attention over both, `<pad>` positions of the view masked out as keys, a
learned embedding of the agent's role added at every position (one model can
play every seat and role). The logits at position `L - 1 + t` give token `t` of
the utterance.

- `generate(params, view, role, key, temperature)` samples an utterance `[T]`:
  T passes over the whole sequence, each filling one more token (attention is
  recomputed, not cached: with L + T under a hundred tokens and T of a few,
  recomputing costs T full passes, and keeps one code path for sampling and
  scoring). After the first `<end>` every token is `<pad>`.
- `log_prob(params, view, role, utterance)` scores a given utterance in one pass
  (teacher forcing): the sum of its tokens' log-probabilities up to and including
  the first `<end>`, the tokens after it being fixed. The same value `generate`
  sampled it with, which is what the exact evaluation of a text policy (its
  probability of each move's utterance) needs; `token_log_probs` gives the
  per-token terms a token-level PPO ratio needs.

Decoding restricted to given utterances (off by default: learning the format is
part of the task). With `moves` `[A, T]` (a text environment's `move_tokens()`),
the policy writes only utterances that are rows of it: at token t, the tokens
allowed are the t-th tokens of the rows that agree with the utterance so far,
and the others get probability 0. The methods' `legal [A]` narrows the rows to
those legal now (a text environment's `move_mask`). Sampling and scoring apply
the same restriction, so `log_prob` stays the probability the utterance was
sampled with.

Shapes below are for one agent; `vmap` over agents, environments and seeds.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.compile import call_once
from coplay.core.errors import ConfigError
from coplay.envs.text.vocab import END, PAD, spoken


class Block(nn.Module):
    width: int
    heads: int

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads, qkv_features=self.width)(h, h, mask=mask)
        h = nn.LayerNorm()(x)
        return x + nn.Dense(self.width)(nn.gelu(nn.Dense(4 * self.width)(h)))


class TokenTransformer(nn.Module):
    """tokens `[S]`, role `[]` -> logits `[S, V]` (causal; `<pad>` keys masked)."""

    vocab_size: int
    num_roles: int
    max_len: int
    width: int = 64
    layers: int = 2
    heads: int = 4

    @nn.compact
    def __call__(self, tokens: jax.Array, role: jax.Array) -> jax.Array:
        s = tokens.shape[-1]
        x = nn.Embed(self.vocab_size, self.width)(tokens)
        # (the role as a one-element index: flax broadcasts a one-row table over the index's shape)
        role_vec = nn.Embed(self.num_roles, self.width)(jnp.reshape(role, (1,)))[0]
        x = x + nn.Embed(self.max_len, self.width)(jnp.arange(s)) + role_vec
        # a query sees earlier (and its own) positions that are not padding; it always sees itself
        keys = (tokens != PAD) | (jnp.arange(s) == 0)
        mask = jnp.tril(jnp.ones((s, s), bool)) & (keys[None, :] | jnp.eye(s, dtype=bool))
        for _ in range(self.layers):
            x = Block(self.width, self.heads)(x, mask[None])
        return nn.Dense(self.vocab_size)(nn.LayerNorm()(x))


class Utterance(NamedTuple):
    tokens: jax.Array           # [T] int32, <pad> after the first <end>
    log_prob: jax.Array         # [] the utterance's log-probability under the sampling distribution
    length: jax.Array           # [] int32 tokens up to and including the first <end> (T where none)
    token_log_prob: jax.Array   # [T] each token's log-probability (0 past the end)


# The logit of a token outside the policy's alphabet: its probability underflows to 0
# (a finite number, so that entropies stay 0 * finite instead of 0 * inf).
BARRED = -1e9


class TokenPolicy:
    """`TokenTransformer` with the view length L and utterance length T it serves.

    `alphabet`, `[V]` bool, where given: the tokens the policy may write (the others
    get probability 0 in sampling and scoring alike), e.g. a text environment's
    `speech_tokens()`. `moves`, `[A, T]` token ids, where given: the only utterances
    it may write (see the module's doc)."""

    def __init__(self, vocab_size: int, num_roles: int, view_len: int, max_tokens: int, width: int = 64,
                 layers: int = 2, heads: int = 4, alphabet: np.ndarray | None = None,
                 moves: np.ndarray | jax.Array | None = None):
        self.view_len, self.max_tokens, self.vocab_size = view_len, max_tokens, vocab_size
        self.net = TokenTransformer(vocab_size, num_roles, view_len + max_tokens, width, layers, heads)
        if alphabet is not None and np.shape(alphabet) != (vocab_size,):
            raise ConfigError(f"alphabet has shape {np.shape(alphabet)}, expected ({vocab_size},): one flag per token")
        self.alphabet = None if alphabet is None else np.asarray(alphabet, bool)
        if moves is not None:
            moves = np.asarray(moves)
            if moves.ndim != 2 or moves.shape[1] != max_tokens or moves.shape[0] < 1:
                raise ConfigError(f"moves has shape {moves.shape}, expected (A, {max_tokens}): one utterance per row")
            if moves.min() < 0 or moves.max() >= vocab_size:
                raise ConfigError(f"moves holds token ids outside 0..{vocab_size - 1}")
        self.moves = None if moves is None else np.asarray(moves, np.int32)

    def allowed(self, utterance: jax.Array, legal: jax.Array | None = None) -> jax.Array:
        """`[T, V]` bool: the tokens the policy may write at each position of `utterance [T]`
        given the tokens before it: the next tokens of the rows of `moves` (those `legal [A]`
        allows) that agree with the utterance so far. Where no row agrees, every token."""
        moves = jnp.asarray(self.moves)
        a, t = moves.shape
        agree = moves == jnp.asarray(utterance, jnp.int32)[None]                     # [A, T]
        before = jnp.concatenate([jnp.ones((a, 1), bool), agree[:, :-1]], axis=1)
        live = jnp.cumprod(before.astype(jnp.int32), axis=1) > 0                      # agrees on every earlier token
        if legal is not None:
            live = live & jnp.asarray(legal, bool)[:, None]
        count = jnp.zeros((t, self.vocab_size), jnp.int32).at[jnp.arange(t)[None, :], moves].add(
            live.astype(jnp.int32))
        allowed = count > 0
        return allowed | ~allowed.any(-1, keepdims=True)

    def init(self, key: jax.Array) -> Any:
        """Fresh parameters, computed as one program (`call_once`)."""
        return call_once(lambda k: self.net.init(k, jnp.zeros(self.view_len + self.max_tokens, jnp.int32),
                                                 jnp.int32(0)), key)

    def _logits(self, params: Any, view: jax.Array, role: jax.Array, utterance: jax.Array,
                legal: jax.Array | None = None) -> jax.Array:
        """`[T, V]`: the logits of each utterance token given the view and the tokens before it."""
        seq = jnp.concatenate([jnp.asarray(view, jnp.int32), jnp.asarray(utterance, jnp.int32)])
        logits: jax.Array = self.net.apply(params, seq, jnp.asarray(role, jnp.int32))  # type: ignore[assignment]  # one output
        logits = logits[self.view_len - 1:-1]
        if self.alphabet is not None:
            logits = jnp.where(jnp.asarray(self.alphabet), logits, BARRED)
        if self.moves is not None:
            logits = jnp.where(self.allowed(utterance, legal), logits, BARRED)
        return logits

    def token_log_probs(self, params: Any, view: jax.Array, role: jax.Array, utterance: jax.Array,
                        temperature: float = 1.0, legal: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """`(log-probability [T], entropy [T])` of each token of `utterance [T]` given
        `view [L]` and the tokens before it; both are zero past the utterance's end."""
        logp = jax.nn.log_softmax(self._logits(params, view, role, utterance, legal) / temperature)
        said = spoken(utterance)
        token_logp = jnp.take_along_axis(logp, utterance[:, None], axis=-1)[:, 0]
        entropy = -(jnp.exp(logp) * logp).sum(-1)
        return jnp.where(said, token_logp, 0.0), jnp.where(said, entropy, 0.0)

    def log_prob(self, params: Any, view: jax.Array, role: jax.Array, utterance: jax.Array,
                 temperature: float = 1.0, legal: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """`(log-probability [], per-token entropy [T])` of `utterance [T]` given `view [L]`;
        the entropy is zero past the utterance's end."""
        token_logp, entropy = self.token_log_probs(params, view, role, utterance, temperature, legal)
        return token_logp.sum(), entropy

    def generate(self, params: Any, view: jax.Array, role: jax.Array, key: jax.Array,
                 temperature: float = 1.0, legal: jax.Array | None = None) -> Utterance:
        """Sample an utterance `[T]` token by token (see the module's doc)."""
        t_max = self.max_tokens

        def one(carry, t):
            tokens, done = carry
            logits = self._logits(params, view, role, tokens, legal)[t] / temperature
            token = jax.random.categorical(jax.random.fold_in(key, t), logits).astype(jnp.int32)
            token = jnp.where(done, PAD, token)
            logp = jnp.where(done, 0.0, jax.nn.log_softmax(logits)[token])
            return (tokens.at[t].set(token), done | (token == END)), logp

        start = (jnp.full(t_max, PAD, jnp.int32), jnp.bool_(False))
        (tokens, _), logp = jax.lax.scan(one, start, jnp.arange(t_max))
        return Utterance(tokens, logp.sum(), spoken(tokens).sum().astype(jnp.int32), logp)


def scripted(tokens: jax.Array) -> Utterance:
    """Utterances [..., T] that no policy wrote (a bot's, a random move's): log-probabilities 0."""
    return Utterance(tokens=tokens, log_prob=jnp.zeros(tokens.shape[:-1], jnp.float32),
                     length=jnp.sum(spoken(tokens), axis=-1).astype(jnp.int32),
                     token_log_prob=jnp.zeros(tokens.shape, jnp.float32))


class Speakers:
    """A `TokenPolicy` speaking for every agent of a game: one model for every agent
    (`shared`), or one per agent index (each parameter leaf `[N, ...]`); every call
    reads each speaker's model by its agent index."""

    def __init__(self, model: TokenPolicy, num_agents: int, shared: bool, temperature: float):
        self.model, self.num_agents, self.shared, self.temperature = model, num_agents, shared, temperature

    def init(self, key: jax.Array) -> Any:
        if self.shared:
            return self.model.init(key)
        return jax.vmap(self.model.init)(jax.random.split(key, self.num_agents))

    def params_of(self, params: Any, agent: jax.Array) -> Any:
        """The model agent `agent` speaks with."""
        return params if self.shared else jax.tree.map(lambda p: p[agent], params)

    def generate(self, params: Any, views: jax.Array, agents: jax.Array, key: jax.Array,
                 legal: jax.Array | None = None) -> Utterance:
        """views [B, K, L], agents [B, K], legal moves [B, K, A] (or None) -> utterances [B, K, ...]."""
        b, k = agents.shape
        keys = jax.random.split(key, b * k).reshape(b, k, -1)

        def one(v, a, kk, ok):   # (vmap passes legal=None through as None)
            return self.model.generate(self.params_of(params, a), v, a, kk, self.temperature, ok)

        return jax.vmap(jax.vmap(one))(views, agents, keys, legal)

    def token_log_probs(self, params: Any, views: jax.Array, agents: jax.Array, tokens: jax.Array,
                        legal: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """[B] utterances (legal moves [B, A], or None) -> (log-probabilities [B, T], entropies [B, T])."""
        return jax.vmap(lambda v, a, u, ok: self.model.token_log_probs(
            self.params_of(params, a), v, a, u, self.temperature, ok))(views, agents, tokens, legal)
