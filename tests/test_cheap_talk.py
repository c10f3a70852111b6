"""Cheap talk (`coplay.wrappers.cheap_talk`, `coplay.eval.cheap_talk`): the message reaches
the victims' observations and nothing else, and one generation of evolution strategies
trains victims from scratch hearing each member of the population."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.wrappers.cheap_talk import CheapTalk, linear_speaker, linear_speaker_params

SMALL = {"num_envs": 4, "rollout_len": 16}


def test_the_message_reaches_the_victims_observations_only():
    env = coplay.make("spread")
    params = {"w": jnp.ones((int(np.prod(env.spec.global_state_space.shape)), 2)) * 0.1, "b": jnp.asarray([0.3, -0.2])}
    talk = CheapTalk(env, linear_speaker, params, victims=[1], message_dim=2)
    assert talk.spec.obs_space.shape == (env.spec.obs_space.shape[0] + 2,)
    key = jax.random.PRNGKey(0)
    s0, base = env.reset(key)
    s1, heard = talk.reset(key)
    np.testing.assert_array_equal(heard.obs[:, :-2], base.obs)                 # the agents' own view unchanged
    expected = np.tanh(np.asarray(base.global_state).reshape(-1) @ np.asarray(params["w"]) + np.asarray(params["b"]))
    np.testing.assert_allclose(heard.obs[1, -2:], expected, rtol=1e-5)
    assert not np.asarray(heard.obs[[0, 2], -2:]).any()
    actions = jnp.asarray([1, 2, 3])
    _, a = env.step(s0, actions, key)
    _, b = talk.step(s1, actions, key)
    np.testing.assert_array_equal(a.reward, b.reward)                          # rewards and dynamics the same
    np.testing.assert_array_equal(b.obs[:, :-2], a.obs)
    with pytest.raises(ConfigError, match="victims"):
        CheapTalk(env, linear_speaker, params, victims=[3], message_dim=2)
    with pytest.raises(ConfigError, match="flat observations"):
        grid = coplay.make("commons_harvest")
        CheapTalk(grid, linear_speaker, linear_speaker_params(grid, 2), victims=[0], message_dim=2)


def test_victims_hear_the_speaker_and_a_generation_trains_them_for_each_member():
    pytest.importorskip("evosax")
    from coplay.eval.cheap_talk import random_speaker, score_speaker, train_cheap_talk

    silent, per_seed = score_speaker("spread", None, overrides=SMALL, seeds=2, victim_updates=3, tail=2)
    zero = linear_speaker_params(coplay.make("spread"), 2)
    again, per_seed_zero = score_speaker("spread", zero, overrides=SMALL, seeds=2, victim_updates=3, tail=2)
    np.testing.assert_array_equal(per_seed, per_seed_zero)                      # None is the silent speaker
    _, loud = score_speaker("spread", random_speaker("spread", scale=3.0), overrides=SMALL, seeds=2,
                            victim_updates=3, tail=2)
    assert not np.allclose(loud, per_seed)                                      # what they hear changes them
    result = train_cheap_talk("spread", mode="cooperative", overrides=SMALL, population=4, generations=2,
                              victim_seeds=2, victim_updates=3, tail=2)
    assert len(result.fitness) == 2 and np.isfinite(result.fitness).all() and result.victims_per_second > 0
    assert set(result.params) == {"w", "b"} and result.params["w"].shape == zero["w"].shape
    with pytest.raises(ConfigError, match="mode='hostile'"):
        train_cheap_talk("spread", mode="hostile")
    with pytest.raises(ConfigError, match="population=3"):
        train_cheap_talk("spread", population=3)
    with pytest.raises(ConfigError, match="compiled"):
        train_cheap_talk("text:kuhn_poker", algo="lm_grpo")
