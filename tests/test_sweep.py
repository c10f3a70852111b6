"""`coplay sweep`: grid and random expansion, validation before Ray starts, a real
sweep on a local Ray instance gathered into one table, and a trial whose Ray
worker is killed (SIGKILL) resuming from its checkpoint."""

import csv
import json
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from coplay.cli.main import main
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.experiment.sweep import read_attempts, sweep
from coplay.experiment.sweep_plan import Axis, SweepArgs, expand, parse_sweep, plan_sweep
from tiny_run import TINY

ray = pytest.importorskip("ray")

# Cheap runs: 10-round climbing game, 4 chunks of 400 steps, evaluation every chunk. Swept
# learning rates include the default (7e-4), whose trials run the program other tests compiled.
SMALL = [a for a in TINY if a != "progress=false"]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the module's sweeps (starting Ray takes seconds on 2 cores);
    `sweep` uses a connection that exists and leaves it open. One CPU: the trials run one
    at a time in a worker process that Tune reuses, which on 2 cores takes less of the
    machine (27 against 32 busy CPU-seconds for the two sweeps below) than two workers that
    each start, import coplay and load the same compiled programs."""
    with warnings.catch_warnings():  # JAX warns of any fork; Ray forks only to exec its processes
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")
        ray.init(num_cpus=1, include_dashboard=False, logging_level="warning")
    yield
    ray.shutdown()


# --- expansion (no Ray) -------------------------------------------------------------------------------------------


def test_parse_sweep_splits_fixed_axes_and_seeds():
    s = parse_sweep(["algo=ippo", "algo.lr=1e-3,3e-4", "algo.ent_coef=[0, 0.01]", "seeds=5", "seed=10",
                     "algo.gamma=loguniform(0.9,0.999)", "progress=true"])
    assert s.fixed == ("algo=ippo",)
    assert s.axes == (Axis("algo.lr", ("1e-3", "3e-4")), Axis("algo.ent_coef", ("0", "0.01")),
                      Axis("algo.gamma", dist="loguniform", low=0.9, high=0.999))
    assert (s.seeds, s.seed) == (5, 10)


def test_grid_is_the_product_first_axis_slowest():
    s = SweepArgs((), (Axis("a", ("1", "2")), Axis("b", ("x", "y", "z"))))
    assert expand(s, "grid") == [{"a": "1", "b": "x"}, {"a": "1", "b": "y"}, {"a": "1", "b": "z"},
                                 {"a": "2", "b": "x"}, {"a": "2", "b": "y"}, {"a": "2", "b": "z"}]
    assert expand(SweepArgs((), ()), "grid") == [{}]


def test_random_search_draws_within_ranges_reproducibly():
    s = parse_sweep(["algo.lr=loguniform(1e-4,1e-2)", "algo.gamma=uniform(0.9,0.99)", "algo.epochs=randint(1,3)",
                     "algo.activation=tanh,relu"])
    a = expand(s, "random", samples=40, search_seed=1)
    assert a == expand(s, "random", samples=40, search_seed=1)
    assert a != expand(s, "random", samples=40, search_seed=2)
    assert len(a) == 40
    assert all(1e-4 <= float(c["algo.lr"]) <= 1e-2 and 0.9 <= float(c["algo.gamma"]) <= 0.99 for c in a)
    assert {c["algo.epochs"] for c in a} == {"1", "2", "3"}  # both ends included
    assert {c["algo.activation"] for c in a} == {"tanh", "relu"}
    # Only 2 x 2 distinct configurations exist: repeats are dropped, order of first draw kept.
    small = expand(parse_sweep(["x=1,2", "y=a,b"]), "random", samples=50)
    assert sorted(map(str, small)) == sorted(map(str, [{"x": i, "y": j} for i in "12" for j in "ab"]))


def test_plan_makes_one_trial_per_configuration_and_seed(tmp_path):
    p = plan_sweep([*SMALL, "algo.lr=1e-3,3e-4", "seeds=3", "seed=7"], out=tmp_path / "s")
    assert [c.values for c in p.configurations] == [{"algo.lr": "1e-3"}, {"algo.lr": "3e-4"}]
    assert len(p.trials) == 6 and len({t.run_dir for t in p.trials}) == 6
    assert [t.seeds for t in p.trials_of(p.configurations[0].id)] == [(7,), (8,), (9,)]
    t = p.trials[1]
    assert t.run_dir == tmp_path / "s" / "trials" / t.id and t.id.endswith("-seed8")
    assert {"seeds=1", "seed=8", f"name={t.id}", "progress=false", "algo.lr=1e-3"} <= set(t.overrides)
    # One compiled run per configuration instead:
    v = plan_sweep([*SMALL, "algo.lr=1e-3,3e-4", "seeds=3"], vmap_seeds=True, out=tmp_path / "v")
    assert [t.seeds for t in v.trials] == [(0, 1, 2), (0, 1, 2)]
    assert "seeds=3" in v.trials[0].overrides
    # Same resolved config, same configuration; the default directory follows from the arguments.
    same = plan_sweep([*SMALL, "algo.lr=1e-3,0.001"])
    assert len(same.configurations) == 1
    assert same.configurations[0].id == p.configurations[0].id
    assert same.sweep_dir == plan_sweep([*SMALL, "algo.lr=1e-3,0.001"]).sweep_dir
    assert same.sweep_dir != plan_sweep([*SMALL, "algo.lr=1e-3,0.002"]).sweep_dir
    assert same.sweep_dir.name.startswith("sweep-ippo-matrix-")


# --- refused before any trial starts ------------------------------------------------------------------------------


@pytest.fixture
def no_ray_start(monkeypatch):
    """Fail the test if the sweep gets as far as Ray or running trials."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("Ray must not be started for a sweep that is refused")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr("coplay.scale.ray_trials.run_trials", refuse)
    was_initialized = ray.is_initialized()
    yield calls
    assert calls == []
    if not was_initialized:
        assert not ray.is_initialized()


@pytest.mark.parametrize("args, words", [
    (["algo.lrr=1e-3,3e-4"], ["lrr", "did you mean 'lr'", "valid choices", "ent_coef"]),
    (["algo.lr=1e-3,-1"], ["algo.lr=-1", "out of range", "> 0"]),          # only the second configuration is bad
    (["algo.activation=tanh,sigmoid"], ["sigmoid", "valid choices", "relu"]),
    (["env.game=climbing,chess"], ["chess", "climbing", "stag_hunt"]),
    (["algo.lr=uniform(1e-4,1e-3)"], ["distribution", "--search random"]),
    (["algo.lr=gauss(0,1)"], ["gauss", "uniform", "loguniform", "randint"]),
    (["seeds=1,2"], ["seeds cannot be swept"]),
    (["out_dir=/tmp/x"], ["out_dir", "--out"]),
    (["algo.lr=1e-3,,3e-4"], ["empty value"]),
])
def test_bad_sweeps_are_refused_before_ray_starts(tmp_path, capsys, no_ray_start, args, words):
    base = [a for a in SMALL if not a.startswith("env.game") or not any(x.startswith("env.game") for x in args)]
    out = tmp_path / "sweep"
    code = main(["sweep", *base, *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    for w in words:
        assert w in err
    assert not out.exists()  # no trial directory, nothing written


def test_unknown_field_raises_the_standard_error(tmp_path, no_ray_start):
    with pytest.raises(UnknownNameError, match="valid choices"):
        sweep([*SMALL, "algo.lrr=1e-3,3e-4"], out=tmp_path / "s")
    with pytest.raises(ConfigError, match="total_steps=10 is smaller than one update"):
        sweep([*(a for a in SMALL if not a.startswith("total_steps")), "total_steps=10", "algo.lr=1e-3,3e-4"],
              out=tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_unreachable_address_is_refused(tmp_path, capsys, no_ray_start):
    code = main(["sweep", *SMALL, "--address", "127.0.0.1:1", "--out", str(tmp_path / "s")])
    assert code == 2 and "cannot reach a Ray cluster at '127.0.0.1:1'" in capsys.readouterr().err
    code = main(["sweep", *SMALL, "--address", "nonsense", "--out", str(tmp_path / "s")])
    assert code == 2 and "not a Ray address" in capsys.readouterr().err


def test_missing_ray_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    monkeypatch.setitem(sys.modules, "ray.tune", None)
    from coplay.interop import MissingExtraError

    with pytest.raises(MissingExtraError, match=r"coplay sweep needs .*pip install coplay\[ray\]"):
        sweep([*SMALL, "algo.lr=1e-3,3e-4"], out=tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_unfinished_trials_are_reported_and_run_again(tmp_path, monkeypatch, capsys):
    """Without Ray: trials run in this process, one of them 'dies'. The finished one is in
    the table and is not run again; the next invocation runs only the other."""
    from coplay.scale.ray_trials import TrialOutcome

    calls: list[list[str]] = []

    def fake_run_trials(fn, trials, **kwargs):
        calls.append(list(trials))
        out = {}
        for trial_id, payload in trials.items():
            if trial_id.endswith("-seed1") and len(calls) == 1:
                out[trial_id] = TrialOutcome(trial_id, finished=False, error="ActorDiedError: worker died")
            else:
                out[trial_id] = TrialOutcome(trial_id, finished=True, metrics=fn(payload))
        return out

    monkeypatch.setattr("coplay.scale.ray_trials.run_trials", fake_run_trials)
    args = ["sweep", *SMALL, "algo.lr=7e-4", "seeds=2", "--out", str(tmp_path / "s")]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "did not finish: ActorDiedError" in captured.err and "| 1/2 |" in captured.out
    table = json.loads((tmp_path / "s" / "sweep.json").read_text())["configurations"]
    assert table[0]["seeds"] == 1 and table[0]["missing"][0].endswith("-seed1")

    assert main(args) == 0
    assert [[t.rsplit("-", 1)[1] for t in c] for c in calls] == [["seed0", "seed1"], ["seed1"]]
    assert "| 2/2 |" in capsys.readouterr().out


# --- real sweeps on a local Ray instance ------------------------------------------------------------------------------


def _summary(trial_dir: str) -> dict:
    return json.loads((Path(trial_dir) / "summary.json").read_text())


@pytest.mark.xdist_group("ray")
@pytest.mark.slow
def test_sweep_gathers_every_configuration(tmp_path, local_ray):
    out = tmp_path / "sweep"
    result = sweep([*SMALL, "algo.lr=7e-4,3e-4", "seeds=2"], out=out, verbose=0)
    assert result.failed == {} and len(result.ran) == 4
    assert [r["values"] for r in result.table] == [{"algo.lr": "7e-4"}, {"algo.lr": "3e-4"}]
    for row in result.table:
        ret = row["return"]
        assert row["seeds"] == row["seeds_expected"] == 2 and row["missing"] == []
        assert ret["n"] == 2 and ret["ci_low"] <= ret["iqm"] <= ret["ci_high"]
        # Each trial is a one-seed coplay run; the table pools their final returns.
        assert ret["per_seed"] == [_summary(t["run_dir"])["final"]["return"]["per_seed"][0] for t in row["trials"]]
        assert all(_summary(t["run_dir"])["seeds"] == 1 for t in row["trials"])
        assert all(len(t["attempts"]) == 1 and t["attempts"][0]["resumed_at_chunk"] is None for t in row["trials"])
    for name in ("sweep.md", "sweep.csv", "sweep.json", "sweep.png", "sweep.yaml"):
        assert (out / name).is_file(), name
    md = (out / "sweep.md").read_text()
    for row in result.table:
        assert row["config"] in md and f"{row['return']['iqm']:.3f}" in md
    with (out / "sweep.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["algo.lr"] for r in rows] == ["7e-4", "3e-4"] and all(r["seeds"] == "2" for r in rows)
    assert json.loads((out / "sweep.json").read_text())["configurations"][0]["final"]["return"]["n"] == 2

    # The same sweep again runs nothing: every trial left its summary.
    again = sweep([*SMALL, "algo.lr=7e-4,3e-4", "seeds=2"], out=out, verbose=0)
    assert again.ran == [] and again.failed == {}
    assert [r["return"] for r in again.table] == [r["return"] for r in result.table]
    assert all(len(read_attempts(Path(t["run_dir"]), t["id"])) == 1 for r in again.table for t in r["trials"])


def _kill_after_first_checkpoint(run_dir: Path, trial_id: str, record: dict) -> None:
    """Wait for the trial's first checkpoint, then SIGKILL the Ray worker process running it."""
    while not list((run_dir / "checkpoints").glob("ckpt_*.msgpack")):
        time.sleep(0.01)
    pid = read_attempts(run_dir, trial_id)[0]["pid"]
    record["cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    record["finished_before_kill"] = (run_dir / "summary.json").exists()
    os.kill(pid, signal.SIGKILL)
    record["pid"] = pid


@pytest.mark.xdist_group("ray")
@pytest.mark.slow
def test_killed_worker_resumes_from_its_checkpoint(tmp_path, local_ray):
    # The victim runs 60 chunks: after the first (compiling) one each takes tens of milliseconds,
    # and the kill (polled every 10 ms) must land while the run is still going. The other
    # configuration is a run of 4 chunks.
    args = [*(a for a in SMALL if not a.startswith("total_steps")), "total_steps=24000,1600", "seeds=1"]
    out = tmp_path / "sweep"
    victim = plan_sweep(args, out=out).trials[0]
    record: dict = {}
    killer = threading.Thread(target=_kill_after_first_checkpoint, args=(victim.run_dir, victim.id, record),
                              daemon=True)
    killer.start()
    result = sweep(args, out=out, max_failures=2, verbose=0)
    killer.join(timeout=0)
    assert "pid" in record, "the worker was never killed"
    assert record["pid"] != os.getpid() and "ray::" in record["cmdline"]  # a Ray worker, not this process
    assert not record["finished_before_kill"]
    assert not Path(f"/proc/{record['pid']}").exists() or "Z" in Path(f"/proc/{record['pid']}/stat").read_text()

    # Tune retried the trial in a new worker, which resumed from a checkpoint past chunk 0.
    attempts = read_attempts(victim.run_dir, victim.id)
    assert len(attempts) == 2
    assert attempts[0]["pid"] == record["pid"] and attempts[0]["resumed_at_chunk"] is None
    assert attempts[1]["pid"] != record["pid"] and attempts[1]["resumed_at_chunk"] >= 1
    # metrics.csv holds every chunk exactly once: the resumed run continued, it did not start over.
    with (victim.run_dir / "metrics.csv").open() as f:
        chunks = [int(r["chunk"]) for r in csv.DictReader(f)]
    assert chunks == list(range(60))

    # Every trial finished and every configuration is in the table.
    assert result.failed == {}
    assert [r["values"]["total_steps"] for r in result.table] == ["24000", "1600"]
    assert all(r["seeds"] == 1 and r["return"] is not None for r in result.table)
    killed_row = next(r for r in result.table if r["config"] == victim.config)
    assert [len(t["attempts"]) for t in killed_row["trials"]] == [2]
    assert (out / "sweep.md").read_text().count("| 1/1 |") == 2

