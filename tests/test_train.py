"""End-to-end runs: the run directory, exact resume, Ctrl-C, many seeds, bad input."""

import csv
import errno
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError, StorageError, TrainingError
from coplay.experiment import checkpoint
from coplay.experiment.config import Experiment
from tiny_run import TINY

SMALL = TINY


def _rows(run_dir: Path) -> list[dict]:
    with (run_dir / "metrics.csv").open() as f:
        return [{k: v for k, v in r.items() if k != "wall_time"} for r in csv.DictReader(f)]


def _final_state(run_dir: Path, like):
    state, meta, _ = checkpoint.latest(run_dir / "checkpoints", like)
    return state, meta


def test_run_directory_contents(tmp_path):
    result = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "logger=tensorboard+wandb"])
    d = result.run_dir
    for name in ("config.yaml", "metrics.csv", "summary.json", "curve.png", "marl_eval.json"):
        assert (d / name).is_file(), name
    assert list(d.glob("events.out.tfevents.*"))
    assert list(d.glob("wandb/offline-run-*/run-*.wandb"))   # offline: no network, files in the run directory
    assert checkpoint.list_checkpoints(d / "checkpoints")
    summary = json.loads((d / "summary.json").read_text())
    ret = summary["final"]["return"]
    assert ret["ci_low"] <= ret["iqm"] <= ret["ci_high"] and ret["n"] == 2 and len(ret["per_seed"]) == 2
    rows = _rows(d)
    assert len(rows) == 4 * 2  # 4 chunks x 2 seeds
    marl = json.loads((d / "marl_eval.json").read_text())
    runs = marl["matrix"]["rounds=10"]["ippo"]
    assert sorted(runs) == ["seed_0", "seed_1"]
    assert len(runs["seed_0"]["absolute_metrics"]["return"]) == 4
    assert runs["seed_0"]["step_3"]["step_count"] == 1600
    assert summary["warnings"] == []  # a healthy run is not flagged as diverging
    # The headline: the return, beside a uniformly random policy's on the same game, and the steps that ran.
    assert summary["headline"]["metric"] == "return" and not summary["headline"]["lower_is_better"]
    assert summary["headline"]["random_baseline"] < summary["final"]["return"]["iqm"]
    assert summary["env_steps_per_seed"] == 1600 and summary["steps_per_s"] > 0


def test_resume_is_exact(tmp_path):
    full = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "name=full"])
    part = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "name=part"], stop_after_chunks=2)
    assert part.interrupted
    assert not (part.run_dir / "summary.json").exists()
    resumed = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "name=part", f"resume={part.run_dir}"])
    assert resumed.run_dir == part.run_dir
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(resumed.state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert _rows(full.run_dir) == _rows(resumed.run_dir)
    assert full.summary["final"] == resumed.summary["final"]


def test_a_budget_that_is_not_whole_chunks_runs_to_the_update_and_resumes_exactly(tmp_path):
    # 1,500 steps of 80-step updates: 18 updates (1,440 steps) in chunks of 5, 5, 5 and 3
    ragged = SMALL + ["seeds=2", "total_steps=1500", f"out_dir={tmp_path}"]
    full = coplay.train(ragged + ["name=full"])
    assert full.summary["env_steps_per_seed"] == 1440 and full.summary["updates_per_seed"] == 18
    assert [int(r["env_steps"]) for r in _rows(full.run_dir)][::2] == [400, 800, 1200, 1440]
    part = coplay.train(ragged + ["name=part"], stop_after_chunks=3)
    resumed = coplay.train(ragged + ["name=part", f"resume={part.run_dir}"])
    for a, b in zip(jax.tree.leaves(full.state), jax.tree.leaves(resumed.state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert _rows(full.run_dir) == _rows(resumed.run_dir)


def test_run_directory_names_are_portable_and_a_config_file_is_a_starting_point(tmp_path, capfd):
    from coplay.cli.main import main
    from coplay.experiment.rundir import portable

    assert portable("text:kuhn_poker") == "text_kuhn_poker"
    assert portable("pettingzoo:momaland.envs.beach.mobeach_v0") == "pettingzoo_momaland.envs.beach.mobeach_v0"
    (tmp_path / "base.yaml").write_text("algo:\n  name: ippo\n  hidden_size: 16\nenv:\n  name: matrix\n"
                                        "  game: climbing\nseeds: 1\n")
    assert main(["train", "--config", str(tmp_path / "base.yaml"), "algo.num_envs=8", "algo.rollout_len=10",
                 "total_steps=80", "eval_episodes=2", "progress=false", "logger=csv", f"out_dir={tmp_path}"]) == 0
    out = capfd.readouterr().out
    assert "episode return (summed over steps, mean over agents): " in out and "uniformly random policy: " in out
    assert "80 environment steps per seed x 1 seed in " in out
    (run,) = tmp_path.glob("*-ippo-matrix")
    stored = Experiment.load(run / "config.yaml")
    assert (stored.algo_config.hidden_size, stored.algo_config.num_envs, stored.run.seeds) == (16, 8, 1)
    assert main(["train", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "no config file at" in capfd.readouterr().err


def test_resume_with_other_config_is_refused_and_harmless(tmp_path):
    part = coplay.train(SMALL + [f"out_dir={tmp_path}", "seeds=1"], stop_after_chunks=1)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in part.run_dir.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError, match="algo.lr"):
        coplay.train(SMALL + [f"out_dir={tmp_path}", "seeds=1", "algo.lr=0.1", f"resume={part.run_dir}"])
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in part.run_dir.rglob("*") if p.is_file()}
    assert before == after


def test_ten_seeds_in_one_compiled_run(tmp_path):
    result = coplay.train(SMALL + ["seeds=10", f"out_dir={tmp_path}"])
    assert len(result.final_return["per_seed"]) == 10
    # seeds differ: they are independent runs, not copies
    params = jax.tree.leaves(result.state.params)[0]
    assert not np.allclose(params[0], params[1])


def test_non_finite_loss_stops_with_location(tmp_path, monkeypatch):
    from coplay.envs.mixed.matrix import MatrixGame

    original = MatrixGame._step

    def poisoned(self, state, actions, key):
        state, ts = original(self, state, actions, key)
        return state, ts.replace(reward=ts.reward * np.nan)

    monkeypatch.setattr(MatrixGame, "_step", poisoned)
    with pytest.raises(TrainingError, match=r"loss/\w+ became nan in seed 0 at update 0"):
        coplay.train(SMALL + ["seeds=1", f"out_dir={tmp_path}"])


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "coplay.cli.main", *args], capture_output=True, text=True, **kw)


@pytest.mark.parametrize("args, words", [
    (["train", "env=sprd"], ["unknown environment", "sprd", "spread"]),
    (["train", "algo=qmixx"], ["unknown algorithm", "qmixx", "mappo"]),
    (["train", "algo.lr=-3"], ["algo.lr=-3.0", "out of range"]),
    (["train", "env.n_agents=0"], ["n_agents"]),
])
def test_cli_bad_input_exits_nonzero_with_message(args, words, tmp_path):
    out = _cli(*args, f"out_dir={tmp_path}")
    assert out.returncode == 2, out.stderr
    for w in words:
        assert w in out.stderr
    assert "Traceback" not in out.stderr
    assert not list(tmp_path.iterdir())  # refused before any run directory was made


def test_cli_list_and_help():
    out = _cli("list")
    assert out.returncode == 0
    for name in ("spread", "foraging", "matrix", "mappo", "ippo"):
        assert name in out.stdout
    out = _cli("train", "--help")
    assert out.returncode == 0
    for text in ("algo.lr", "algo.recurrent", "seeds", "total_steps", "env.n_agents", "env.game"):
        assert text in out.stdout


def test_ctrl_c_saves_checkpoint_and_exits_cleanly(tmp_path):
    args = [a for a in SMALL if not a.startswith("total_steps")] + ["total_steps=400000", "seeds=1",
                                                                      f"out_dir={tmp_path}", "name=run"]
    proc = subprocess.Popen([sys.executable, "-m", "coplay.cli.main", "train", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ckpts = tmp_path / "run" / "checkpoints"
    deadline = time.monotonic() + 300
    while not checkpoint.list_checkpoints(ckpts) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "resume with: coplay train resume=" in stdout
    assert "Traceback" not in stderr
    assert checkpoint.list_checkpoints(ckpts)
    # the run continues from there
    resumed = coplay.train(args + [f"resume={tmp_path / 'run'}"], stop_after_chunks=1)
    assert resumed.run_dir == tmp_path / "run"


def test_a_run_stopped_before_its_first_checkpoint_resumes_from_the_start(tmp_path):
    full = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "name=full"])
    early = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "name=early"], stop_after_chunks=1)
    for path in checkpoint.list_checkpoints(early.run_dir / "checkpoints"):
        path.unlink()  # as if it had been killed before its first checkpoint
    resumed = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", f"resume={early.run_dir}"])
    assert _rows(resumed.run_dir) == _rows(full.run_dir)


def test_a_full_disk_midway_is_reported_with_the_last_checkpoint_kept(tmp_path, monkeypatch):
    write = checkpoint.atomic_write

    def full_after_first(path, data):
        if path.name.startswith("ckpt_") and path.name != "ckpt_00000000.msgpack":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write(path, data)

    monkeypatch.setattr(checkpoint, "atomic_write", full_after_first)
    with pytest.raises(StorageError, match=r"No space left on device; the newest checkpoint is "
                                           r".*ckpt_00000000.msgpack. Make room and resume with: coplay train resume="):
        coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "name=full"])
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path / "full" / "checkpoints")] == ["ckpt_00000000.msgpack"]


@pytest.mark.parametrize("out_dir, name, reason", [
    ("{tmp}/a file/runs", "run", "Not a directory"),
    ("/proc/coplay-runs", "run", ""),
    ("{tmp}", "x" * 300, "File name too long"),
])
def test_an_unusable_run_directory_is_refused_before_anything_compiles(tmp_path, monkeypatch, out_dir, name, reason):
    from coplay.experiment import compiled

    (tmp_path / "a file").write_text("not a directory")
    monkeypatch.setattr(compiled, "init_state", lambda p: pytest.fail("compiled before checking out_dir"))
    with pytest.raises(StorageError, match=f"cannot make the run directory .*{reason}"):
        coplay.train(SMALL + [f"out_dir={out_dir.format(tmp=tmp_path)}", f"name={name}"])


def test_the_resume_hint_is_quoted_for_paths_with_spaces(tmp_path):
    part = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path / 'my runs'}", "name=it's mine"],
                        stop_after_chunks=1)
    command = shlex.split(part.summary["resume"])
    assert command == ["coplay", "train", f"resume={part.run_dir}"]


def test_resuming_after_a_hand_edit_names_the_fields_that_differ(tmp_path, capfd):
    from coplay.cli.main import main

    part = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}"], stop_after_chunks=1)
    config = part.run_dir / "config.yaml"
    config.write_text(config.read_text().replace("hidden_size: 16", "hidden_size: 32"))
    assert main(["train", f"resume={part.run_dir}"]) == 2
    err = capfd.readouterr().err
    assert "written by a different config (algo.hidden_size: checkpoint has 16, config has 32)" in err


def test_a_bridged_environment_that_breaks_midway_exits_2_with_its_own_message(tmp_path, capfd):
    pytest.importorskip("pettingzoo")
    from coplay.cli.main import main

    code = main(["train", "algo=ippo", "env=pettingzoo:broken_envs", "env.fault=nan_obs", "env.episode=2",
                 "algo.num_envs=2", "algo.rollout_len=10", "algo.hidden_size=16", "chunk_steps=20",
                 "total_steps=100", "eval_every=0", "eval_episodes=1", "seeds=1", "progress=false",
                 "logger=csv", f"out_dir={tmp_path}", "name=broken"])
    err = capfd.readouterr().err
    assert code == 2, err
    # each copy plays one 10-step episode per chunk: episode 2 breaks in chunk 2, after two checkpoints
    assert "coplay: error: pettingzoo:broken_envs: agent 'a_1' at step 3 returned an observation with 1 " \
           "non-finite entries" in err
    assert "Traceback" not in err and "CpuCallback" not in err
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path / "broken" / "checkpoints")] == [
        "ckpt_00000000.msgpack", "ckpt_00000001.msgpack"]


def test_a_run_that_diverges_without_nan_is_flagged_in_the_log_and_the_summary(tmp_path, capfd):
    result = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "algo.lr=1e3"])
    warnings = result.summary["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("loss/approx_kl reached")
    assert "far beyond the clip range algo.clip_eps=0.2" in warnings[0] and "try a lower algo.lr" in warnings[0]
    assert f"warning: {warnings[0]}" in capfd.readouterr().err
    assert json.loads((result.run_dir / "summary.json").read_text())["warnings"] == warnings


def test_health_watch_flags_ranges_and_growth_once_each():
    from coplay.algos.base import Health
    from coplay.experiment.health import HealthWatch

    watch = HealthWatch(Health(ranges={"loss/entropy": (0.0, 1.1, "at most log 3")}, steady=("loss/value",)),
                        updates_per_chunk=2, steps_per_update=10)
    calm = {"loss/entropy": np.array([[1.0, 1.0], [1.0, 0.9]]), "loss/value": np.array([[2.0, 2.0], [1.0, 1.0]])}
    assert watch.check(0, calm) == []
    wild = {"loss/entropy": np.array([[1.0, 1.0], [1.0, 1.5]]), "loss/value": np.array([[2.0, 2.0], [1e4, 1e4]])}
    new = watch.check(1, wild)
    assert new[0].startswith("loss/entropy reached 1.5 in seed 1 at update 3 (chunk 1, env step ~30)")
    assert new[1].startswith("loss/value grew 1e+04-fold in seed 1, to 1e+04 in chunk 1 from 1 earlier")
    assert watch.check(2, wild) == []  # each measure warns once
    resumed = HealthWatch(watch.health, 2, 10, json.loads(json.dumps(watch.saved())))
    assert resumed.warnings == new and resumed.check(3, wild) == []


def test_damaged_files_of_a_stopped_run_are_reported_and_set_aside(tmp_path, capfd, monkeypatch):
    from coplay.experiment import compiled

    def evaluations(run_dir):   # the steps marl_eval.json records for seed 0
        (env,) = json.loads((run_dir / "marl_eval.json").read_text()).values()
        (task,) = env.values()
        return [v["step_count"] for k, v in task["ippo"]["seed_0"].items() if k.startswith("step_")]

    # The evaluation history travels in the checkpoints: a damaged marl_eval.json is written whole again.
    part = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}"], stop_after_chunks=1)
    (part.run_dir / "marl_eval.json").write_text("{not json")
    resumed = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", f"resume={part.run_dir}"])
    assert "damaged" not in capfd.readouterr().err and evaluations(part.run_dir) == [400, 800, 1200, 1600]
    assert "final" in resumed.summary

    # A checkpoint written before coplay kept the history (no "evals") reads it from marl_eval.json, and a
    # damaged one is set aside: the run goes on, its later evaluations are written again.
    older = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}"], stop_after_chunks=1)
    state, meta = _final_state(older.run_dir, older.state)
    del meta["evals"]
    checkpoint.save(older.run_dir / "checkpoints", meta["chunk"], state, meta)
    (older.run_dir / "marl_eval.json").write_text("{not json")
    resumed = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", f"resume={older.run_dir}"])
    assert "marl_eval.json is damaged" in capfd.readouterr().err
    assert (older.run_dir / "marl_eval.json.damaged").read_text() == "{not json"
    assert "final" in resumed.summary and evaluations(older.run_dir) == [800, 1200, 1600]

    other = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}"], stop_after_chunks=1)
    for path in (other.run_dir / "checkpoints").iterdir():
        path.unlink()
    (other.run_dir / "checkpoints").rmdir()
    (other.run_dir / "checkpoints").write_text("a file where the checkpoints were")
    monkeypatch.setattr(compiled, "init_state", lambda p: pytest.fail("compiled before checking the run directory"))
    with pytest.raises(StorageError, match="checkpoints is not a directory"):
        coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", f"resume={other.run_dir}"])


def test_resuming_a_finished_run_changes_nothing_and_wall_time_counts_every_part(tmp_path, capfd):
    done = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "name=done"])
    before = (done.run_dir / "summary.json").read_bytes()
    again = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", f"resume={done.run_dir}"])
    assert "has finished: nothing to resume" in capfd.readouterr().out
    assert (done.run_dir / "summary.json").read_bytes() == before and again.summary == json.loads(before)

    part = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", "name=part"], stop_after_chunks=2)
    _, meta = _final_state(part.run_dir, part.state)
    time.sleep(1.0)  # the first part's time must show in the total, whatever the second part's
    resumed = coplay.train(SMALL + ["seeds=2", f"out_dir={tmp_path}", f"resume={part.run_dir}"])
    assert resumed.summary["wall_time_s"] >= meta["wall_time_s"] > 0


def test_cli_refuses_a_bad_episode_count_and_takes_overrides_after_flags(tmp_path, capfd):
    from coplay.cli.main import main, parse_args

    assert main(["eval", str(tmp_path), "--episodes", "0"]) == 2
    assert "episodes=0: evaluation needs a whole number of at least 1 episode per seed" in capfd.readouterr().err
    args = parse_args(["sweep", "algo=ippo", "--search", "random", "algo.lr=loguniform(1e-4,1e-2)", "--samples", "2",
                       "seeds=1"])
    assert args.overrides == ["algo=ippo", "algo.lr=loguniform(1e-4,1e-2)", "seeds=1"] and args.samples == 2
    with pytest.raises(SystemExit):
        parse_args(["sweep", "algo=ippo", "--serach", "random"])  # a misspelt flag is still refused
    assert "unrecognized arguments: --serach random" in capfd.readouterr().err


def test_ctrl_c_while_a_run_is_built_exits_130_without_a_traceback(tmp_path, capfd, monkeypatch):
    from coplay.cli.main import main
    from coplay.experiment import compiled

    def interrupted(exp):
        raise KeyboardInterrupt

    monkeypatch.setattr(compiled, "plan", interrupted)
    assert main(["train", *SMALL, f"out_dir={tmp_path}"]) == 130
    err = capfd.readouterr().err
    assert "coplay: interrupted" in err and "Traceback" not in err
