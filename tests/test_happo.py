"""HAPPO and HATRPO (`coplay.algos.happo`, `coplay.algos.hatrpo`): agents that must act
differently on the same observation, which one shared network cannot, and the refusals."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError

# The penalty game with k = 0: payoff 10 to both where one plays action 0 and the other
# action 2, 2 where both play 1, else 0. One round, so both players see the same first-round
# observation. One network shared without agent ids plays one distribution p for both, whose
# expected payoff 20 p0 p2 + 2 p1^2 is at most 5 (p0 = p2 = 1/2); two different actors reach 10.
GAME = ["env=matrix", "env.game=penalty", "env.penalty_k=0", "env.rounds=1", "total_steps=20000",
        "algo.ent_coef=0", "algo.lr=0.005", "seeds=2", "progress=false", "logger=csv", "eval_episodes=64"]


@pytest.mark.slow
def test_happo_solves_the_game_that_one_shared_network_cannot(tmp_path):
    happo = coplay.train(["algo=happo", *GAME, f"out_dir={tmp_path}"])
    shared = coplay.train(["algo=mappo", "algo.agent_id=false", *GAME, f"out_dir={tmp_path}"])
    # measured: HAPPO 10 on each of 4 seeds; shared MAPPO 5.16 (its bound is 5 in expectation);
    # MAPPO with an actor per agent, updated at once on the same data, 8.4 [7.7, 9.5] over 4 seeds
    assert np.all(np.array(happo.final_return["per_seed"]) > 9.5), happo.final_return
    assert np.all(np.array(shared.final_return["per_seed"]) < 7.5), shared.final_return
    # HATRPO's trust region of 0.01 moves too little in 12 updates (6.8 [5.5, 8.1] measured); 0.1 solves it
    hatrpo = coplay.train(["algo=hatrpo", "algo.kl_threshold=0.1", *GAME, f"out_dir={tmp_path}"])
    assert np.all(np.array(hatrpo.final_return["per_seed"]) > 9.5), hatrpo.final_return
    rows = list(csv.DictReader((hatrpo.run_dir / "metrics.csv").open()))
    kls = [float(r["loss/approx_kl"]) for r in rows if r.get("loss/approx_kl")]
    assert kls and max(kls) < 0.1, kls       # every accepted step stays inside the trust region


def test_the_kl_of_both_distributions_by_hand():
    from coplay.nets.distributions import Categorical, DiagGaussian

    old, new = np.log([0.5, 0.5, 1e-30]), np.log([0.25, 0.75, 1e-30])   # a third action that is never legal
    mask = np.array([True, True, False])
    kl = Categorical.kl(Categorical().prepare(old, mask), Categorical().prepare(new, mask))
    np.testing.assert_allclose(kl, 0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75), rtol=1e-5)
    g = DiagGaussian(1)
    m0, s0, m1, s1 = 0.3, np.log(0.5), -0.2, np.log(1.5)
    expected = np.log(1.5 / 0.5) + (0.5**2 + 0.5**2) / (2 * 1.5**2) - 0.5
    np.testing.assert_allclose(g.kl(np.array([m0, s0]), np.array([m1, s1])), expected, rtol=1e-5)


def test_happo_refuses_a_shared_or_recurrent_actor():
    # (HATRPO inherits both refusals: it is HAPPO with another step per agent)
    from coplay.experiment.compiled import plan
    from coplay.experiment.config import parse_overrides

    with pytest.raises(ConfigError, match="algo.share_params=true: HAPPO updates each agent's own actor"):
        plan(parse_overrides(["algo=happo", "env=spread", "algo.share_params=true"]))
    with pytest.raises(ConfigError, match="algo.recurrent=true: HAPPO here is feed-forward"):
        plan(parse_overrides(["algo=happo", "env=spread", "algo.recurrent=true"]))
