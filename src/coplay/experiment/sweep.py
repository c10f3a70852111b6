"""Sweeps: a grid or random search over config values and seeds, each trial a
coplay run, run as Ray Tune trials; the results gathered into one table and one plot.

    coplay sweep algo=ippo env=matrix algo.lr=1e-3,3e-4 algo.ent_coef=[0,0.01] seeds=3 total_steps=2e5

The grammar is `coplay train`'s, with swept axes:

    key=a,b,c  or  key=[a,b,c]     an axis: grid search takes every value, random search picks one
    key=uniform(a,b)               random search only: uniform on [a, b]
    key=loguniform(a,b)            random search only: log-uniform on [a, b] (a, b > 0)
    key=randint(a,b)               random search only: an integer in [a, b], both ends included
    seeds=N                        seeds per configuration (default 3), numbered seed, seed+1, ...
    seed=S                         the first seed (default 0)

Any key can be an axis, `algo` and `env` included. A configuration is one
assignment of every axis; grid search takes the product of the axes, random
search draws `samples` configurations (duplicates dropped).

Seeds and trials: by default every (configuration, seed) pair is one trial, a
run with `seeds=1 seed=<k>`, so the seeds of a configuration spread over the
workers of a cluster like any other trials. With `vmap_seeds=True` a
configuration is one trial that trains all its seeds in one compiled run
(`seeds=N`, as `coplay train` does), which is faster on one machine with few
configurations. The two modes draw different random numbers for "seed k" (a
one-seed run from `seed=k`, or seed k of an N-seed run from `seed=S`), both
give independent seeds.

Why coplay expands the search itself rather than Tune: every configuration is
then known before Ray starts, so every one is validated up front (a misspelt
field or an out-of-range value is refused with the valid choices before any
trial starts), and every trial has a fixed directory, named after its
configuration's values and a hash of its resolved config:

    <sweep dir>/
      sweep.yaml                   the sweep: arguments, configurations, trials
      trials/<config id>-seed<k>/  one coplay run directory per trial (config.yaml, metrics.csv, summary.json, ...)
      attempts/<trial id>.jsonl    one line per attempt at a trial: pid, host, Ray node id, chunk it resumed at
      tune/                        Ray Tune's own records
      sweep.md, sweep.csv, sweep.json   the gathered table: IQM and 95% bootstrap CI per configuration
      sweep.png                    final return per configuration with CI bars; learning curves with CI bands

Fault tolerance comes from the runs' own checkpoints: a trial whose worker dies
is started again by Tune (`max_failures` times), finds the checkpoints in its
directory and resumes from the last one (exactly, as `coplay train resume=`
does). A trial that finished left summary.json, which the gathering step reads,
so no finished result is lost when a later trial fails; running the same sweep
again (same arguments, same directory) runs only the trials that have not
finished. The default sweep directory is derived from the arguments for that
reason: `runs/sweep-<algo>-<env>-<hash of the arguments>`.

When `algo=` names a game solver (`coplay solve`'s `cfr`, `psro`, `psro_ppo`,
`fictitious_play`), every trial is a solve instead: a `coplay solve` run
directory with `seed=<k>` (the exact solvers are deterministic, so `seeds=1`
is enough for them), validated like a solve before Ray starts, started over
if its worker dies (a solve keeps no checkpoints), and the table reports each
configuration's final exploitability (IQM over seeds, lower is better) with
the solvers' curves in sweep.png. A sweep runs trainers or solvers, not both.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from coplay.core.errors import ConfigError, StorageError, TrainingError
from coplay.core.lock import LOCK_NAME, held
from coplay.eval.stats import SUMMARY_REPS, iqm_ci
from coplay.experiment import checkpoint
from coplay.experiment import solve as solving
from coplay.experiment.checkpoint import atomic_write
from coplay.experiment.outputs import check_output
from coplay.experiment.report import curve, draw_band, read_metrics, save_figure
from coplay.experiment.rundir import check_writable
from coplay.experiment.sweep_plan import SweepPlan, plan_sweep

# --- one trial, in a Ray worker -----------------------------------------------------------------------------------


def run_trial(payload: dict) -> dict:
    """Run (or finish) one trial's coplay run; this is what each Tune trial calls.

    If the run directory holds summary.json, the run finished earlier and is not
    repeated. If it holds checkpoints (an earlier attempt died), the run resumes
    from the last one. If it holds neither (an attempt died before its first
    checkpoint), it starts over. Every attempt is logged to
    `<sweep dir>/attempts/<trial id>.jsonl`. Returns the final return's IQM and
    the whole summary (as JSON text) for Tune to record. A solver's trial (`kind`
    "solve") keeps no checkpoints: an unfinished one starts over."""
    from coplay.experiment.runner import train

    _use_compilation_cache(payload.get("jax_cache_dir"))
    if payload.get("kind") == "solve":
        return _run_solve_trial(payload)
    run_dir = Path(payload["run_dir"])
    summary_path = run_dir / "summary.json"
    resumed_at = None
    if not summary_path.exists():
        overrides = list(payload["overrides"])
        last = checkpoint.list_checkpoints(run_dir / "checkpoints")
        if last:
            resumed_at = int(re.findall(r"\d+", last[-1].name)[0]) + 1
            overrides.append(f"resume={run_dir}")
        elif run_dir.exists():
            shutil.rmtree(run_dir)  # nothing worth keeping, and a fresh run needs its directory free
        _log_attempt(run_dir, payload["trial_id"], resumed_at)
        result = train(overrides)
        if result.interrupted:
            raise TrainingError(f"trial {payload['trial_id']} was interrupted; its checkpoint is in {run_dir}")
    summary = json.loads(summary_path.read_text())
    return {"final_return": float(summary["final"]["return"]["iqm"]), "summary_json": json.dumps(summary)}


def _run_solve_trial(payload: dict) -> dict:
    run_dir = Path(payload["run_dir"])
    summary_path = run_dir / "summary.json"
    if not summary_path.exists():
        if run_dir.exists():
            shutil.rmtree(run_dir)  # an attempt that died mid-solve left nothing to continue from
        _log_attempt(run_dir, payload["trial_id"], None)
        solving.solve(list(payload["overrides"]))
    summary = json.loads(summary_path.read_text())
    return {"final_exploitability": float(summary["final_exploitability"]), "summary_json": json.dumps(summary)}


def _use_compilation_cache(directory: str | None) -> None:
    """Point JAX's persistent compilation cache at the sweep's, unless one is configured already
    (e.g. JAX_COMPILATION_CACHE_DIR); caching every program, as trials are short and repeat them."""
    import jax

    if directory and not jax.config.values["jax_compilation_cache_dir"]:
        jax.config.update("jax_compilation_cache_dir", directory)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _attempts_path(run_dir: Path, trial_id: str) -> Path:
    return run_dir.parent.parent / "attempts" / f"{trial_id}.jsonl"


def _log_attempt(run_dir: Path, trial_id: str, resumed_at: int | None) -> None:
    from coplay.scale.ray_trials import current_node

    # Beside the run directory, not in it: a fresh run must find its directory absent.
    path = _attempts_path(run_dir, trial_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"pid": os.getpid(), "host": socket.gethostname(), "node": current_node(), "time": time.time(),
              "resumed_at_chunk": resumed_at}
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_attempts(run_dir: Path, trial_id: str) -> list[dict]:
    """Every attempt at a trial so far (pid, host, Ray `node` id, time, `resumed_at_chunk`: None for a
    fresh start)."""
    path = _attempts_path(Path(run_dir), trial_id)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- the whole sweep ----------------------------------------------------------------------------------------------


@dataclass
class SweepResult:
    """`table`: one row per configuration (see `gather`); `failed`: trial id -> error
    of the trials that did not finish; `ran`: trials run now (the others had finished before)."""

    sweep_dir: Path
    table: list[dict]
    failed: dict[str, str] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    text: str = ""


def sweep(args: list[str], *, search: str = "grid", samples: int = 8, search_seed: int = 0,
          vmap_seeds: bool = False, out: str | Path | None = None, address: str | None = None,
          num_cpus: int | None = None, cpus_per_trial: float = 1.0, gpus_per_trial: float = 0.0,
          max_failures: int = 2, verbose: int = 1) -> SweepResult:
    """Validate, run the unfinished trials on Ray Tune, gather the table and plot.

    `args`: the sweep grammar (see the module docstring). `address`: None or
    "local" for a local Ray instance, else a running cluster (`auto`,
    `host:port`, `ray://host:port`); on a cluster the sweep directory should be
    on storage that every node reaches, for retries to find their checkpoints.
    Results still come back through Tune when it is not."""
    from coplay.scale import ray_trials as scale

    scale.require_ray()
    p = plan_sweep(args, search=search, samples=samples, search_seed=search_seed, vmap_seeds=vmap_seeds, out=out)
    if max_failures < 0:
        raise ConfigError(f"--max-failures must be >= 0, got {max_failures}")
    if cpus_per_trial <= 0 or gpus_per_trial < 0:
        raise ConfigError(f"--cpus-per-trial must be > 0 and --gpus-per-trial >= 0, "
                          f"got {cpus_per_trial} and {gpus_per_trial}")
    scale.check_address(address)
    check_output(p.sweep_dir, what="sweep directory")
    try:
        p.sweep_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(f"cannot make the sweep directory {p.sweep_dir}: {e.strerror or e}") from None
    check_writable(p.sweep_dir)
    with held(p.sweep_dir / LOCK_NAME, f"the sweep directory {p.sweep_dir}"):
        _write_plan(p, {"samples": samples, "search_seed": search_seed, "vmap_seeds": vmap_seeds})
        todo = {t.id: t.payload() for t in p.trials if not (t.run_dir / "summary.json").exists()}
        outcomes = scale.run_trials(run_trial, todo, storage_dir=p.sweep_dir, name="tune", address=address,
                                    num_cpus=num_cpus, cpus_per_trial=cpus_per_trial,
                                    gpus_per_trial=gpus_per_trial, max_failures=max_failures, verbose=verbose)
    # A trial that finished on a node whose disk this machine cannot see still reported its summary.
    for trial in p.trials:
        o = outcomes.get(trial.id)
        path = trial.run_dir / "summary.json"
        if o is not None and o.finished and not path.exists() and "summary_json" in o.metrics:
            atomic_write(path, o.metrics["summary_json"].encode())
    failed = {tid: (o.error or "did not finish") for tid, o in outcomes.items() if not o.finished}
    table = gather(p)
    text = write_report(p, table)
    return SweepResult(p.sweep_dir, table, failed, list(todo), text)


def _write_plan(p: SweepPlan, options: dict) -> None:
    data = {
        "args": p.args, "search": p.search, **options, "seeds": list(p.seeds),
        "configurations": [{"id": c.id, "values": c.values, "overrides": list(c.overrides)} for c in p.configurations],
        "trials": [{"id": t.id, "config": t.config, "seeds": list(t.seeds), "run_dir": str(t.run_dir)}
                   for t in p.trials],
    }
    atomic_write(p.sweep_dir / "sweep.yaml", yaml.safe_dump(data, sort_keys=False).encode())


def gather(p: SweepPlan) -> list[dict]:
    """One row per configuration, in search order, from the summary.json of its
    finished trials: every final evaluation metric as IQM over all its seeds with
    a 95% stratified bootstrap CI (`return` first), and which trials are missing.

    Row: {"config", "values", "seeds": finished seeds, "seeds_expected",
          "return": {"iqm", "ci_low", "ci_high", "n", "per_seed"}, "final": {metric: same},
          "trials": [{"id", "run_dir", "finished", "attempts"}], "missing": [trial id]}
    A solvers' sweep has "exploitability" (each trial's final exploitability) where a
    training sweep has "return"."""
    headline = p.objective.metric
    rows, columns = [], []  # columns: (row, metric, per-seed values [runs])
    for c in p.configurations:
        per_metric: dict[str, list[float]] = {}
        trials = []
        for t in p.trials_of(c.id):
            path = t.run_dir / "summary.json"
            finished = path.exists()
            if finished:
                summary = json.loads(path.read_text())
                if p.kind == "solve":
                    per_metric.setdefault(headline, []).append(float(summary["final_exploitability"]))
                else:
                    for metric, est in summary["final"].items():
                        per_metric.setdefault(metric, []).extend(est["per_seed"])
            trials.append({"id": t.id, "run_dir": str(t.run_dir), "finished": finished,
                           "attempts": read_attempts(t.run_dir, t.id)})
        row: dict[str, Any] = {
            "config": c.id, "values": c.values, "seeds": len(per_metric.get(headline, [])),
            "seeds_expected": sum(len(t.seeds) for t in p.trials_of(c.id)), headline: None, "final": {},
            "trials": trials, "missing": [t["id"] for t in trials if not t["finished"]]}
        rows.append(row)
        columns += [(row, m, v) for m, v in per_metric.items()]
    # The bootstrap resamples runs within each column, so the columns with the same number of
    # runs (every metric of every complete configuration, as a rule) share one call: one
    # rliable call per column would take seconds each.
    for n in sorted({len(v) for _, _, v in columns}):
        group = [col for col in columns if len(col[2]) == n]
        estimates = iqm_ci(np.array([v for _, _, v in group], np.float64).T, reps=SUMMARY_REPS)
        for (row, metric, values), est in zip(group, estimates):
            row["final"][metric] = {**est.as_dict(), "per_seed": values}
    for row in rows:
        row[headline] = row["final"].get(headline)
    return rows


def write_report(p: SweepPlan, table: list[dict]) -> str:
    """Write sweep.json, sweep.csv, sweep.md and sweep.png; returns the markdown table."""
    d = p.sweep_dir
    atomic_write(d / "sweep.json", json.dumps({"axes": list(p.axes), "configurations": table}, indent=2).encode())
    atomic_write(d / "sweep.csv", _csv(p, table).encode())
    text = _markdown(p, table)
    atomic_write(d / "sweep.md", text.encode())
    plot_sweep(p, table, d / "sweep.png")
    return text


def _cells(est: dict | None, fmt: str) -> tuple[str, str]:
    if est is None:
        return "-", "-"
    return f"{est['iqm']:{fmt}}", f"[{est['ci_low']:{fmt}}, {est['ci_high']:{fmt}}]"


def _markdown(p: SweepPlan, table: list[dict]) -> str:
    """Best configuration first (by IQM of the final return, highest first; of the
    final exploitability, lowest first); unfinished ones last."""
    o = p.objective
    sign = -1.0 if o.higher_is_better else 1.0
    order = sorted(table, key=lambda r: sign * r[o.metric]["iqm"] if r[o.metric] else math.inf)
    head = ["config", *p.axes, "seeds", f"{o.metric} IQM", "95% CI"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in order:
        iqm, ci = _cells(r[o.metric], o.fmt)
        cells = [r["config"], *(r["values"][a] for a in p.axes), f"{r['seeds']}/{r['seeds_expected']}", iqm, ci]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _csv(p: SweepPlan, table: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    m = p.objective.metric
    w.writerow(["config", *p.axes, "seeds", "seeds_expected", f"{m}_iqm", f"{m}_ci_low", f"{m}_ci_high"])
    for r in table:
        ret = r[m] or {}
        w.writerow([r["config"], *(r["values"][a] for a in p.axes), r["seeds"], r["seeds_expected"],
                    *(ret.get(k, "") for k in ("iqm", "ci_low", "ci_high"))])
    return buf.getvalue()


def plot_sweep(p: SweepPlan, table: list[dict], path: Path, key: str | None = None) -> Path | None:
    """Left: final return (or exploitability) per configuration, IQM with 95% CI bars.
    Right: learning curves (`key`, by default the objective's, from each trial's
    metrics.csv, or a solver's curve.csv), IQM with a CI band per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    o = p.objective
    key = key or o.curve_key
    done = [r for r in table if r[o.metric] is not None]
    if not done:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, max(4.0, 0.4 * len(done) + 2)), dpi=100)
    labels = [", ".join(f"{k}={v}" for k, v in r["values"].items()) or r["config"] for r in done]
    ys = np.arange(len(done))[::-1]
    mid = np.array([r[o.metric]["iqm"] for r in done])
    lo = np.array([r[o.metric]["ci_low"] for r in done])
    hi = np.array([r[o.metric]["ci_high"] for r in done])
    colors = [f"C{i % 10}" for i in range(len(done))]
    for y, m, a, b, color in zip(ys, mid, lo, hi, colors):
        left.errorbar([m], [y], xerr=[[m - a], [b - m]], fmt="o", color=color, capsize=4)
    left.set_yticks(ys, labels)
    left.set_ylim(-0.7, len(done) - 0.3)
    if not o.higher_is_better and np.all(lo > 0):
        left.set_xscale("log")
    left.set_xlabel(f"{o.label}: IQM over seeds, 95% bootstrap CI")
    left.grid(alpha=0.3, axis="x")
    positive = True
    for r, label, color in zip(done, labels, colors):
        steps, values = curve(_pooled_rows(p, r), key)
        if steps.size:
            draw_band(right, steps, values, color, f"{label} ({values.shape[0]} seeds)")
            positive = positive and bool(np.all(values > 0))
    right.set_xlabel(o.x_label)
    right.set_ylabel(key)
    right.grid(alpha=0.3)
    if not o.higher_is_better and right.lines and positive:
        right.set_yscale("log")  # exploitability falls by orders of magnitude
    if right.lines:
        right.legend(loc="lower right" if o.higher_is_better else "upper right", fontsize="small")
    fig.suptitle(f"sweep {p.sweep_dir.name}")
    return save_figure(fig, path)


def _pooled_rows(p: SweepPlan, row: dict) -> list[dict]:
    """metrics.csv rows of a configuration's finished trials, with seeds renumbered
    so that the trials' seeds are distinct runs of one curve. A solver's curve.csv
    rows come in the same shape (its points as chunks, its iterations as steps)."""
    rows, offset = [], 0
    curve_file = p.objective.curve_file
    for t in p.trials_of(row["config"]):
        # A trial that finished on a node this machine cannot see has its summary here, not its metrics.
        if not (t.run_dir / "summary.json").exists() or not (t.run_dir / curve_file).exists():
            continue
        if p.kind == "solve":
            with (t.run_dir / curve_file).open() as f:
                rows += [{"chunk": str(i), "env_steps": r["step"], "seed": str(offset), **r}
                         for i, r in enumerate(csv.DictReader(f))]
        else:
            for r in read_metrics(t.run_dir):
                rows.append({**r, "seed": str(offset + int(r["seed"]))})
        offset += len(t.seeds)
    return rows
