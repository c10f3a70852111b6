"""Evaluation episodes of a policy, compiled: the default `Trainer.evaluator`."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from coplay.algos.common.arena import against_random
from coplay.algos.common.rollout import play_until_done, reset_envs
from coplay.core.policy import Evaluator, Policy
from coplay.envs.text.games import TextGame
from coplay.envs.text.scoring import score_text_policy, speaker
from coplay.envs.text.tree_games import TextTreeGame


def make_evaluator(policy: Policy, episodes: int, *, vmapped: bool = True) -> Evaluator:
    """Returns `evaluate(params, key) -> dict of [episodes]` arrays: each
    environment's first complete episode's statistics (`return` is the episode
    return averaged over agents; other keys are the summed `info` entries).
    Pure and jit-able; `vmap` it over seeds. `vmapped=False` promises that it is called
    without `vmap`: on a host environment it then stops once every episode has ended
    instead of stepping to the horizon (`play_until_done`)."""
    env = policy.env
    horizon = env.spec.max_steps

    def evaluate(params: Any, key: jax.Array) -> dict[str, jax.Array]:
        k_reset, k_run = jax.random.split(key)
        state, ts = reset_envs(env, k_reset, episodes)
        carry = policy.initial_carry((episodes,))
        stats = {k[len("episode/"):]: jnp.zeros(v.shape[:1] + v.shape[1:], jnp.float32)
                 for k, v in ts.info.items() if k.startswith("episode/") and k != "episode/done"}
        finished = jnp.zeros((episodes,), bool)

        keys = jax.random.split(k_run, horizon)

        def body(t, c):
            state, ts, carry, stats, finished = c
            k_act, k_env = jax.random.split(keys[t])
            action, carry = policy.act(params, ts.obs, ts.action_mask, k_act, carry, ts.done)
            state, ts = jax.vmap(env.step)(state, action, jax.random.split(k_env, episodes))
            first = ts.info["episode/done"] & ~finished
            stats = {name: jnp.where(first.reshape(-1, *([1] * (v.ndim - 1))),
                                     ts.info[f"episode/{name}"].astype(jnp.float32), v)
                     for name, v in stats.items()}
            return state, ts, carry, stats, finished | ts.info["episode/done"]

        _, _, _, stats, finished = play_until_done(env, horizon, body, (state, ts, carry, stats, finished),
                                                   lambda c: c[-1], vmapped=vmapped)
        ret = stats.pop("return")
        out = {"return": ret.reshape(episodes, -1).mean(-1) if ret.ndim > 1 else ret}
        out.update({k: v.reshape(episodes, -1).mean(-1) for k, v in stats.items()})
        out["finished"] = finished.astype(jnp.float32)
        return out

    return evaluate


def text_evaluator(env: Any, policy: Policy, model: Any, episodes: int, temperature: float = 1.0, *,
                   per_role: bool = False, legal_only: bool = False) -> Evaluator:
    """A token-level text policy's evaluation on text environment `env`: self-play episodes
    (the policy in every seat, `make_evaluator`), and where the game allows more,
    - a game with an exact tree (text:kuhn_poker, text:leduc_holdem): the policy's exact
      exploitability, NashConv and invalid mass (`score_text_policy` with `model`,
      `temperature`, `per_role`, `legal_only`; the same value in every episode's entry);
    - another game of rivals in words: its `win`, `draw` and `loss` rates against random
      legal moves of the game underneath, in every seat in turn."""
    play = make_evaluator(policy, episodes)
    if isinstance(env, TextTreeGame):
        def scored(params, key):
            score = score_text_policy(env, model, params, temperature, per_role=per_role, legal_only=legal_only)
            return {**play(params, key), **score.measures(episodes)}

        return scored
    if not isinstance(env, TextGame) or len(set(env.spec.teams)) < 2:
        return play
    versus = against_random(env.game, speaker(env, policy), episodes)

    def against(params, key):
        k_self, k_versus = jax.random.split(key)
        results = versus(params, k_versus)
        return {**play(params, k_self), **{k: results[k] for k in ("win", "draw", "loss")}}

    return against
