"""Kuhn poker and Leduc hold'em from coplay's exact trees, played as environments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.policy import Policy
from coplay.algos.common.matches import make_match, no_carry
from coplay.core.compile import jit_once
from coplay.core.errors import UnknownNameError
from coplay.envs.trees import TreeArrays
from coplay.envs.trees.values import expected_value


def _table_policy(env, table):
    """A policy that plays `table` [I, A] by looking up each seat's information set."""
    obs, _, owner = env.infoset_views()
    # The view index of every information set's owner row -> the set's row in the table.
    view_of = np.asarray(jnp.argmax(obs[jnp.arange(owner.shape[0]), owner], axis=-1))
    lookup = np.full(env.num_views, 0, np.int32)
    lookup[view_of] = np.arange(owner.shape[0])
    lookup, table = jnp.asarray(lookup), jnp.asarray(table)

    def act(params, o, mask, key, carry, reset):
        rows = table[lookup[jnp.argmax(o, axis=-1)]]          # [B, N, A]
        logits = jnp.where(mask, jnp.log(rows + 1e-12), -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32), carry

    return Policy(act=act, initial_carry=no_carry, env=env)


@pytest.mark.parametrize("name", ["kuhn_poker", "leduc_holdem"])
def test_play_agrees_with_the_exact_tree(name):
    """Games played through the environment by a random behaviour table earn what the
    tree computes for that table: the dynamics, chance and views match the solvers' game."""
    env = coplay.make(f"tree:{name}")
    t = TreeArrays.from_tree(env.tree)
    legal = np.asarray(env.tree.legal, np.float64)
    rng = np.random.default_rng(0)
    table = rng.dirichlet(np.ones(env.tree.num_actions), size=env.tree.num_infosets) * legal
    table = (table / table.sum(axis=1, keepdims=True)).astype(np.float32)
    exact = float(expected_value(t, jnp.asarray(table)))
    policy = _table_policy(env, table)
    out = jit_once(make_match(env, [policy, policy], 40000))([None, None], jax.random.PRNGKey(1))
    returns = np.asarray(out["return"])
    assert out["finished"].all() and not out["illegal"].any()
    assert np.allclose(returns.sum(axis=1), 0.0)
    mean, se = returns[:, 0].mean(), returns[:, 0].std() / np.sqrt(returns.shape[0])
    print(f"{name}: simulated {mean:.4f} +- {se:.4f}, exact {exact:.4f}")
    assert abs(mean - exact) < 4 * se
    assert (out["first"] == 0).all()                    # seat 0 is the tree's player 0


def test_observations_identify_information_sets():
    env = coplay.make("tree:kuhn_poker")
    obs, mask, owner = env.infoset_views()
    rows = obs[jnp.arange(12), owner]
    assert obs.shape == (12, 2, env.num_views) and int(rows.sum()) == 12
    assert len({int(i) for i in jnp.argmax(rows, axis=-1)}) == 12   # twelve distinct views
    assert jnp.all(obs[jnp.arange(12), 1 - owner] == 0) and mask.all()
    # First to act and second to act after a pass hold the same card and chips, yet differ here.
    i0, i1 = env.tree.infoset_index("0"), env.tree.infoset_index("0p")
    assert int(jnp.argmax(rows[i0])) != int(jnp.argmax(rows[i1]))


def test_illegal_action_forfeits_without_playing_the_move():
    env = coplay.make("tree:leduc_holdem")
    state, ts = env.reset(jax.random.PRNGKey(0))
    assert ts.active.tolist() == [True, False] and not bool(ts.action_mask[0, 0])   # fold: not facing a raise
    after, ts2 = env.step(state, jnp.array([0, 1], jnp.int32), jax.random.PRNGKey(1))
    assert bool(ts2.done) and not bool(ts2.truncated) and ts2.info["illegal_action"].tolist() == [True, False]
    assert env.stake == 13.0 and ts2.reward.tolist() == [-13.0, 13.0]
    assert int(after.node) == int(state.node)            # the move was not played
    assert "player_0 forfeited" in env.render_text(after)
    # An action outside 0..A-1 is illegal too; the legal move plays on.
    _, ts3 = env.step(state, jnp.array([7, 0], jnp.int32), jax.random.PRNGKey(1))
    assert ts3.info["illegal_action"].tolist() == [True, False]
    _, ts4 = env.step(state, jnp.array([2, 0], jnp.int32), jax.random.PRNGKey(1))
    assert not bool(ts4.done) and ts4.active.tolist() == [False, True]
    assert bool(ts4.action_mask[1, 0])                   # now facing a raise, folding is legal


def test_text_and_unknown_game():
    env = coplay.make("tree:kuhn_poker")
    state, _ = env.reset(jax.random.PRNGKey(0))
    text = env.render_text(state)
    assert "player_0 to move; legal: pass, bet" in text and "player_1 knows" in text
    assert env.render_text(state, viewer=1).startswith("kuhn_poker, player_1 knows")
    with pytest.raises(UnknownNameError, match="kuhn_poker"):
        coplay.make("tree:chess")
