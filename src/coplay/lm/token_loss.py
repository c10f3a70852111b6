"""The clipped token loss of `coplay.algos.common.token_loss`, in PyTorch, for a
language model trained on the host (`algo=lm_grpo`). Same arrays, same loss and
same gradient as the JAX version (`tests/test_token_loss.py` holds them to it):

    l_t = -min(r_t A, clip(r_t, 1 - eps, 1 + eps) A) + kl_coef (exp(q_t) - q_t - 1),
    r_t = exp(log pi(y_t) - log pi_old(y_t)),   q_t = log pi_ref(y_t) - log pi(y_t)

averaged over tokens as `norm` says (sequence: GRPO, token: DAPO, constant:
Dr. GRPO; see the JAX module). Shapes: `[B, T]` per token, `[B]` per reply."""

from __future__ import annotations

from typing import Any

NORMS = ("sequence", "token", "constant")


def aggregate_tokens(x: Any, tokens: Any, weight: Any, norm: str, max_tokens: int) -> Any:
    """Token terms `x [B, T]` averaged as `norm` says over the replies of positive
    `weight [B]`; `tokens [B, T]` marks the tokens spoken (the rest carry nothing)."""
    tok = tokens.to(x.dtype)
    per_seq = (x * tok).sum(-1)
    replies = weight.sum().clamp(min=1.0)
    if norm == "sequence":
        return (per_seq / tok.sum(-1).clamp(min=1.0)).sum() / replies
    if norm == "token":
        return per_seq.sum() / tok.sum().clamp(min=1.0)
    if norm == "constant":
        return per_seq.sum() / (replies * max_tokens)
    raise ValueError(f"token_norm {norm!r} is not one of {NORMS}")


def token_mean(x: Any, tokens: Any) -> Any:
    """The plain mean of `x` over the spoken tokens (for statistics)."""
    tok = tokens.to(x.dtype)
    return (x * tok).sum() / tok.sum().clamp(min=1.0)


def clipped_token_loss(logp: Any, old_logp: Any, adv: Any, tokens: Any, weight: Any, *, clip_eps: float,
                       norm: str, max_tokens: int, ref_logp: Any = None, kl_coef: float = 0.0) -> tuple[Any, dict]:
    """`(loss, parts)`: the PPO-clipped token loss with the k3 KL to `ref_logp` where
    `kl_coef > 0`; `parts` holds `policy` (the clipped term, aggregated), and per
    token `ratio`, `log_ratio` and `kl` (None without a KL term)."""
    import torch

    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    a = adv[:, None]
    pg = -torch.minimum(ratio * a, torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * a)
    policy = aggregate_tokens(pg, tokens, weight, norm, max_tokens)
    loss, kl = policy, None
    if ref_logp is not None and kl_coef > 0:
        q = ref_logp - logp
        kl = torch.exp(q) - q - 1.0
        loss = loss + kl_coef * aggregate_tokens(kl, tokens, weight, norm, max_tokens)
    return loss, {"policy": policy, "ratio": ratio, "log_ratio": log_ratio, "kl": kl}
