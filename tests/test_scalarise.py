"""Scalarising vector rewards (coplay.wrappers.Scalarise): the scalar rewards and
returns of the linear and Chebyshev utilities, worked out by hand on a small
two-objective game, and bad weights refused before anything is compiled."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from coplay.core.compile import jit_once
from coplay.core.env import Env
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.testing import check_env
from coplay.wrappers import Accrued, AutoReset, EpisodeStats, Scalarise


@struct.dataclass
class _Round:
    t: jax.Array


class _Gold(Env):
    """Two agents, three rounds: each picks gold (action 1: reward (1, 0)) or safety
    (action 0: reward (0, 1))."""

    def __init__(self):
        self.spec = EnvSpec(name="gold", num_agents=2, obs_space=Box(0.0, 3.0, (1,)), action_space=Discrete(2),
                            global_state_space=Box(0.0, 3.0, (1,)), max_steps=3, reward_dim=2,
                            reward_names=("gold", "safety"))

    def _ts(self, t, reward):
        return TimeStep(obs=jnp.full((2, 1), t, jnp.float32), reward=reward, done=t >= 3, truncated=t >= 3,
                        active=jnp.ones(2, bool), action_mask=jnp.ones((2, 2), bool),
                        global_state=jnp.full((1,), t, jnp.float32), info={})

    def _reset(self, key):
        t = jnp.zeros((), jnp.int32)
        return _Round(t), self._ts(t, jnp.zeros((2, 2), jnp.float32))

    def _step(self, state, actions, key):
        t = state.t + 1
        gold = (actions == 1).astype(jnp.float32)
        return _Round(t), self._ts(t, jnp.stack([gold, 1.0 - gold], axis=-1))


def _play(env, actions):
    """Scalar rewards [T, N] and the final step's info, playing the rows of `actions` [T, N]."""
    def run(key):
        state, ts = env.reset(key)

        def body(state, a):
            state, ts = env.step(state, a, key)
            return state, ts
        return jax.lax.scan(body, state, jnp.asarray(actions, jnp.int32))[1]
    steps = jit_once(run)(jax.random.PRNGKey(0))
    return np.asarray(steps.reward), jax.tree.map(lambda x: np.asarray(x[-1]), steps.info)


def test_linear_weights_score_every_step_and_keep_the_vector_for_the_episode_statistics():
    env = EpisodeStats(Scalarise(_Gold(), weights=[0.75, 0.25]))
    assert env.spec.reward_dim == 1 and env.spec.reward_shape == (2,)
    rewards, last = _play(env, [[1, 0], [1, 0], [0, 0]])
    np.testing.assert_allclose(rewards, [[0.75, 0.25], [0.75, 0.25], [0.25, 0.25]])
    # each agent's return per objective, by the objective's name
    np.testing.assert_allclose(last["episode/objective/gold"], [2, 0])
    np.testing.assert_allclose(last["episode/objective/safety"], [1, 3])
    np.testing.assert_allclose(last["episode/return"], [1.75, 0.75])


def test_chebyshev_pays_the_change_in_the_utility_of_the_return_so_far():
    # u(v) = -max(0.5 |3 - v_gold|, 0.5 |3 - v_safety|), utopia (3, 3)
    env = EpisodeStats(Scalarise(_Gold(), weights=[0.5, 0.5], method="chebyshev", utopia=[3.0, 3.0]))
    rewards, last = _play(env, [[1, 1], [0, 1], [1, 1]])
    # agent 0: returns (1,0) (1,1) (2,1): u = -1.5, -1.0, -1.0 from u(0) = -1.5
    # agent 1: returns (1,0) (2,0) (3,0): u = -1.5, -1.5, -1.5
    np.testing.assert_allclose(rewards, [[0.0, 0.0], [0.5, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(last["episode/return"], [-1.0 + 1.5, -1.5 + 1.5])   # u(R) - u(0)
    np.testing.assert_allclose(last["episode/objective/gold"], [2, 3])
    np.testing.assert_allclose(last["episode/objective/safety"], [1, 0])


def test_weights_per_agent_and_the_return_restarting_with_each_episode():
    env = AutoReset(Scalarise(_Gold(), weights=[[1.0, 0.0], [0.0, 2.0]], method="chebyshev", utopia=[3.0, 3.0]))
    rewards, _ = _play(env, [[1, 0]] * 6)           # two episodes of three rounds, played alike
    np.testing.assert_allclose(rewards[:3], rewards[3:])
    np.testing.assert_allclose(rewards[:3].sum(0), [3.0, 6.0])   # u goes from -3 to 0 and from -6 to 0


def test_accrued_is_the_episodes_vector_return_before_each_step_and_restarts_with_the_episode():
    env = AutoReset(Accrued(_Gold()))

    def run(key):
        state, _ = env.reset(key)
        return jax.lax.scan(lambda s, a: env.step(s, a, key), state, jnp.asarray([[1, 0]] * 4, jnp.int32))[1]

    steps = jit_once(run)(jax.random.PRNGKey(0))
    accrued = np.asarray(steps.info["accrued"])                 # [T, N, K]
    # agent 0 takes gold (1, 0) each round, agent 1 safety (0, 1); the episode is three rounds
    np.testing.assert_allclose(accrued[:, 0], [[0, 0], [1, 0], [2, 0], [0, 0]])
    np.testing.assert_allclose(accrued[:, 1], [[0, 0], [0, 1], [0, 2], [0, 0]])
    np.testing.assert_array_equal(np.asarray(steps.reward)[:, 0], [[1, 0]] * 4)   # the vector reward untouched


def test_the_wrapped_game_keeps_the_environment_contract():
    check_env(Scalarise(_Gold(), weights=[0.5, 0.5], method="chebyshev", utopia=[3.0, 3.0]), retrace=False)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"weights": [1.0, 0.0, 0.0]}, ConfigError, "must be 2 finite numbers (one per objective: gold, safety)"),
    ({"weights": [0.5, -0.5]}, ConfigError, "non-negative with a positive sum, got [0.5, -0.5]"),
    ({"weights": [0.0, 0.0]}, ConfigError, "non-negative with a positive sum"),
    ({"weights": [0.5, 0.5], "method": "pareto"}, UnknownNameError, "chebyshev"),
    ({"weights": [0.5, 0.5], "method": "chebyshev"}, ConfigError, "needs a utopia point"),
    ({"weights": [0.5, 0.5], "method": "chebyshev", "utopia": [1.0]}, ConfigError, "utopia must be 2 finite numbers"),
    ({"weights": [0.5, 0.5], "utopia": [1.0, 1.0]}, ConfigError, "used by method='chebyshev' only"),
])
def test_bad_weights_methods_and_utopias_are_refused_by_name(kwargs, error, words):
    with pytest.raises(error) as e:
        Scalarise(_Gold(), **kwargs)
    assert words in str(e.value)


def test_a_scalar_reward_environment_is_refused():
    import coplay

    with pytest.raises(ConfigError, match="needs vector rewards.*'matrix' has a scalar reward"):
        Scalarise(coplay.make("matrix"), weights=[1.0])


def test_a_single_objective_algorithm_refuses_vector_rewards_and_names_the_scalariser():
    from coplay.algos import get_algo
    from coplay.algos.base import check_env_support

    with pytest.raises(ConfigError, match=r"'mappo' cannot train on environment 'gold': it has 2 objectives and it "
                                          r"needs a scalar reward \(scalarise it: scalarise=linear preference=0.5:0.5, "
                                          r"or scalarise=chebyshev with utopia=...; in Python, "
                                          r"coplay.wrappers.Scalarise\)"):
        check_env_support(_Gold().spec, "mappo", get_algo("mappo").capabilities)
    scalarised = Scalarise(_Gold(), weights=[0.5, 0.5]).spec
    check_env_support(scalarised, "mappo", get_algo("mappo").capabilities)   # accepted once scalarised


def test_a_run_scalarises_from_the_command_line_for_any_algorithm():
    from coplay.experiment.config import parse_overrides
    from coplay.experiment.compiled import plan

    p = plan(parse_overrides(["algo=ippo", "env=treasure", "scalarise=chebyshev", "preference=0.75:0.25",
                              "utopia=15:-2"]))
    assert isinstance(p.env, Scalarise) and p.env.method == "chebyshev" and p.trainer.spec.reward_dim == 1
    np.testing.assert_allclose(p.env.weights, [[0.75, 0.25], [0.75, 0.25]])
    np.testing.assert_allclose(p.env.utopia, [15, -2])
    _, ts = p.env.reset(jax.random.PRNGKey(0))      # the objectives stay in info, one entry each
    assert ts.reward.shape == (2,) and {"objective/treasure", "objective/time"} <= set(ts.info)


@pytest.mark.parametrize("overrides, words", [
    (["preference=0.5:0.5"], "preference and utopia are read only when scalarising: add scalarise=linear"),
    (["scalarise=linear"], "scalarise=linear needs the weights of the objectives: preference=0.7:0.3"),
    (["scalarise=linear", "preference=0.5:0.25:0.25"], "scalarise=linear preference=0.5:0.25:0.25: weights for "
                                                       "'treasure' must be 2 finite numbers (one per objective: "
                                                       "treasure, time)"),
    (["scalarise=linear", "preference=-1:2"], "preference=-1:2: weights must be non-negative with a positive sum"),
    (["scalarise=chebyshev", "preference=0.5:0.5", "utopia=-100:-100"],
     "utopia [-100.0, -100.0] is not a utopia point of 'treasure': its true front reaches [15.0, -2.0] in "
     "(treasure, time)"),
    (["scalarise=linear", "preference=gold"], "'gold' is not a list of numbers"),
    (["scalarise=chebyshev", "preference=0.5:0.5"], "needs a utopia point"),
    (["scalarise=pareto"], "valid choices: linear, chebyshev"),
])
def test_bad_scalarisations_from_the_command_line_are_refused_before_anything_compiles(overrides, words):
    from coplay.experiment.config import parse_overrides
    from coplay.experiment.compiled import plan

    with pytest.raises(ConfigError) as e:
        plan(parse_overrides(["algo=ippo", "env=treasure", *overrides]))
    assert words in str(e.value)


def test_a_utopia_point_below_what_the_environment_reaches_is_refused_as_a_bad_reference_point_is():
    from coplay import make

    # beach computes no true front; its reference point (0, 0) bounds every return from below
    with pytest.raises(ConfigError, match=r"utopia \[-100.0, -100.0\] is not a utopia point of 'beach': it is not "
                                          r"above the environment's reference point \[0.0, 0.0\] \(every episode "
                                          r"return is at least that\) in capacity, mixture"):
        Scalarise(make("beach"), weights=[0.5, 0.5], method="chebyshev", utopia=[-100.0, -100.0])
    with pytest.raises(ConfigError, match=r"not a utopia point of 'treasure': its true front reaches \[15.0, -2.0\]"):
        Scalarise(make("treasure"), weights=[0.5, 0.5], method="chebyshev", utopia=[14.0, 0.0])
    Scalarise(make("treasure"), weights=[0.5, 0.5], method="chebyshev", utopia=[15.0, -2.0])   # the best: fine


def test_a_preference_that_does_not_sum_to_one_is_normalised_saying_so_and_resumes_as_given(capsys):
    from coplay.experiment.compiled import plan
    from coplay.experiment.config import Experiment, parse_overrides, resume_differences

    args = ["algo=ippo", "env=treasure", "scalarise=linear", "preference=0.7:0.7"]
    exp = parse_overrides(args)
    assert exp.run.preference == "0.5:0.5"      # what config.yaml keeps, and what the run trains on
    assert "note: preference=0.7:0.7 sums to 1.4, not 1; normalised to preference=0.5:0.5" in capsys.readouterr().err
    np.testing.assert_allclose(plan(exp).env.weights, [[0.5, 0.5], [0.5, 0.5]])
    assert parse_overrides(["algo=ippo", "env=treasure", "scalarise=linear", "preference=1:3"]).run.preference \
        == "0.25:0.75"
    # resuming with the same command line: the same config, said once
    stored = Experiment.from_dict(exp.to_dict())
    capsys.readouterr()
    assert resume_differences(stored, parse_overrides(args, base=stored)) == []
    assert capsys.readouterr().err == ""
    # a stored config written before preferences were normalised is kept as written: it resumes exactly
    legacy = Experiment.from_dict({**exp.to_dict(), "preference": "0.7:0.7"})
    assert parse_overrides([], base=legacy).run.preference == "0.7:0.7"
    assert parse_overrides(args, base=legacy).run.preference == "0.7:0.7"
