"""The algorithm contract: every registered trainer declares its config, its
capabilities and its per-environment state, and a pair that cannot work is
refused by one look-up that names the algorithms that can."""

import dataclasses

import jax
import numpy as np
import pytest

import coplay
from coplay.algos import ALGOS
from coplay.algos.base import HostTrainer, Trainer, TrainerConfig, env_axis_mask
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.experiment.config import RESUMABLE, Experiment, parse_overrides, resume_differences
from coplay.experiment.compiled import plan

# A small environment every algorithm can train on, per algorithm.
ENV_FOR = {"mappo": "spread", "ippo": "spread", "happo": "spread", "hatrpo": "spread", "iql": "spread", "vdn": "spread", "qmix": "spread",
           "selfplay_ppo": "tic_tac_toe", "grpo": "text:kuhn_poker", "mo_ppo": "treasure",
           "pc_mappo": "treasure", "mo_qmix": "treasure",
           "bc": "spread", "iql_cql": "spread", "qmix_cql": "spread", "cfcql": "spread", "maicq": "spread",
           "lm_grpo": "text:kuhn_poker"}
OFFLINE = ("bc", "iql_cql", "qmix_cql", "cfcql", "maicq")
# Learners that run on the host (a pretrained language model in PyTorch): `HostTrainer`s, registered like
# every trainer and run by the host engine, without a compiled TrainState.
HOST = ("lm_grpo",)


@pytest.fixture(scope="module")
def spread_dataset(tmp_path_factory):
    """A few random episodes of spread, for the offline trainers' contract."""
    from coplay.offline import random_policy, record, save

    env = coplay.make("spread")
    path = tmp_path_factory.mktemp("data") / "spread.vlt" / "poor"
    return str(save(record(env, random_policy(env), 4, jax.random.PRNGKey(0), "poor"), path))


def test_every_algorithm_is_a_registered_trainer_with_a_documented_config():
    assert sorted(ALGOS.names()) == sorted(ENV_FOR)
    for name, entry in ALGOS.items():
        base, engine = (HostTrainer, "host") if name in HOST else (Trainer, "compiled")
        assert issubclass(entry.factory, base) and entry.factory.name == name and entry.engine == engine
        assert entry.config is entry.factory.config_class and issubclass(entry.config, TrainerConfig)
        assert entry.capabilities is entry.factory.capabilities
        for f in dataclasses.fields(entry.config):
            assert f.metadata.get("help"), f"{name}: algo.{f.name} has no help text"
        config = entry.config()
        if name in OFFLINE:   # gradient steps, not environment steps
            assert config.update_steps(None) == config.steps_per_update == config.grad_steps
        elif name in ("grpo", *HOST):   # whole episodes: as many steps as the environment's longest
            spec = coplay.make(ENV_FOR[name]).spec
            assert config.update_steps(spec) == config.episodes * spec.max_steps
        else:
            assert config.update_steps(None) == config.steps_per_update == config.num_envs * config.rollout_len


@pytest.mark.parametrize("name", sorted(set(ENV_FOR) - set(HOST)))
def test_per_env_fields_are_exactly_the_ones_with_an_environment_axis(name, spread_dataset):
    entry = ALGOS.get(name)
    if name in OFFLINE:   # steps no environment: nothing has an environment axis
        trainer = entry.factory(entry.config(dataset=spread_dataset), coplay.make(ENV_FOR[name]), num_updates=4)
        state = jax.eval_shape(trainer.init, jax.random.PRNGKey(0))
        assert not any(jax.tree.leaves(env_axis_mask(state))) and trainer.num_envs == 1
        return
    if name == "grpo":   # its episodes, each of at most max_turns turns
        config = entry.config(episodes=7, max_turns=4, group_size=7)
    else:
        config = entry.config(num_envs=7, rollout_len=4)
    if name in ("iql", "vdn", "qmix", "mo_qmix"):
        config = dataclasses.replace(config, learning_starts=0, buffer_size=700)
    trainer = entry.factory(config, coplay.make(ENV_FOR[name]), num_updates=4)
    state = jax.eval_shape(trainer.init, jax.random.PRNGKey(0))     # shapes only: nothing runs
    mask = env_axis_mask(state)
    marked, unmarked = [], []
    jax.tree.map(lambda m, part: (marked if m else unmarked).extend(jax.tree.leaves(part)), mask, state)
    if name == "grpo":   # every update plays its episodes from their start to their end: none is carried over
        assert not marked and trainer.num_envs == 7 and trainer.steps_per_update == 7 * 4
        return
    if name == "mo_ppo":   # every weight's MAPPO state [W, ...]: the environments are the second axis, unmarked
        assert not marked and trainer.steps_per_update == 7 * 4
        weights = config.weights
        assert all(leaf.shape[:2] == (weights, 7) for leaf in jax.tree.leaves(state.lanes.env_state))
        assert all(leaf.shape[:1] == (weights,) for leaf in jax.tree.leaves(state.lanes.params))
        return
    assert marked, "every trainer steps parallel environments"
    assert all(leaf.shape[:1] == (7,) for leaf in marked)
    # Parameters have no environment axis.
    assert all(leaf.shape[:1] != (7,) for leaf in jax.tree.leaves(state.params))
    assert trainer.num_envs == 7 and trainer.steps_per_update == 7 * config.rollout_len


@pytest.mark.parametrize("overrides, words", [
    (["algo=selfplay_ppo", "env=spread"],
     ["'selfplay_ppo' cannot train on environment 'spread'", "all its agents are on one team",
      "Algorithms that can: bc, cfcql, happo, hatrpo, ippo, iql, iql_cql, maicq, mappo, qmix, qmix_cql, vdn"]),
    (["algo=mo_ppo", "env=spread"],
     ["'mo_ppo' cannot train on environment 'spread'", "it has one objective and it needs several",
      "Algorithms that can: bc, cfcql, happo, hatrpo, ippo, iql, iql_cql, maicq, mappo, qmix, qmix_cql, vdn"]),
    (["algo=mappo", "env=treasure"],
     ["'mappo' cannot train on environment 'treasure'", "it has 2 objectives and it needs a scalar reward",
      "coplay.wrappers.Scalarise", "Algorithms that can: mo_ppo, mo_qmix, pc_mappo"]),
    (["algo=mappo", "env=tic_tac_toe"],
     ["'mappo' cannot train on environment 'tic_tac_toe'", "turn-based", "Algorithms that can: selfplay_ppo"]),
    (["algo=selfplay_ppo", "env=pgx:2048"],
     ["it has 1 agent(s) and it needs at least 2",
      "Algorithms that can: bc, cfcql, happo, hatrpo, ippo, iql, iql_cql, maicq, mappo, qmix, qmix_cql, vdn"]),
])
def test_a_pair_that_cannot_work_is_refused_naming_what_can(overrides, words):
    with pytest.raises(ConfigError) as err:
        plan(parse_overrides(overrides + ["total_steps=100000"]))
    for word in words:
        assert word in str(err.value)


def test_ippo_cannot_be_switched_into_mappo_by_a_field():
    with pytest.raises(UnknownNameError, match="critic"):
        parse_overrides(["algo=ippo", "algo.critic=global"])
    assert ALGOS.get("mappo").capabilities.needs_global_state
    assert not ALGOS.get("ippo").capabilities.needs_global_state


def test_fields_that_do_not_change_results_are_marked_once():
    assert set(RESUMABLE) == {"resume", "progress", "name", "out_dir", "logger", "checkpoint_every",
                              "keep_checkpoints", "check_memory"}
    run = parse_overrides(["algo=ippo"])
    again = parse_overrides(["algo=ippo", "logger=csv", "progress=false", "keep_checkpoints=5"])
    assert resume_differences(run, again) == []
    assert resume_differences(run, parse_overrides(["algo=ippo", "eval_episodes=3"])) == ["eval_episodes"]


def test_configs_written_by_an_older_coplay_read_back_or_say_what_to_use():
    old = {"algo": {"name": "ippo", "critic": "local", "lr": 1e-3}, "env": {"name": "spread"}}
    assert Experiment.from_dict(old).algo_config.lr == 1e-3
    assert Experiment.from_dict({"algo": {"name": "qmix", "reward": "team"}}).algo == "qmix"
    with pytest.raises(ConfigError, match="is IPPO: use algo=ippo"):
        Experiment.from_dict({"algo": {"name": "mappo", "critic": "local"}})
    with pytest.raises(ConfigError, match="is MAPPO: use algo=mappo"):
        Experiment.from_dict({"algo": {"name": "ippo", "critic": "global"}})


def test_help_lists_every_algorithm_with_its_kind():
    from coplay.experiment.config import help_text

    text = help_text()
    for name, entry in ALGOS.items():
        assert f"{name}" in text and f"[{entry.kind}]" in text
    assert np.all([f"algo={n} fields:" in text for n in ALGOS.names()])


def test_a_solver_named_as_a_trainer_points_to_coplay_solve():
    with pytest.raises(UnknownNameError, match="'cfr' is a game solver, not a trainer: run it with `coplay solve"):
        parse_overrides(["algo=cfr"])


def test_every_algorithm_and_environment_pair_is_accepted_or_refused_naming_what_can():
    """Every registered algorithm on every registered environment (defaults): either it
    plans (what it trains on fits its capabilities) or it is refused before anything
    compiles, naming the algorithms that can."""
    from coplay.core.registry import ENVS

    accepted, refused = [], []
    for env in ENVS.names():
        for algo in ALGOS.names():
            try:
                p = plan(parse_overrides([f"algo={algo}", f"env={env}"]))
            except ConfigError as e:
                if algo in OFFLINE and "learns from a dataset" in str(e):   # fits, but no dataset was named
                    assert not ALGOS.get(algo).capabilities.problems(coplay.make(env).spec), (algo, env)
                    continue
                if algo in HOST and "trains on the host" in str(e):   # fits; coplay train runs it
                    assert not ALGOS.get(algo).capabilities.problems(coplay.make(env).spec), (algo, env)
                    accepted.append((algo, env))
                    continue
                assert "Algorithms that can:" in str(e), (algo, env, str(e))
                refused.append((algo, env))
                continue
            assert not type(p.trainer).capabilities.problems(p.env.spec)
            p.env.close()
            accepted.append((algo, env))
    assert ("selfplay_ppo", "spread") in refused and ("mappo", "tic_tac_toe") in refused
    assert ("selfplay_ppo", "tic_tac_toe") in accepted and ("qmix", "foraging") in accepted
    assert ("lm_grpo", "text:nim") in accepted and ("lm_grpo", "spread") in refused
