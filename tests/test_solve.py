"""`coplay solve` and the solvers' one call shape: the registry, games a solver cannot
use, the run directory a solve writes (exact figures on Kuhn poker and rock-paper-
scissors), and bad input refused before anything is computed."""

import csv
import dataclasses
import json

import jax
import numpy as np
import pytest

import coplay
from coplay.algos import SOLVERS, cfr, fictitious_play, psro, psro_ppo
from coplay.cli.main import main
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.trees import TreeArrays, game_tree
from coplay.envs.trees.values import exploitability
from coplay.experiment import solve as solve_module
from coplay.experiment.solve import SolveExperiment, load_solution, parse_overrides


def test_every_solver_is_registered_with_its_config_and_its_games():
    assert SOLVERS.names() == ["cfr", "fictitious_play", "psro", "psro_ppo"]
    for name, entry in SOLVERS.items():
        fields = dataclasses.fields(entry.config)
        assert "iterations" in {f.name for f in fields}, name
        assert all(f.metadata.get("help") for f in fields), name
        assert entry.capabilities.problem(coplay.make(entry.capabilities.default)) is None, name
    with pytest.raises(UnknownNameError, match="unknown solver 'cfx'; did you mean 'cfr'.* cfr, fictitious_play, psro"):
        SOLVERS.get("cfx")


@pytest.mark.parametrize("module, env, words", [
    (cfr, "matrix", ["solver 'cfr' cannot use environment 'matrix'", "tree:kuhn_poker, tree:leduc_holdem",
                     "Solvers that can use 'matrix': fictitious_play"]),
    (psro, "matrix", ["solver 'psro' cannot use environment 'matrix'", "tree:kuhn_poker, tree:leduc_holdem"]),
    (fictitious_play, "tree:kuhn_poker", ["cannot use environment 'tree:kuhn_poker'", "the matrix environment",
                                          "Solvers that can use 'tree:kuhn_poker': cfr, psro, psro_ppo"]),
    (psro_ppo, "spread", ["cannot use environment 'spread' (it has 3 players)", "two-player zero-sum games"]),
])
def test_a_game_a_solver_cannot_use_is_refused_naming_what_it_uses(module, env, words):
    with pytest.raises(ConfigError) as e:
        module.run(coplay.make(env), module.Config(), jax.random.PRNGKey(0))
    for w in words:
        assert w in str(e.value)


def _curve(run_dir):
    with (run_dir / "curve.csv").open() as f:
        rows = list(csv.DictReader(f))
    return [int(r["step"]) for r in rows], [float(r["exploitability"]) for r in rows]


def test_cli_solves_kuhn_poker_and_writes_the_run_directory(tmp_path, capsys):
    code = main(["solve", "algo=cfr", "env=tree:kuhn_poker", "algo.iterations=200", "algo.eval_every=20",
                 f"out_dir={tmp_path}", "name=kuhn", "progress=false"])
    assert code == 0
    run = tmp_path / "kuhn"
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "curve.csv", "curve.png", "solution.npz",
                                                     "summary.json"]
    assert f"run: {run}" in capsys.readouterr().out

    summary = json.loads((run / "summary.json").read_text())
    assert (summary["algo"], summary["env"], summary["iterations"], summary["curve_points"]) == \
        ("cfr", "tree:kuhn_poker", 200, 11)
    assert summary["measure"].startswith("exact exploitability")
    assert summary["final_exploitability"] < 1e-3           # CFR+ on Kuhn within a few hundred iterations
    assert summary["expected_value"] == pytest.approx(-1 / 18, abs=2e-3)   # Kuhn's game value
    assert summary["wall_time_s"] > 0

    steps, values = _curve(run)
    assert steps == list(range(0, 201, 20))
    assert values[0] == pytest.approx(0.458333, abs=1e-5)    # uniform play, OpenSpiel's figure
    assert values[-1] == pytest.approx(summary["final_exploitability"])
    assert max(values[5:]) < values[1] < values[0]           # it falls, and stays down

    exp = SolveExperiment.load(run / "config.yaml")
    assert (exp.algo, exp.env, exp.algo_config) == ("cfr", "tree:kuhn_poker", cfr.Config(iterations=200,
                                                                                         eval_every=20))
    assert exp.to_dict() == parse_overrides(["algo=cfr", "algo.iterations=200", "algo.eval_every=20",
                                             f"out_dir={tmp_path}", "name=kuhn", "progress=false"]).to_dict()

    solution = load_solution(run)
    policy, keys = solution["policy"], list(solution["infoset_keys"])
    assert policy.shape == (12, 2) and list(solution["action_names"]) == ["pass", "bet"]
    t = TreeArrays.from_tree(game_tree("kuhn_poker"))
    assert float(exploitability(t, policy)) == pytest.approx(summary["final_exploitability"], abs=1e-6)
    assert policy[keys.index("2b")] == pytest.approx([0.0, 1.0], abs=1e-2)   # a king facing a bet calls


def test_solve_from_python_plays_rock_paper_scissors_to_the_uniform_mixture(tmp_path):
    run = coplay.solve({"algo": {"name": "fictitious_play", "iterations": 2000, "eval_every": 100},
                        "env": {"name": "matrix", "game": "rps"}, "out_dir": str(tmp_path), "progress": False})
    assert run.run_dir.parent == tmp_path
    assert np.allclose(run.result.policy, 1 / 3, atol=0.02)
    assert run.summary["measure"].startswith("NashConv")
    assert run.summary["final_exploitability"] < 0.05 < _curve(run.run_dir)[1][1]
    solution = load_solution(run.run_dir)
    assert np.array_equal(solution["policy"], run.result.policy)
    assert solution["details/payoffs"].shape == (3, 3, 2) and "infoset_keys" not in solution
    # A solver named without a game gets its own.
    assert parse_overrides(["algo=fictitious_play"]).env == "matrix"
    assert solve_module.resolve(algo="psro").env == "tree:kuhn_poker"


@pytest.mark.parametrize("args, words", [
    (["algo=cfx"], ["unknown solver 'cfx'", "cfr, fictitious_play, psro, psro_ppo"]),
    (["algo=mappo"], ["'mappo' is a trainer", "coplay train algo=mappo", "cfr, fictitious_play, psro, psro_ppo"]),
    (["env=sprd"], ["unknown environment 'sprd'", "spread", "tree:<name>"]),
    (["env=tree:kuhn"], ["'kuhn'", "kuhn_poker, leduc_holdem"]),
    (["algo.iters=5"], ["'iters'", "alpha, alternating, beta, eval_every, gamma, iterations, variant"]),
    (["algo.iterations=0"], ["algo.iterations=0", ">= 1"]),
    (["algo.iterations=many"], ["algo.iterations", "integer", "'many'"]),
    (["algo.variant=cfr++"], ["algo.variant='cfr++'", "cfr, cfr+, dcfr"]),
    (["env=matrix"], ["solver 'cfr' cannot use environment 'matrix'", "tree:kuhn_poker, tree:leduc_holdem"]),
    (["algo=fictitious_play", "env=tree:leduc_holdem"], ["'tree:leduc_holdem'", "matrix environment"]),
    (["algo=fictitious_play", "env.game=roshambo"], ["'roshambo'", "climbing, imbalancing_act", "rps, stag_hunt"]),
    (["algo=fictitious_play", "env.game=vector_payoffs"], ["'vector_payoffs' has 2 objectives",
                                                           "climbing, penalty, prisoners_dilemma, stag_hunt, rps"]),
    (["algo=psro", "algo.meta_solver=lp"], ["algo.meta_solver='lp'", "nash, replicator, uniform"]),
    (["algo=psro_ppo", "algo.minibatches=3"], ["algo.minibatches=3 must divide"]),
    (["seeds=3"], ["'seeds'", "seed", "out_dir"]),
    (["iterations"], ["'iterations'", "key=value"]),
])
def test_cli_refuses_bad_input_before_computing(args, words, tmp_path, capsys, monkeypatch):
    def computing(*_):
        raise AssertionError("the solve started")

    monkeypatch.setattr(solve_module, "_run", computing)
    assert main(["solve", *args, f"out_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    for w in words:
        assert w in err
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir())  # no run directory


def test_cli_help_and_list_show_the_solvers(capsys):
    assert main(["solve", "--help"]) == 0
    out = capsys.readouterr().out
    for text in ("cfr", "psro", "psro_ppo", "fictitious_play", "algo.variant", "cfr|cfr+|dcfr", "algo.eval_every",
                 "algo.meta_solver", "algo.br_updates", "algo.lr", "algo.hidden_size", "seed", "out_dir",
                 "default env=tree:kuhn_poker", "coplay solve algo=cfr env=tree:leduc_holdem"):
        assert text in out
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Solvers" in out and all(name in out for name in SOLVERS.names())


@pytest.mark.slow
def test_psro_ppo_on_a_game_without_a_tree_scores_its_solution_with_one_more_response():
    """A tiny budget: the shapes and bookkeeping of the approximate measure, not learning
    (tests/test_selfplay_learning.py has psro_ppo's learning test)."""
    config = psro_ppo.Config(iterations=1, br_updates=1, meta_games=8, num_envs=4, rollout_len=2, minibatches=1,
                             epochs=1, hidden_size=8, num_layers=1)
    result = psro_ppo.run(coplay.make("matrix", game="rps", rounds=1), config, jax.random.PRNGKey(0))
    assert result.measure.startswith("approximate exploitability")
    assert result.steps.tolist() == [0, 1]
    assert result.exploitability.tolist() == [result.details["br_value"][0], result.details["final_br_value"]]
    assert np.all(np.abs(result.exploitability) <= 1.0)   # returns of rock-paper-scissors
    meta, payoffs = result.policy["meta_strategy"], result.details["payoffs"]
    assert meta.shape == (2,) and meta.sum() == pytest.approx(1.0)
    assert payoffs.shape == (2, 2) and np.allclose(payoffs, -payoffs.T)
    assert all(leaf.shape[0] == 2 for leaf in jax.tree.leaves(result.policy["population"]))
    assert "exact_exploitability" not in result.details


def test_a_sweep_over_solvers_ranks_configurations_by_final_exploitability(tmp_path, monkeypatch):
    """`coplay sweep` with a solver: each trial is a solve, and the table ranks final
    exploitability, lowest first. Trials run in this process (Ray's scheduling is
    tests/test_sweep.py's subject)."""
    pytest.importorskip("ray")
    from coplay.experiment.sweep import sweep
    from coplay.experiment.sweep_plan import plan_sweep
    from coplay.scale.ray_trials import TrialOutcome

    def in_process(fn, trials, **kwargs):
        return {tid: TrialOutcome(tid, finished=True, metrics=fn(payload)) for tid, payload in trials.items()}

    monkeypatch.setattr("coplay.scale.ray_trials.run_trials", in_process)
    out = tmp_path / "s"
    args = ["algo=cfr", "env=tree:kuhn_poker", "algo.variant=cfr,cfr+", "algo.iterations=100", "algo.eval_every=50",
            "seeds=1"]
    result = sweep(args, out=out)
    assert result.failed == {} and len(result.ran) == 2
    rows = {r["values"]["algo.variant"]: r for r in result.table}
    for row in rows.values():
        summary = json.loads((tmp_path / "s" / "trials" / row["trials"][0]["id"] / "summary.json").read_text())
        assert row["exploitability"]["per_seed"] == [summary["final_exploitability"]]
        assert row["seeds"] == 1 and "return" not in row
    assert rows["cfr+"]["exploitability"]["iqm"] < rows["cfr"]["exploitability"]["iqm"]
    md = (out / "sweep.md").read_text()
    assert "exploitability IQM" in md and md.index(rows["cfr+"]["config"]) < md.index(rows["cfr"]["config"])
    with (out / "sweep.csv").open() as f:
        assert "exploitability_iqm" in next(csv.reader(f))
    assert (out / "sweep.png").is_file()
    assert sweep(args, out=out).ran == []  # finished trials are not solved again

    with pytest.raises(ConfigError, match="trainers or solvers, not both: cfr .* ippo"):
        plan_sweep(["algo=cfr,ippo"], out=tmp_path / "mixed")
    with pytest.raises(ConfigError, match="--vmap-seeds"):
        plan_sweep(["algo=cfr"], vmap_seeds=True, out=tmp_path / "vmap")
    with pytest.raises(ConfigError, match="algo.variant='cfr\\+\\+' is not allowed"):
        sweep(["algo=cfr", "algo.variant=cfr+,cfr++"], out=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
