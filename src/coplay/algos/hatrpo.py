"""HATRPO: heterogeneous-agent trust-region policy optimisation (Kuba et al., 2022;
HARL, Zhong et al., JMLR 2024).

HAPPO's sequential scheme (`coplay.algos.happo`: an actor per agent, updated one after
another in a random order, agent i_m's advantage weighted by the earlier agents'
probability ratios M_{i_m}), with each agent's step taken by TRPO instead of clipped
epochs: it maximises

    L(theta) = mean[ M_{i_m} pi_theta(a | o) / pi_old(a | o) A ]   subject to   mean[ KL(pi_old || pi_theta) ] <= delta

by one natural-gradient step. With g = grad L and F the Fisher matrix (the Hessian of
the mean KL at theta_old, damped by `algo.cg_damping`), conjugate gradient
(`algo.cg_iters` iterations) solves F x = g, the full step is
sqrt(2 delta / x^T F x) x, and a backtracking line search (`algo.ls_steps` steps,
shrinking by `algo.backtrack`) takes the first step whose KL is below delta, whose
surrogate improves, and whose improvement is at least `algo.accept_ratio` of the
linear prediction; where none is, the agent keeps its parameters. Every candidate
step is evaluated at once. The defaults are HARL's (delta 0.01, 10 steps of 0.8,
accept ratio 0.5). The critic is HAPPO's (MAPPO's value loss, Adam epochs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from coplay.algos import happo
from coplay.algos.common import ppo
from coplay.core.config import param


@dataclass(frozen=True)
class Config(happo.Config):
    kl_threshold: float = param(0.01, "the trust region: mean KL(old || new) of an agent's step at most this",
                                min=0.0, min_exclusive=True)
    cg_iters: int = param(10, "conjugate-gradient iterations for the natural gradient", min=1)
    cg_damping: float = param(0.1, "damping added to the Fisher-vector product", min=0.0)
    ls_steps: int = param(10, "backtracking line-search steps", min=1)
    backtrack: float = param(0.8, "each line-search step shrinks the step by this factor (below 1)", min=0.0,
                             min_exclusive=True, max=0.99)
    accept_ratio: float = param(0.5, "least share of the predicted improvement a step must realise", min=0.0)


class HATRPO(happo.HAPPO):
    name = "hatrpo"
    config_class = Config

    def init(self, key: jax.Array) -> Any:
        state = super().init(key)
        # the actors take no optimiser steps; only the critic keeps Adam's state
        return dataclasses.replace(state, opt_state={"actor": jnp.zeros((self.num_agents,)),
                                                     "critic": state.opt_state["critic"]})

    def actor_update(self, key: jax.Array, params: Any, opt: Any, data: dict) -> tuple[Any, Any, dict]:
        c = self.config
        assert isinstance(c, Config)
        flat, unravel = ravel_pytree(params)
        adv = ppo.normalize(data["adv"], data["active"]) if c.normalize_advantages else data["adv"]
        old_logits = jax.lax.stop_gradient(self._actor_logits(params, data["obs"], data["action_mask"]))

        def logits(x):
            return self._actor_logits(unravel(x), data["obs"], data["action_mask"])

        def surrogate(x):
            ratio = jnp.exp(self.dist.log_prob(logits(x), data["action"]) - data["logp"])
            return ppo.masked_mean(data["factor"] * ratio * adv, data["active"])

        def mean_kl(x):
            return ppo.masked_mean(self.dist.kl(old_logits, logits(x)), data["active"])

        g = jax.grad(surrogate)(flat)
        kl_grad = jax.grad(mean_kl)

        def fisher(v):
            return jax.jvp(kl_grad, (flat,), (v,))[1] + c.cg_damping * v

        x, _ = jax.scipy.sparse.linalg.cg(fisher, g, maxiter=c.cg_iters)
        curvature = jnp.dot(x, fisher(x))
        full = jnp.sqrt(2 * c.kl_threshold / jnp.maximum(curvature, 1e-12)) * x
        expected = jnp.dot(g, full)
        fractions = c.backtrack ** jnp.arange(c.ls_steps)
        candidates = flat[None] + fractions[:, None] * full[None]
        before = surrogate(flat)
        improve = jax.vmap(surrogate)(candidates) - before
        kls = jax.vmap(mean_kl)(candidates)
        ok = (kls < c.kl_threshold) & (improve > 0) & (improve > c.accept_ratio * expected * fractions) & \
            jnp.isfinite(improve)
        first = jnp.argmax(ok)
        accepted = jnp.any(ok)
        new = jnp.where(accepted, candidates[first], flat)
        ent = ppo.masked_mean(self.dist.entropy(logits(new)), data["active"])
        stats = {"loss/policy": -jnp.where(accepted, improve[first] + before, before), "loss/entropy": ent,
                 "loss/approx_kl": jnp.where(accepted, kls[first], 0.0),
                 "hatrpo/accepted": accepted.astype(jnp.float32),
                 "hatrpo/step_fraction": jnp.where(accepted, fractions[first], 0.0)}
        return unravel(new), opt, stats
