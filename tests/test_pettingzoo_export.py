"""coplay environments under PettingZoo's APIs, checked by PettingZoo's own test functions."""

import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.core.registry import ENVS
from coplay.wrappers import Scalarise

pettingzoo = pytest.importorskip("pettingzoo")
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test  # noqa: E402

from coplay.interop.pettingzoo import to_pettingzoo  # noqa: E402

EXPORTED = ENVS.names() + ["tree:kuhn_poker", "tree:leduc_holdem", "pgx:othello", "text:kuhn_poker"]


@pytest.mark.parametrize("name", EXPORTED)
def test_pettingzoo_api_tests_pass(name):
    env = coplay.make(name)
    parallel_api_test(to_pettingzoo(env, api="parallel"), num_cycles=200)
    parallel_seed_test(lambda: to_pettingzoo(env, api="parallel"), num_cycles=50)
    # PettingZoo's AEC test compares rewards with `==`, which a vector reward cannot answer; the
    # AEC machinery is checked on the environment's scalarised export instead (its vector
    # rewards through AEC: test_pettingzoo_import's round trip)
    aec = env if env.spec.reward_dim == 1 else Scalarise(env, weights=np.full(env.spec.reward_dim, 0.5))
    api_test(to_pettingzoo(aec, api="aec"), num_cycles=200)
    seed_test(lambda: to_pettingzoo(env, api="aec"), num_cycles=50)


def test_a_tic_tac_toe_game_through_the_aec_api():
    pz = to_pettingzoo(coplay.make("tic_tac_toe"))
    assert isinstance(pz, pettingzoo.AECEnv) and pz.possible_agents == ["player_0", "player_1"]
    pz.reset(seed=3)
    first = pz.agent_selection
    second = [a for a in pz.possible_agents if a != first][0]
    # The first mover takes the top row while the other plays the middle row.
    for cell in (0, 3, 1, 4, 2):
        obs, reward, terminated, truncated, info = pz.last()
        assert obs["action_mask"][cell] == 1 and not terminated
        pz.step(cell)
    results = {}
    for agent in pz.agent_iter():
        obs, reward, terminated, truncated, info = pz.last()
        assert terminated and not truncated
        results[agent] = reward
        pz.step(None)
    assert results == {first: 1.0, second: -1.0} and pz.agents == []


def test_an_illegal_move_forfeits_and_is_reported():
    pz = to_pettingzoo(coplay.make("tic_tac_toe"))
    pz.reset(seed=0)
    pz.step(4)
    offender = pz.agent_selection
    pz.step(4)                                    # the centre is taken
    assert all(pz.terminations.values())
    assert pz.infos[offender]["illegal_action"] and pz._cumulative_rewards[offender] == -1.0


def test_parallel_api_plays_spread_like_coplay():
    env = coplay.make("spread")
    pz = to_pettingzoo(env)
    assert isinstance(pz, pettingzoo.ParallelEnv) and pz.possible_agents == ["agent_0", "agent_1", "agent_2"]
    obs, infos = pz.reset(seed=7)
    assert obs["agent_0"].shape == env.spec.obs_space.shape and obs["agent_0"].dtype == np.float32
    steps, total = 0, 0.0
    while pz.agents:
        obs, rewards, terms, truncs, infos = pz.step({a: 0 for a in pz.agents})
        steps += 1
        total += sum(rewards.values())
    assert steps == env.spec.max_steps and all(truncs.values()) and not any(terms.values())
    assert pz.state().shape == env.spec.global_state_space.shape and np.isfinite(total)


def test_bad_use_is_refused_with_the_valid_choices():
    env = coplay.make("spread")
    with pytest.raises(ConfigError, match="auto, parallel, aec"):
        to_pettingzoo(env, api="gym")
    with pytest.raises(ConfigError, match="ansi, human, rgb_array"):
        to_pettingzoo(env, render_mode="video")
    pz = to_pettingzoo(env)
    with pytest.raises(ConfigError, match="call reset"):
        pz.step({"agent_0": 0})
    pz.reset(seed=0)
    with pytest.raises(ConfigError, match="agents now: agent_0, agent_1, agent_2"):
        pz.step({"agent_9": 0})
    aec = to_pettingzoo(coplay.make("tic_tac_toe"), render_mode="ansi")
    aec.reset(seed=0)
    assert "to move" in aec.render()
