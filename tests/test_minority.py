"""The minority attack (`coplay.wrappers.minority`, the run field `minority=`): one seat of
a trained team taken over by a learner rewarded for lowering the others' return."""

from __future__ import annotations

import csv
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy, no_carry
from coplay.wrappers.minority import Minority


def _constant(env, action: int) -> Policy:
    def act(params, obs, mask, key, carry, reset):
        return jnp.full(obs.shape[:2], action, jnp.int32), carry
    return Policy(act=act, initial_carry=no_carry, env=env)


def test_the_adversary_plays_its_seat_and_earns_what_the_victims_lose():
    # The penalty game (k = -100): the victim in seat 0 always plays 0; the adversary has seat 1.
    env = coplay.make("matrix", game="penalty", rounds=3)
    attacked = Minority(env, _constant(env, 0), None, seat=1)
    assert attacked.spec.num_agents == 1 and attacked.spec.obs_space == env.spec.obs_space
    state, ts = attacked.reset(jax.random.PRNGKey(0))
    payoff = {0: -100.0, 1: 0.0, 2: 10.0}          # the victim's payoff when the adversary plays a
    for step, a in enumerate([0, 2, 1]):
        inner_before = state.ts
        state, ts = attacked.step(state, jnp.array([a]), jax.random.PRNGKey(step))
        np.testing.assert_allclose(ts.reward, [-payoff[a]])
        np.testing.assert_allclose(ts.info["victims_reward"], payoff[a])
        np.testing.assert_array_equal(ts.obs[0], state.ts.obs[1])          # the adversary sees seat 1's view
        assert inner_before.obs.shape == state.ts.obs.shape
    assert bool(ts.done)
    with pytest.raises(ConfigError, match=r"seat=2: 'matrix' has seats 0..1"):
        Minority(env, _constant(env, 0), None, seat=2)


def _reads_the_other(env) -> Policy:
    """Matrix-game victims whose logits are twice the one-hot of the other seat's last action."""
    def probs(params, obs, mask, carry, reset):
        return jax.nn.softmax(2.0 * obs[..., 3:6], axis=-1), carry

    def act(params, obs, mask, key, carry, reset):
        p, carry = probs(params, obs, mask, carry, reset)
        return jax.random.categorical(key, jnp.log(p)), carry
    return Policy(act=act, initial_carry=no_carry, env=env, probs=probs)


def test_the_influence_term_is_the_kl_of_the_victims_policy_to_its_mean_over_the_seats_actions():
    env = coplay.make("matrix", game="penalty", rounds=2)
    attacked = Minority(env, _reads_the_other(env), None, seat=1, influence=0.5)
    state, ts = attacked.reset(jax.random.PRNGKey(0))
    assert float(ts.info["influence"]) == 0.0
    # After the adversary plays a, the victim plays a with e^2 / (e^2 + 2); over the three
    # actions its mean policy is uniform, so I = KL(p_a || uniform), whatever a is.
    p = np.exp(2.0 * np.eye(3)[1])
    p /= p.sum()
    expected = float(np.sum(p * np.log(3 * p)))
    state, ts = attacked.step(state, jnp.array([1]), jax.random.PRNGKey(1))
    np.testing.assert_allclose(float(ts.info["influence"]), expected, rtol=1e-5)
    np.testing.assert_allclose(ts.reward, [-float(ts.info["victims_reward"]) + 0.5 * expected], rtol=1e-5)
    state, ts = attacked.step(state, jnp.array([1]), jax.random.PRNGKey(2))
    assert bool(ts.done) and float(ts.info["influence"]) == 0.0       # nothing to influence after the end
    # two steps on: the victim then sees the action the adversary held, so I is the same; from
    # the second round a two-step branch passes the end, and there is nothing to influence
    attacked = Minority(coplay.make("matrix", game="penalty", rounds=3), _reads_the_other(env), None, seat=1,
                        influence=0.5, horizon=2)
    state, _ = attacked.reset(jax.random.PRNGKey(0))
    state, ts = attacked.step(state, jnp.array([1]), jax.random.PRNGKey(1))
    np.testing.assert_allclose(float(ts.info["influence"]), expected, rtol=1e-5)
    state, ts = attacked.step(state, jnp.array([1]), jax.random.PRNGKey(2))
    assert float(ts.info["influence"]) == 0.0
    with pytest.raises(ConfigError, match="influence=0.5: the victims' policy has no action distribution"):
        Minority(env, _constant(env, 0), None, seat=1, influence=0.5)


def test_the_run_field_trains_an_adversary_and_refuses_bad_input(tmp_path):
    common = ["seeds=1", "progress=false", "logger=csv", "eval_episodes=8", f"out_dir={tmp_path}"]
    team = coplay.train(["algo=ippo", "env=spread", "total_steps=1600", "name=team", *common])
    adversary = coplay.train(["algo=ippo", "env=spread", f"minority={team.run_dir}@0:seat=2:influence=0.1:horizon=2",
                              "total_steps=1600", "name=adversary", *common])
    metrics = list(csv.DictReader((adversary.run_dir / "metrics.csv").open()))
    influence = [float(r["eval/influence"]) for r in metrics if r.get("eval/influence")]
    # the influence summed over each episode: in spread an action shows in the others' view two steps on
    assert "eval/victims_reward" in metrics[0] and influence and all(0 < i < np.inf for i in influence)
    for field, message in [
        ("minority=runs/x", "expected <run dir>[@<seed>]:seat=<k>[:influence=<weight>[:horizon=<steps>]]"),
        (f"minority={team.run_dir}:seat=0:influence=-1", "expected <run dir>"),
        (f"minority={tmp_path / 'none'}:seat=0", "is not a run directory"),
        (f"minority={team.run_dir}:seat=3", "seat=3: 'spread' has seats 0..2"),
        (f"minority={team.run_dir}@4:seat=0", "the run has seeds 0..0, not 4"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            coplay.train(["algo=ippo", "env=spread", field, "total_steps=1600", *common])
    with pytest.raises(ConfigError, match="that team was trained on env=spread"):
        coplay.train(["algo=ippo", "env=spread", "env.n_agents=4", f"minority={team.run_dir}:seat=0",
                      "total_steps=1600", *common])
