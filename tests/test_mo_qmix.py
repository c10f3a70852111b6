"""Multi-objective QMIX (`algo=mo_qmix`): vector Q-values chosen by the utility of the
weight each agent is shown, one mixer per objective, and one network learning most
of the salvage task's true front."""

import jax
import numpy as np
import pytest

import coplay
from coplay.algos import mo_qmix
from coplay.core.errors import ConfigError
from coplay.experiment.config import parse_overrides
from coplay.experiment.compiled import plan
from coplay.wrappers import Preference


def test_agents_act_on_the_utility_of_their_vector_q_under_the_weight_they_are_shown():
    trainer = mo_qmix.MOQMIX(mo_qmix.Config(num_envs=4, rollout_len=2, learning_starts=0, buffer_size=64),
                             coplay.make("treasure"), num_updates=2)
    state = trainer.init(jax.random.PRNGKey(0))
    ts = state.ts
    _, q = trainer.q_values(state.params["agent"], state.carry, ts.obs, ts.done)
    k, a = 2, trainer.num_actions
    assert q.shape == (4, 2, a, k)
    w = Preference.weight(ts, k)                                         # [E, K] each environment's episode weight
    np.testing.assert_allclose(trainer.weight(ts.obs), np.broadcast_to(w[:, None], (4, 2, k)))
    np.testing.assert_allclose(trainer.acting_q(q, ts.obs), np.einsum("enak,ek->ena", q, w), rtol=1e-5)
    assert jax.tree.leaves(state.params["mixer"])[0].shape[0] == k       # one mixer per objective


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """One network, 2 seeds, 39,936 environment steps each, played at 5 weights."""
    out = tmp_path_factory.mktemp("mo_qmix")
    return coplay.train(["algo=mo_qmix", "env=treasure", "algo.weights=5", "seeds=2", "total_steps=39936",
                         "eval_episodes=4", f"out_dir={out}", "progress=false", "logger=csv"])


def test_one_conditioned_q_network_finds_most_of_the_true_front_on_every_seed(mixed):
    front = mixed.summary["front"]
    hv = np.array(mixed.summary["final"]["hypervolume"]["per_seed"])
    # one chest for every weight scores 16 of 95; the two ends 55
    assert np.all(hv >= 0.8 * front["true_hypervolume"]), hv
    for seed_front in front["per_seed"]:
        assert [2.0, -2.0] in seed_front


@pytest.mark.parametrize("overrides, words", [
    (["env=spread"], ["'mo_qmix' cannot train on environment 'spread'", "it has one objective"]),
    (["algo.show_weight=5", "algo.weights=5"], ["algo.show_weight=5 is out of range", "0 to 4"]),
])
def test_bad_settings_are_refused_before_anything_compiles(overrides, words):
    with pytest.raises(ConfigError) as e:
        plan(parse_overrides(["algo=mo_qmix", "env=treasure", *overrides]))
    for w in words:
        assert w in str(e.value)
