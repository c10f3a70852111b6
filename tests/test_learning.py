"""Learning tests: each algorithm, on a small budget with fixed seeds, must reach
a return clearly better than a uniformly random policy. Thresholds are per-agent
episode returns (see each test for the random baseline and why the bar is
meaningful); they are measured, not timed: no wall-clock limits here."""

import jax
import numpy as np
import pytest

import coplay
from coplay.experiment.config import parse_overrides
from coplay.experiment.compiled import plan
from coplay.experiment.runner import uniform_policy_return

COMMON = ["seeds=2", "progress=false", "logger=csv", "eval_episodes=64", "eval_every=0"]


def _train(tmp_path, overrides):
    result = coplay.train(overrides + COMMON + [f"out_dir={tmp_path}"])
    return np.array(result.final_return["per_seed"]), result


# 62 updates of 1,600 steps (99,200 steps, two chunks of 31): the budget the spread bars were
# measured at. FORAGING: 31 updates, 49,600 steps.
SPREAD = ["env=spread", "total_steps=99200"]
FORAGING = ["env=foraging", "env.grid_size=6", "env.n_agents=2", "env.n_food=2", "total_steps=50000"]


@pytest.mark.parametrize("algo", ["mappo", "ippo", "happo", "hatrpo"])
@pytest.mark.slow
def test_spread_beats_random(tmp_path, algo):
    random = uniform_policy_return([f"algo={algo}", *SPREAD])
    per_seed, _ = _train(tmp_path, [f"algo={algo}", *SPREAD])
    # Random is about -26.2 per agent. Every seed must close at least a third of the
    # gap to -20 (JaxMARL's IPPO return after 10M steps) within 99,200 steps (a bar of
    # -23.7; measured: MAPPO -22.8 and -21.6, IPPO -22.5 and -20.9; with seed=1 and
    # seed=2, MAPPO -21.9, -22.7, -21.2, -23.2 and IPPO -22.1, -23.1, -21.2, -23.1; at
    # 49,600 steps MAPPO -23.9 and -22.6, below the bar).
    assert random < -26.0
    assert np.all(per_seed > random + 2.5), (per_seed, random)


@pytest.mark.slow
def test_recurrent_mappo_learns_spread(tmp_path):
    # 99,200 steps (62 updates) with GRUs of 32 units. Their learning phase (backpropagation through 25 steps,
    # 8 minibatches an update) is compute-bound, and 32 units take 18 s on 2 cores where 64 took
    # 29 (measured against a bar of -23.7: -23.0 and -21.4; with seed=1 -22.9 and -23.5, with
    # seed=2 -22.4 and -23.5; at 64 units -22.0 and -20.8, with seed=1 -21.8 and -22.0). Two
    # epochs instead of four at 64 units read -24.3 with seed=1, below the bar; fewer steps at 64
    # units too: 40k read -23.6, 25k -24.2.
    recurrent = ["algo=mappo", "algo.recurrent=true", "algo.hidden_size=32", "env=spread", "total_steps=99200"]
    random = uniform_policy_return(recurrent)
    per_seed, _ = _train(tmp_path, recurrent)
    assert np.all(per_seed > random + 2.5), (per_seed, random)


@pytest.mark.parametrize("algo", ["mappo", "ippo", "happo", "hatrpo"])
@pytest.mark.slow
def test_foraging_beats_random(tmp_path, algo):
    random = uniform_policy_return([f"algo={algo}", *FORAGING])
    per_seed, _ = _train(tmp_path, [f"algo={algo}", *FORAGING])
    # Foraging's team return per episode is 1 when all food is eaten, so the
    # per-agent return is at most 0.5 with two agents. Random agents already
    # get about 0.34 here, so every seed must close three quarters of the gap
    # from random play to that ceiling (a bar of random + 0.15 sat at 0.491, so
    # that 62 of 64 perfect evaluation episodes failed it: 0.484). Measured at 50k
    # steps, against random's 0.328 (a bar of 0.457): MAPPO 0.492 and 0.495, IPPO 0.492 and
    # 0.500, and with seed=1 and seed=2 every seed 0.492 or more; at 25k 0.446 and 0.462
    # (MAPPO), too few; at 100k 0.492 and 0.484 for MAPPO and IPPO alike; at 150k, 61 and 63
    # of 64 evaluation episodes cleared.
    ceiling = 0.5
    assert random < 0.4
    assert np.all(per_seed > random + 0.75 * (ceiling - random)), (per_seed, random)


@pytest.mark.slow
def test_continuous_ppo_trains_and_acts_in_bounds(tmp_path):
    """Continuous actions (diagonal Gaussian). A smoke test, not a learning bar:
    see the issue note for the returns measured so far."""
    result = coplay.train(["algo=mappo", "env=spread", "env.continuous_actions=true", "total_steps=3200",
                           "chunk_steps=1600", "seeds=1", "algo.num_envs=16", "algo.rollout_len=25",
                           "progress=false", "logger=csv", "eval_episodes=4", f"out_dir={tmp_path}"])
    assert np.isfinite(result.final_return["iqm"])
    p = plan(parse_overrides(["algo=mappo", "env=spread", "env.continuous_actions=true"]))
    policy = p.trainer.policy()
    params = jax.tree.map(lambda x: x[0], p.trainer.policy_params(result.state))
    _, ts = jax.vmap(policy.env.reset)(jax.random.split(jax.random.PRNGKey(0), 8))
    action, _ = policy.act(params, ts.obs, ts.action_mask, jax.random.PRNGKey(1), policy.initial_carry((8,)), ts.done)
    assert action.shape == (8, 3, 5) and action.dtype == np.float32
    assert np.all(np.isfinite(np.asarray(action)))


class _BonusForAction0(coplay.core.env.Wrapper):
    """The matrix game with its reward replaced by zero and `info["bonus"]` = 1 for each agent that
    played action 0: what a policy learns here it learns from the shaped reward alone."""

    def _reset(self, key):
        state, ts = self.env.reset(key)
        return state, ts.replace(info={**ts.info, "bonus": jax.numpy.zeros(2)})

    def _step(self, state, actions, key):
        state, ts = self.env.step(state, actions, key)
        return state, ts.replace(reward=0 * ts.reward, info={**ts.info, "bonus": (actions == 0).astype("float32")})


@pytest.mark.parametrize("shaping_steps, learns", [(0, True), (80, False)])
def test_ppo_learns_from_the_shaped_reward_while_its_weight_lasts(shaping_steps, learns):
    from coplay.algos import ippo
    from coplay.core.errors import ConfigError

    env = _BonusForAction0(coplay.make("matrix"))
    config = ippo.Config(num_envs=16, rollout_len=5, lr=1e-2, shaped_reward="bonus", shaping_steps=shaping_steps)
    trainer = ippo.IPPO(config, env, num_updates=40)
    # 80 steps is one update of 16 x 5: the weight is 1 in the first update, 0 from the second on
    assert float(trainer.shaping_weight(jax.numpy.int32(0))) == 1.0
    assert float(trainer.shaping_weight(jax.numpy.int32(1))) == (1.0 if shaping_steps == 0 else 0.0)
    state = trainer.init(jax.random.PRNGKey(0))
    update = jax.jit(trainer.update)
    for _ in range(40):
        state, metrics = update(state)
    # the reported return is the environment's (zero) reward, not the shaped one, which is reported apart
    assert float(metrics["return"]) == 0.0 and float(metrics["episodes"]) == 16
    assert (float(metrics["bonus"]) > 0.9 * 25) == learns, metrics["bonus"]
    no_carry, no_reset = jax.numpy.zeros((1, 0)), jax.numpy.zeros(1, bool)
    logits = trainer.actor.apply(trainer.policy_params(state), no_carry, state.ts.obs[0], no_reset)[1]
    p0 = jax.nn.softmax(logits)[..., 0]
    assert bool(np.all(p0 > 0.9)) == learns, p0
    with pytest.raises(ConfigError, match="'bonu'.*its entries: bonus, optimal"):
        ippo.IPPO(ippo.Config(shaped_reward="bonu"), env, num_updates=1)
