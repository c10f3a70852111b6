"""The loss terms of a policy that writes utterances token by token, shared by
the trainers of token policies (`algo=grpo`; its PyTorch twin, `coplay.lm.token_loss`,
serves `algo=lm_grpo`, and `tests/test_token_loss.py` holds the two to the same
values and gradients).

Terms per token are averaged as `token_norm` says (verl's `loss_agg_mode`):

    sequence   mean over each utterance's tokens, then over utterances (GRPO: seq-mean-token-mean)
    token      mean over every token of the minibatch (DAPO: token-mean)
    constant   sum over each utterance's tokens / max_tokens, mean over utterances
               (Dr. GRPO: seq-mean-token-sum-norm, no length bias)

and the KL to a reference policy is Schulman's k3 estimator per token,
exp(q) - q - 1 with q = log pi_ref - log pi: unbiased for KL(pi || pi_ref) on
tokens drawn from pi, and never negative."""

from __future__ import annotations

from typing import Literal, get_args

import jax
import jax.numpy as jnp

from coplay.algos.common.ppo import clip_terms

TokenNorm = Literal["sequence", "token", "constant"]
TOKEN_NORMS: tuple[str, ...] = get_args(TokenNorm)


def aggregate_tokens(x: jax.Array, tokens: jax.Array, weight: jax.Array, norm: str, max_tokens: int) -> jax.Array:
    """Token terms `x [B, T]` averaged as `norm` says over the utterances of positive
    `weight [B]`; `tokens [B, T]` marks the tokens spoken (the rest carry nothing)."""
    tok = tokens.astype(x.dtype)
    per_seq = jnp.sum(x * tok, axis=-1)
    utterances = jnp.maximum(jnp.sum(weight), 1.0)
    if norm == "sequence":
        return jnp.sum(per_seq / jnp.maximum(jnp.sum(tok, axis=-1), 1.0)) / utterances
    if norm == "token":
        return jnp.sum(per_seq) / jnp.maximum(jnp.sum(tok), 1.0)
    if norm == "constant":
        return jnp.sum(per_seq) / (utterances * max_tokens)
    raise ValueError(f"token_norm {norm!r} is not one of {TOKEN_NORMS}")


def token_mean(x: jax.Array, tokens: jax.Array) -> jax.Array:
    """The plain mean of `x` over the spoken tokens (for statistics)."""
    return jnp.sum(x * tokens) / jnp.maximum(jnp.sum(tokens), 1.0)


def k3_kl(ref_logp: jax.Array, logp: jax.Array) -> jax.Array:
    """Per token: exp(q) - q - 1, q = log pi_ref - log pi."""
    q = ref_logp - logp
    return jnp.exp(q) - q - 1.0


def clipped_token_loss(logp: jax.Array, old_logp: jax.Array, adv: jax.Array, tokens: jax.Array, weight: jax.Array, *,
                       clip_eps: float, norm: str, max_tokens: int, ref_logp: jax.Array | None = None,
                       kl_coef: float = 0.0) -> tuple[jax.Array, dict]:
    """`(loss, parts)` of utterances `[B, T]` with advantages `adv [B]`: the PPO-clipped
    token term plus `kl_coef` times the k3 KL to `ref_logp` (where `kl_coef > 0`), each
    averaged as `norm` says. `parts`: `policy` (the clipped term, averaged), and per
    token `ratio`, `log_ratio` and `kl` (None without a KL term)."""
    pg, ratio, log_ratio = clip_terms(logp, old_logp, adv[:, None], clip_eps)
    policy = aggregate_tokens(pg, tokens, weight, norm, max_tokens)
    loss, kl = policy, None
    if ref_logp is not None and kl_coef > 0:
        kl = k3_kl(ref_logp, logp)
        loss = loss + kl_coef * aggregate_tokens(kl, tokens, weight, norm, max_tokens)
    return loss, {"policy": policy, "ratio": ratio, "log_ratio": log_ratio, "kl": kl}
