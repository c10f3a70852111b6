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
