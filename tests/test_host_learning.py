"""coplay's algorithms learn on PettingZoo environments that are not written in
JAX (`from_pettingzoo`), with the same compiled acting and learning code as on
native environments: MAPPO on mpe2's simple_spread (a ParallelEnv) and
self-play PPO on PettingZoo's tic-tac-toe (an AECEnv, turn-based). Fixed seeds,
thresholds against a uniformly random policy measured in the same test.

The copies step in-process: worker processes and Ray actors give the same
episodes as in-process copies (test_pettingzoo_import), and on 2 cores they
only add inter-process traffic to these runs (about 20% of their time)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import coplay
from coplay.algos.common.matches import make_match, outcomes, random_policy
from coplay.core.compile import jit_once
from coplay.experiment.config import parse_overrides
from coplay.experiment.compiled import plan
from coplay.experiment.runner import uniform_policy_return

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")

COMMON = ["progress=false", "logger=csv", "eval_every=0"]


@pytest.mark.slow
def test_mappo_learns_mpe2_simple_spread_through_from_pettingzoo(tmp_path):
    overrides = ["algo=mappo", "env=pettingzoo:mpe2.simple_spread_v3", "seeds=1",
                 "total_steps=20000", "chunk_steps=10000", "eval_episodes=128", *COMMON]
    random = uniform_policy_return(overrides, episodes=256)
    result = coplay.train(overrides + [f"out_dir={tmp_path}"])
    learned = result.final_return["per_seed"][0]
    # Random play is about -26.7 per agent; this seed reaches -23.4 at 20k steps, -23.3
    # at 30k, -22.9 at 40k (mpe2 steps in Python: about 2 ms an environment step here).
    # 20k steps in two chunks: -23.43 against random's -26.70 on the Intel Xeon this was measured on;
    # -23.95 on an AMD EPYC (2026-11-30), 0.25 above the bar: another CPU, or a change since, moved it.
    # MAPPO on coplay's native spread, same config, reaches about -20.6 at 350k steps
    # (BENCHMARKS.md, host_train).
    assert random < -25.5
    assert learned > random + 2.5, (learned, random)


@pytest.mark.slow
def test_selfplay_learns_pettingzoo_tictactoe(tmp_path):
    # A game of tic-tac-toe has at most 9 moves: max_steps=9 never cuts one short, and
    # evaluation and matches (which run to max_steps on host environments, 1,000 by
    # default) stop there.
    name = "pettingzoo:classic.tictactoe_v3"
    result = coplay.train(["algo=selfplay_ppo", f"env={name}", "env.max_steps=9", "seeds=1",
                           "total_steps=50000", "chunk_steps=25000", "eval_episodes=32", *COMMON,
                           f"out_dir={tmp_path}"])
    trainer = plan(parse_overrides(["algo=selfplay_ppo", f"env={name}"])).trainer
    env, me = coplay.make(name, max_steps=9), trainer.policy()
    params = jax.tree.map(lambda x: x[0], trainer.policy_params(result.state))
    rates = {}
    for seat in (0, 1):  # PettingZoo's player_1 always moves first
        seats = [me, random_policy(env)] if seat == 0 else [random_policy(env), me]
        out = jit_once(make_match(env, seats, 200))([params, None] if seat == 0 else [None, params],
                                                   jax.random.PRNGKey(seat))
        rates[seat] = {k: float(np.mean(v)) for k, v in outcomes(out["return"], seat).items()}
    # Random against random: the first player wins about 58% and loses 29%, the
    # second wins 29% and loses 58%.
    assert rates[0]["win"] >= 0.85 and rates[0]["loss"] <= 0.10, rates
    assert rates[1]["win"] >= 0.55 and rates[1]["loss"] <= 0.30, rates
