"""coplay's own environments beside the libraries' versions of them, at matched settings:
the same distribution of a uniformly random policy's returns (a two-sample
Kolmogorov-Smirnov test), and the test's power shown on a setting that differs."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import coplay
from coplay.testing import random_actions

warnings.filterwarnings("ignore", category=DeprecationWarning)

EPISODES = 2000


def random_returns(env, key, episodes: int = EPISODES) -> np.ndarray:
    """Each episode's return (summed over its steps, mean over agents) under uniformly random
    legal actions, from its first step to its end."""
    def one(k):
        k0, k1 = jax.random.split(k)
        state, ts = env.reset(k0)

        def body(c, k):
            state, ts, total, over = c
            ka, ks = jax.random.split(k)
            state, ts = env.step(state, random_actions(env, ts, ka), ks)
            total = total + jnp.where(over, 0.0, ts.reward.mean())
            return (state, ts, total, over | ts.done), None

        (_, _, total, over), _ = jax.lax.scan(body, (state, ts, 0.0, jnp.zeros((), bool)),
                                              jax.random.split(k1, env.spec.max_steps))
        return total, over

    total, over = jax.jit(jax.vmap(one))(jax.random.split(key, episodes))
    assert bool(np.all(over)), "an episode did not end within max_steps"
    return np.asarray(total)


def test_spread_returns_are_distributed_as_jaxmarls_simple_spread():
    pytest.importorskip("jaxmarl")
    ours = random_returns(coplay.make("spread"), jax.random.PRNGKey(0))
    # JaxMARL's MPE plays max_steps + 1 steps: 24 matches spread's 25
    theirs = random_returns(coplay.make("jaxmarl:MPE_simple_spread_v3", max_steps=24), jax.random.PRNGKey(1))
    assert stats.ks_2samp(ours, theirs).pvalue > 0.01
    # the test tells a setting apart that differs by two steps in 25
    longer = random_returns(coplay.make("jaxmarl:MPE_simple_spread_v3", max_steps=26), jax.random.PRNGKey(2))
    assert stats.ks_2samp(ours, longer).pvalue < 1e-3


def test_foraging_steps_as_jumanjis_level_based_foraging_from_the_same_start():
    """The two differ by design in how an episode starts (docs/benchmark-environments.md);
    from the same start, the same actions give the same rewards, masks and ends, step for
    step: Jumanji's generator is handed coplay's start states."""
    pytest.importorskip("jumanji")
    from jumanji.environments.routing.lbf.types import Agent, Food, State

    n, f, steps, width = 3, 3, 30, 64
    ours = coplay.make("foraging", grid_size=7, n_agents=n, n_food=f, max_agent_level=3, max_steps=steps)
    theirs = coplay.make("jumanji:LevelBasedForaging", grid_size=7, num_agents=n, num_food=f, max_agent_level=3,
                         force_coop=False, time_limit=steps)

    def start(key):            # coplay's start state, as Jumanji's state
        s = ours.reset(key)[0]
        agents = jax.vmap(Agent)(id=jnp.arange(n), position=s.agent_pos, level=s.agent_level,
                                 loading=jnp.zeros(n, bool))
        food = jax.vmap(Food)(id=jnp.arange(f), position=s.food_pos, level=s.food_level, eaten=jnp.zeros(f, bool))
        return State(key=key, step_count=jnp.zeros((), jnp.int32), agents=agents, food_items=food)

    theirs.lib._generator = start

    def play(key):
        k0, k1 = jax.random.split(key)
        a, ta = ours.reset(k0)
        b, tb = theirs.reset(k0)

        def body(c, k):
            a, ta, b, tb = c
            acts = random_actions(ours, ta, k)
            a, ta = ours.step(a, acts, k)
            b, tb = theirs.step(b, acts, k)
            return (a, ta, b, tb), (ta.reward, tb.reward, ta.action_mask, tb.action_mask, ta.done, tb.done)

        first = (ta.action_mask, tb.action_mask)
        return first, jax.lax.scan(body, (a, ta, b, tb), jax.random.split(k1, steps))[1]

    (m0a, m0b), (ra, rb, ma, mb, da, db) = jax.jit(jax.vmap(play))(jax.random.split(jax.random.PRNGKey(3), width))
    np.testing.assert_array_equal(m0a, m0b)
    np.testing.assert_array_equal(ma, mb)
    np.testing.assert_array_equal(da, db)
    np.testing.assert_allclose(ra, rb, atol=1e-6)
    assert float(np.asarray(ra).sum()) > 0 and np.asarray(da)[:, -1].all()   # food was eaten; episodes ended
