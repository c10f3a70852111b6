"""Social preferences as reward transformations: each formula on hand-computed cases,
through a scripted environment whose rewards are the actions it is given."""

import math

import jax
import jax.numpy as jnp
import pytest

import coplay
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.wrappers.social import ActionCost, InequityAversion, RewardExchange, SocialValueOrientation


class Paid(Env):
    """Each agent's reward is its action (0..9); `info["zapping"]` is whether it is 9; teams (0, 0, 1)."""

    def __init__(self, n=3):
        self.spec = EnvSpec(name="paid", num_agents=n, obs_space=Box(0.0, 1.0, (1,)), action_space=Discrete(10),
                            global_state_space=Box(0.0, 1.0, (1,)), max_steps=10, teams=(0, 0, 1)[:n])

    def _ts(self, reward, actions):
        n = self.spec.num_agents
        return TimeStep(obs=jnp.zeros((n, 1)), reward=reward, done=jnp.zeros((), bool), truncated=jnp.zeros((), bool),
                        active=jnp.ones(n, bool), action_mask=jnp.ones((n, 10), bool), global_state=jnp.zeros(1),
                        info={"zapping": actions == 9})

    def _reset(self, key):
        n = self.spec.num_agents
        return jnp.zeros(()), self._ts(jnp.zeros(n), jnp.zeros(n, jnp.int32))

    def _step(self, state, actions, key):
        return state, self._ts(actions.astype(jnp.float32), actions)


def _shaped(env, *action_rows):
    """The utility u = r + shaping of each step, for the actions given step by step."""
    state, ts = env.reset(jax.random.key(0))
    out = []
    for row in action_rows:
        state, ts = env.step(state, jnp.asarray(row, jnp.int32), jax.random.key(1))
        (key,) = [k for k in ts.info if k.startswith("shaping/")]
        out.append([float(x) for x in ts.reward + ts.info[key]])
    return out


def test_inequity_aversion_prices_the_smoothed_gaps_to_the_others():
    env = InequityAversion(Paid(), alpha=2.0, beta=0.5, smoothing=0.5)
    first, second = _shaped(env, [4, 2, 0], [0, 2, 0])
    # step 1: e = (4, 2, 0); agent 0 is ahead by 2 and 4; agent 1 behind by 2, ahead by 2; agent 2 behind by 4, 2
    assert first == pytest.approx([4 - 0.5 * 6 / 2, 2 - 2.0 * 2 / 2 - 0.5 * 2 / 2, 0 - 2.0 * 6 / 2])
    # step 2: e = (2, 3, 0): agent 0 behind agent 1 by 1 and ahead of agent 2 by 2
    assert second == pytest.approx([0 - 2.0 * 1 / 2 - 0.5 * 2 / 2, 2 - 0.5 * (1 + 3) / 2, 0 - 2.0 * (2 + 3) / 2])


def test_social_value_orientation_prices_the_distance_to_the_preferred_reward_angle():
    env = SocialValueOrientation(Paid(2), angle=45.0, weight=1.0, smoothing=0.0)
    (step,) = _shaped(env, [3, 0])
    # agent 0: theta = atan2(0, 3) = 0, 45 degrees off; agent 1: atan2(3, 0) = 90 degrees, 45 off
    assert step == pytest.approx([3 - math.pi / 4, 0 - math.pi / 4])
    (none,) = _shaped(env, [0, 0])
    assert none == [0.0, 0.0]                                                # nothing yet: no preference expressed


@pytest.mark.parametrize("within, expected", [("all", [0.5 * 4 + 0.5 * 1, 0.5 * 2 + 0.5 * 2, 0.5 * 0 + 0.5 * 3]),
                                              ("teams", [0.5 * 4 + 0.5 * 2, 0.5 * 2 + 0.5 * 4, 0.0])])
def test_reward_exchange_shares_with_every_agent_or_the_team(within, expected):
    env = RewardExchange(Paid(), share=0.5, within=within)
    (step,) = _shaped(env, [4, 2, 0])
    assert step == pytest.approx(expected)


def test_an_action_cost_is_paid_by_the_agent_that_takes_the_action():
    (step,) = _shaped(ActionCost(Paid(), key="zapping", cost=3.0), [9, 2, 0])
    assert step == pytest.approx([9 - 3.0, 2, 0])


def test_returns_stay_the_environment_s_and_bad_settings_are_refused():
    env = InequityAversion(coplay.make("clean_up", n_agents=2, max_steps=4))
    state, ts = env.reset(jax.random.key(0))
    state, ts = env.step(state, jnp.zeros(2, jnp.int32), jax.random.key(1))
    assert "shaping/inequity_aversion" in ts.info and ts.reward.shape == (2,)
    with pytest.raises(ConfigError, match="key='zaps' has shape"):
        ActionCost(coplay.make("clean_up", n_agents=2), key="zaps")
    with pytest.raises(ConfigError, match="valid choices: all, teams"):
        RewardExchange(Paid(), within="team")
    with pytest.raises(ConfigError, match="has 2 objectives"):
        InequityAversion(coplay.make("treasure"))


def test_a_run_trains_on_the_preference_its_social_field_names():
    from coplay.experiment.compiled import plan
    from coplay.experiment.config import parse_overrides

    base = ["algo=ippo", "env=coins", "env.max_steps=20", "algo.num_envs=2", "algo.rollout_len=4", "seeds=1",
            "total_steps=8"]
    p = plan(parse_overrides(base + ["social=inequity_aversion:alpha=2:beta=0.5",
                                     "algo.shaped_reward=shaping/inequity_aversion"]))
    wrapped = p.env
    while not isinstance(wrapped, InequityAversion):
        wrapped = wrapped.env
    assert (wrapped.alpha, wrapped.beta, wrapped.smoothing) == (2.0, 0.5, 0.95)
    with pytest.raises(ConfigError, match=r"train on it with algo.shaped_reward=shaping/reward_exchange \(now ''\)"):
        plan(parse_overrides(base + ["social=reward_exchange"]))
    with pytest.raises(ConfigError, match="unknown preference 'kindness'; valid: inequity_aversion, "
                                          "social_value_orientation, reward_exchange, action_cost"):
        parse_overrides(base + ["social=kindness"])
    with pytest.raises(ConfigError, match="'gamma=1' is not field=value of inequity_aversion; its fields: alpha, "
                                          "beta, smoothing"):
        parse_overrides(base + ["social=inequity_aversion:gamma=1"])
    with pytest.raises(ConfigError, match=r"social=reward_exchange:share=2: share=2.0 is out of range"):
        plan(parse_overrides(base + ["social=reward_exchange:share=2", "algo.shaped_reward=shaping/reward_exchange"]))
