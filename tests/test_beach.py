"""The beach problem domain (`env=beach`): MOMAland's `mobeach_v0` replayed step for
step from recorded episodes (tests/data/beach_momaland.json, individual and team
rewards, two and three types), its rewards by hand, and bad settings refused."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.envs.mixed.beach import Beach

CASES = json.loads((Path(__file__).parent / "data" / "beach_momaland.json").read_text())["cases"]


IDS = [f"{c['kwargs']['reward_mode']}-{c['kwargs']['num_agents']}" for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_episodes_recorded_from_momaland_replay_exactly(case):
    env = Beach(**case["kwargs"])
    state, ts = env.reset_to(case["types"], case["sections"])
    np.testing.assert_allclose(ts.obs, case["first_obs"], rtol=1e-6)
    step = jax.jit(env.step)
    for i, recorded in enumerate(case["steps"]):
        state, ts = step(state, jnp.asarray(recorded["actions"]), jax.random.PRNGKey(i))
        np.testing.assert_allclose(ts.obs, recorded["obs"], rtol=1e-6)
        np.testing.assert_allclose(ts.reward, recorded["reward"], rtol=1e-6)
        assert bool(ts.done) == recorded["done"]
    assert bool(ts.done) and not bool(ts.truncated)


def test_rewards_by_hand_and_the_ends_of_the_beach_hold_the_agents():
    env = Beach(num_agents=4, sections=3, capacity=2, num_timesteps=1)
    state, _ = env.reset_to([0, 1, 1, 0], [0, 0, 2, 1])
    # agent 0 moves left at the left end (stays), 1 stays, 2 moves right at the right end (stays), 3 moves right
    _, ts = env.step(state, jnp.array([0, 1, 2, 2]), jax.random.PRNGKey(0))
    np.testing.assert_array_equal(ts.obs[:, 1], [0, 0, 2, 2])
    pair = 2 * np.exp(-1.0)                                            # two agents in a section of capacity 2
    np.testing.assert_allclose(ts.reward, [[pair, 0.5], [pair, 0.5], [pair, 0.5], [pair, 0.5]], rtol=1e-6)
    team = Beach(num_agents=4, sections=3, capacity=2, reward_mode="team")
    state, _ = team.reset_to([0, 1, 1, 0], [0, 0, 0, 1])
    _, ts = team.step(state, jnp.array([1, 1, 1, 1]), jax.random.PRNGKey(0))
    whole = [3 * np.exp(-1.5) + 1 * np.exp(-0.5), (1 / 3 + 0 + 0) / 3]    # three in section 0, one in 1, none in 2
    np.testing.assert_allclose(ts.reward, [whole] * 4, rtol=1e-6)


def test_the_environment_keeps_the_contract_and_registers_its_reference_point():
    env = coplay.make("beach", num_agents=10, num_timesteps=3)
    assert env.spec.reward_names == ("capacity", "mixture") and list(env.reference_point) == [0, 0]
    state, ts = env.reset(jax.random.PRNGKey(0))
    assert ts.obs.shape == (10, 5) and ts.global_state.shape == (50,)


@pytest.mark.parametrize("kwargs, words", [
    ({"num_agents": 0}, "num_agents=0"),
    ({"sections": 1.5}, "sections=1.5"),
    ({"reward_mode": "shared"}, "individual, team"),
    ({"type_distribution": (0.5, -0.5)}, "type_distribution=[0.5, -0.5]"),
    ({"position_distribution": (1, 1)}, "must be 6 non-negative numbers"),
])
def test_bad_settings_are_refused_by_name(kwargs, words):
    with pytest.raises(ConfigError) as e:
        Beach(**kwargs)
    assert words in str(e.value)
