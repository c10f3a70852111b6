"""Games between policies, one policy per seat, compiled.

    play = make_match(env, [learner, random_policy(env)], episodes=256)
    out = jax.jit(play)([params, None], key)
    out["return"]   # [episodes, N] each seat's return
    out["first"]    # [episodes]    the seat that moved first

Seat i of every game is played by `policies[i]`, which is asked for all agent
rows (the `Policy` interface) and whose row i is used. Each of the `episodes`
games runs once from its reset, for at most `env.spec.max_steps` steps, with no
auto-reset. `opening_moves=k` plays the first k moves of each game uniformly at
random for every seat (random openings, so that deterministic players meet
varied positions).

All policies must act on the observations of the same environment: a policy
trained or written for another environment is refused (`check_same_env`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from coplay.algos.common.rollout import play_until_done
from coplay.core.env import Env, TimeStepWrapper, Wrapper
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy, no_carry
from coplay.envs.text.base import MovesAsMask
from coplay.nets.distributions import prefix_sum
from coplay.wrappers import AutoReset, EpisodeStats

# Wrappers that leave observations and actions as they are: a policy built over
# them acts on the bare environment. (MovesAsMask only adds the legal moves that a
# text policy restricted to them reads as its mask; in the game underneath a text
# game, `speaker`, the game's own mask gives them.)
_TRANSPARENT = (AutoReset, EpisodeStats, MovesAsMask)


def bare_env(env: Env) -> Env:
    """`env` without the bookkeeping wrappers (auto-reset, episode statistics)."""
    while isinstance(env, _TRANSPARENT):
        env = env.env
    return env


def env_signature(env: Env) -> tuple:
    """What a policy's observations depend on: the environment's name, agents and spaces."""
    s = bare_env(env).spec
    return (s.name, s.num_agents, repr(s.obs_space), repr(s.action_space))


def check_same_env(env: Env, policies: dict[str, Policy] | Sequence[Policy]) -> None:
    """Refuse any policy whose observations come from another environment, naming it."""
    named = policies.items() if isinstance(policies, dict) else ((str(i), p) for i, p in enumerate(policies))
    want = env_signature(env)
    for name, policy in named:
        got = env_signature(policy.env)
        if got != want:
            inner = bare_env(policy.env)
            wrapped = " (through " + ", ".join(type(w).__name__ for w in _wrappers(policy.env)) + ")" \
                if isinstance(inner, Wrapper) else ""
            raise ConfigError(
                f"policy {name!r} was built for environment {got[0]!r}{wrapped} with {got[1]} agents, "
                f"observations {got[2]} and actions {got[3]}, but the games are played in {want[0]!r} "
                f"({want[1]} agents, observations {want[2]}, actions {want[3]}); every player must be built "
                "for the same environment")


def seated(policy: Policy, env: Env) -> Policy:
    """`policy` as it plays in `env`. A policy built over view-only wrappers of `env`
    (`TimeStepWrapper`s such as `AgentID`, which a learner adds to the observations)
    reads its observations through them (`Policy.observe`); any other policy is
    returned as it is (and `check_same_env` refuses one built for another environment)."""
    if policy.observe is not None or env_signature(policy.env) == env_signature(env):
        return policy
    views, inner = [], bare_env(policy.env)
    while isinstance(inner, TimeStepWrapper):
        views.append(inner)
        inner = bare_env(inner.env)
    if not views or env_signature(inner) != env_signature(env):
        return policy

    def observe(state: Any, ts: Any) -> jax.Array:
        for view in reversed(views):          # the innermost first; the state passes through them unchanged
            ts = jax.vmap(view._view)(state, ts)
        return ts.obs

    return dataclasses.replace(policy, env=inner, observe=observe)


def _wrappers(env: Env) -> list[Env]:
    out: list[Env] = []
    while isinstance(env, Wrapper):
        out.append(env)
        env = env.env
    return out


def _pick(bits: jax.Array, mask: jax.Array) -> jax.Array:
    """The (bits mod k)-th of the k True entries of each row of `mask` [..., A], with
    uint32 `bits` broadcastable to [...]: [...] int32; 0 where a row has no True entry."""
    if mask.shape[-1] <= 32:
        return _pick_in_word(bits, mask)
    count = jnp.sum(mask, axis=-1, dtype=jnp.int32)
    rank = (bits % jnp.maximum(count, 1).astype(jnp.uint32)).astype(jnp.int32)
    # The chosen entry is the first whose running count of True entries passes `rank`.
    seen = prefix_sum(mask.astype(jnp.int32))
    return jnp.argmax(seen > rank[..., None], axis=-1).astype(jnp.int32)


def _pick_in_word(bits: jax.Array, mask: jax.Array) -> jax.Array:
    """`_pick` for A <= 32: each row packed into the bits of one uint32, its lowest set
    bit cleared `rank` times (`word & (word - 1)`, at most A - 1 steps, each kept only
    while the step is below the rank), and the index of the lowest bit left is the
    answer: the number of bits below it, `popcount(lowest - 1)`. Every step is a few
    elementwise integer operations that vectorise across rows, with no prefix sum over
    the row and only two population counts; on the CPU it takes about half the time of
    finding the bit by halving (a population count of each half, five times)."""
    a = mask.shape[-1]
    word = jnp.sum(mask.astype(jnp.uint32) << jnp.arange(a, dtype=jnp.uint32), axis=-1, dtype=jnp.uint32)
    count = jax.lax.population_count(word)
    rank = bits % jnp.maximum(count, 1)
    for step in range(a - 1):
        word = jnp.where(rank > step, word & (word - 1), word)
    lowest = word & (~word + 1)
    return jnp.where(count > 0, jax.lax.population_count(lowest - 1), 0).astype(jnp.int32)


def sample_from_mask(key: jax.Array, mask: jax.Array) -> jax.Array:
    """A uniformly random True entry of each row of `mask` ([..., A] bool): [...] int32.
    A row with no True entry gives 0.

    One random 32-bit number per row, reduced modulo the row's number of True
    entries (a bias below A / 2**32), instead of a Gumbel draw per entry."""
    return _pick(jax.random.bits(key, mask.shape[:-1], jnp.uint32), mask)


def random_legal_actions(key: jax.Array, mask: jax.Array, turn_based: bool) -> jax.Array:
    """A uniformly random legal action for every agent row: mask [..., N, A] -> [..., N] int32.

    In a turn-based game only the mover's action is played, so one random number per
    game serves every row (each row still gets a uniform choice among its own legal
    actions); in a simultaneous game each agent draws its own, as `sample_from_mask`."""
    if not turn_based or mask.ndim < 2:
        return sample_from_mask(key, mask)
    return _pick(jax.random.bits(key, (*mask.shape[:-2], 1), jnp.uint32), mask)


def _random_turns(params, obs, mask, key, carry, reset):
    return random_legal_actions(key, mask, True), carry


def _random_each(params, obs, mask, key, carry, reset):
    return random_legal_actions(key, mask, False), carry


def random_policy(env: Env) -> Policy:
    """Uniformly random legal actions: the baseline every competitive policy is first measured against.
    It has no parameters: pass `None`. In turn-based games (`env.spec.turn_based`) the
    agents of one game share one random number (only the mover's action is played);
    in simultaneous games every agent draws its own. Random policies for one
    environment compare equal, so `make_match` plays several seats of them with one draw."""
    return Policy(act=_random_turns if env.spec.turn_based else _random_each, initial_carry=no_carry, env=env)


def make_match(env: Env, policies: Sequence[Policy], episodes: int, opening_moves: int = 0):
    """Returns `play(params: list, key) -> dict` (pure, jit-able; vmap over params or keys):

        return    [episodes, N] float32  each seat's episode return
        first     [episodes] int32       the seat that moved first (turn-based), 0 otherwise
        length    [episodes] int32       steps played
        finished  [episodes] bool        the game ended within max_steps
        illegal   [episodes, N] bool     the seat lost by an illegal action (where the env reports it)
        final     {name: [episodes]}     the `social/...` info entries of each episode's last step
                                         (`coplay.envs.social.metrics`; empty for other environments)
    """
    env = bare_env(env)
    n = env.spec.num_agents
    if len(policies) != n:
        raise ConfigError(f"{env.spec.name!r} has {n} seats, got {len(policies)} policies")
    if isinstance(opening_moves, bool) or not isinstance(opening_moves, int) or opening_moves < 0:
        raise ConfigError(f"opening_moves={opening_moves!r} must be an integer >= 0")
    policies = [seated(p, env) for p in policies]
    check_same_env(env, policies)
    horizon = env.spec.max_steps
    turn_based = env.spec.turn_based

    def play(params: Sequence[Any], key: jax.Array) -> dict[str, jax.Array]:
        k_reset, k_run = jax.random.split(key)
        state, ts = jax.vmap(env.reset)(jax.random.split(k_reset, episodes))
        carries = [p.initial_carry((episodes,)) for p in policies]
        first = jnp.argmax(ts.active, axis=-1).astype(jnp.int32)
        zeros = jnp.zeros((episodes, n), jnp.float32)
        acc = {"return": zeros, "illegal": zeros.astype(bool), "length": jnp.zeros(episodes, jnp.int32),
               "finished": jnp.zeros(episodes, bool),
               "final": {k: jnp.zeros(episodes, jnp.float32) for k in ts.info if k.startswith("social/")}}
        reset = jnp.ones(episodes, bool)
        # In a turn-based game only the mover's action is played, so every seat and the
        # random opening act on one key per step: no game's outcome depends on two of their
        # draws. Seats that then make the same call (an equal policy with the same
        # parameters, e.g. random players) make it once: twin[i] is the first such seat.
        # Simultaneous seats draw apart.
        twin = [next((j for j in range(i) if turn_based and policies[j] == policies[i] and params[j] is params[i]),
                     i) for i in range(n)]
        # All keys are split here at once (a split per step costs as much as a random
        # player's draw). Per step: one key for the seats and the opening, then one for
        # the environment; simultaneous games: one per seat, the opening's, the environment's.
        per_step = 2 if turn_based else n + 2

        all_keys = jax.random.split(k_run, (horizon, per_step))

        def body(t, c):
            state, ts, carries, acc, reset = c
            keys = all_keys[t]
            outs: list[tuple[jax.Array, Any]] = []
            for i, (policy, p) in enumerate(zip(policies, params)):
                key = keys[0 if turn_based else i]
                obs = ts.obs if policy.observe is None else policy.observe(state, ts)
                outs.append(outs[twin[i]] if twin[i] < i
                            else policy.act(p, obs, ts.action_mask, key, carries[i], reset))
            action = jnp.stack([a[:, i] for i, (a, _) in enumerate(outs)], axis=1)
            new_carries = [carry for _, carry in outs]
            if opening_moves:
                k_open = keys[0 if turn_based else n]
                random = random_legal_actions(k_open, ts.action_mask, turn_based).astype(action.dtype)
                action = jnp.where(t < opening_moves, random, action)
            state, nts = jax.vmap(env.step)(state, action, jax.random.split(keys[-1], episodes))
            live = ~acc["finished"]
            illegal = nts.info.get("illegal_action", jnp.zeros((episodes, n), bool))
            acc = {
                "return": acc["return"] + jnp.where(live[:, None], nts.reward, 0.0),
                "illegal": acc["illegal"] | (live[:, None] & illegal),
                "length": acc["length"] + live.astype(jnp.int32),
                "finished": acc["finished"] | nts.done,
                "final": {k: jnp.where(live & nts.done, nts.info[k].astype(jnp.float32), v)
                          for k, v in acc["final"].items()},
            }
            return state, nts, new_carries, acc, jnp.zeros_like(reset)

        acc = play_until_done(env, horizon, body, (state, ts, carries, acc, reset), lambda c: c[3]["finished"])[3]
        return {**acc, "first": first}

    return play


def outcomes(returns: jax.Array, seat: int | jax.Array) -> dict[str, jax.Array]:
    """The result of `seat` from episode returns [..., N]; `seat` is an int or [...].
    Returns float32 [...] arrays: its `return`, `win` (above every other seat),
    `loss` (below some other seat), `draw`, and `points` (1, 1/2, 0)."""
    n = returns.shape[-1]
    is_me = jax.nn.one_hot(jnp.broadcast_to(jnp.asarray(seat), returns.shape[:-1]), n, dtype=bool)
    mine = jnp.sum(jnp.where(is_me, returns, 0.0), axis=-1)
    best_other = jnp.max(jnp.where(is_me, -jnp.inf, returns), axis=-1)
    win = (mine > best_other).astype(jnp.float32)
    loss = (mine < best_other).astype(jnp.float32)
    draw = 1.0 - win - loss
    return {"return": mine.astype(jnp.float32), "win": win, "draw": draw, "loss": loss, "points": win + 0.5 * draw}
