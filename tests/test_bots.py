"""Scripted players: random and perfect tic-tac-toe play, through the Policy interface."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.algos.common.bots import random_policy, tic_tac_toe_minimax, tic_tac_toe_optimal_moves
from coplay.core.compile import jit_once

pytest.importorskip("pgx")


def play(env, policies, num_games: int, seed: int = 0) -> np.ndarray:
    """Final rewards [G, 2] of `num_games` games; agent i is played by policies[i]."""

    def one(key):
        k_reset, k_play = jax.random.split(key)
        state, ts = env.reset(k_reset)

        def body(carry, k):
            state, ts, total = carry
            keys = jax.random.split(k, 3)
            actions = jnp.stack([
                p.act(None, ts.obs[None], ts.action_mask[None], keys[i], p.initial_carry((1,)), ts.done[None])[0][0, i]
                for i, p in enumerate(policies)])
            state, ts2 = env.step(state, actions, keys[2])
            return (state, ts2, total + jnp.where(ts.done, 0.0, ts2.reward)), None

        (_, _, total), _ = jax.lax.scan(body, (state, ts, jnp.zeros(2)), jax.random.split(k_play, env.spec.max_steps))
        return total

    return np.asarray(jit_once(jax.vmap(one))(jax.random.split(jax.random.PRNGKey(seed), num_games)))


def test_optimal_move_table_knows_basic_tactics():
    table = tic_tac_toe_optimal_moves()
    code = lambda cells: sum(c * 3**i for i, c in enumerate(cells))  # noqa: E731
    # The mover holds 0 and 1: completing the row at 2 is the only winning move.
    assert np.flatnonzero(table[code([1, 1, 0, 2, 2, 0, 0, 0, 0])]).tolist() == [2]
    # The opponent threatens 3-4-5 and the mover cannot win at once: block at 5.
    assert np.flatnonzero(table[code([1, 0, 0, 2, 2, 0, 0, 0, 1])]).tolist() == [5]
    # Every first move draws with perfect play.
    assert table[0].all()


def test_minimax_never_loses_and_draws_itself():
    env = coplay.make("tic_tac_toe")
    perfect, rand = tic_tac_toe_minimax(env), random_policy(env)
    both = play(env, [perfect, perfect], 256)
    assert np.all(both == 0.0)
    for seat in (0, 1):
        seats = [rand, rand]
        seats[seat] = perfect
        r = play(env, seats, 512, seed=seat + 1)
        assert r[:, seat].min() >= 0.0  # never loses
        assert (r[:, seat] > 0).mean() > 0.7  # and beats random most of the time
    # Random against random loses a fair share of games, so the checks above can fail.
    r = play(env, [rand, rand], 512, seed=7)
    assert (r[:, 0] < 0).mean() > 0.2
