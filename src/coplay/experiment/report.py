"""What a run leaves behind besides checkpoints: metrics.csv, TensorBoard events,
summary.json, curve.png and marl_eval.json; for a solver's run, curve.csv and
its curve.png."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from coplay.eval.stats import SUMMARY_REPS, iqm_ci
from coplay.experiment.checkpoint import atomic_write

CSV_NAME = "metrics.csv"


class MetricsLog:
    """metrics.csv: one row per log step (chunk) and seed. On resume, rows past the
    checkpoint are dropped so the file matches an uninterrupted run's."""

    def __init__(self, run_dir: Path, logger: str = "tensorboard", config: dict | None = None):
        """`logger`: `RunConfig.logger` (tensorboard, wandb, both joined by '+', or csv
        alone); `config`: what a W&B run records as its config."""
        self.path = Path(run_dir) / CSV_NAME
        self.columns: list[str] | None = None
        self.writer = None
        self.wandb = None
        names = logger.split("+")
        if "tensorboard" in names:
            from tensorboardX import SummaryWriter

            self.writer = SummaryWriter(str(run_dir), flush_secs=10)
        if "wandb" in names:
            self.wandb = start_wandb(Path(run_dir), config or {})

    def truncate(self, max_chunk: int) -> None:
        if not self.path.exists():
            return
        with self.path.open() as f:
            rows = list(csv.DictReader(f))
        keep = [r for r in rows if int(r["chunk"]) <= max_chunk]
        if not rows:
            return
        columns = list(rows[0].keys())
        text = _csv_text(columns, keep)
        atomic_write(self.path, text.encode())
        self.columns = columns

    def write(self, chunk: int, env_steps: int, per_seed: dict[str, np.ndarray], wall_time: float) -> None:
        """per_seed: name -> [S] values for this log step."""
        names = sorted(per_seed)
        if self.columns is None:
            self.columns = ["chunk", "env_steps", "seed", *names, "wall_time"]
            if not self.path.exists():
                self.path.write_text(_csv_text(self.columns, []))
        seeds = len(next(iter(per_seed.values())))
        with self.path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.columns, extrasaction="ignore")
            for s in range(seeds):
                row = {"chunk": chunk, "env_steps": env_steps, "seed": s, "wall_time": f"{wall_time:.3f}"}
                row.update({k: _fmt(per_seed[k][s]) for k in names})
                w.writerow(row)
        scalars: dict[str, float] = {}
        for k in names:
            vals = np.asarray(per_seed[k], np.float64)
            if np.any(np.isfinite(vals)):
                scalars[f"{k}/mean"] = float(np.nanmean(vals))
            scalars.update({f"{k}/seed{s}": float(v) for s, v in enumerate(vals) if math.isfinite(v)})
        if self.writer is not None:
            for k, v in scalars.items():
                self.writer.add_scalar(k, v, env_steps)
        if self.wandb is not None:
            self.wandb.log({**scalars, "env_steps": env_steps}, step=env_steps)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.wandb is not None:
            self.wandb.finish()


def start_wandb(run_dir: Path, config: dict):
    """A Weights & Biases run for `run_dir`, its files under it: offline unless the
    environment's WANDB_MODE says otherwise (`wandb sync <run dir>/wandb/offline-run-*`
    uploads it later), its id the run directory's name, so that a resumed run goes on
    logging into the same W&B run."""
    import os
    import re

    from coplay.interop.extras import require

    wandb = require("wandb", "wandb", "logger=wandb")
    run_id = re.sub(r"[^A-Za-z0-9_-]", "-", run_dir.name)[-64:]
    return wandb.init(project=os.environ.get("WANDB_PROJECT", "coplay"), name=run_dir.name, id=run_id,
                      dir=str(run_dir), config=config, mode=os.environ.get("WANDB_MODE", "offline"),
                      resume="allow", reinit="create_new")   # wandb >= 0.19


def _fmt(v) -> str:
    return repr(float(v))


def _csv_text(columns: list[str], rows: list[dict]) -> str:
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    """A whole CSV file, written atomically."""
    atomic_write(Path(path), _csv_text(columns, rows).encode())


def read_metrics(run_dir: Path) -> list[dict]:
    with (Path(run_dir) / CSV_NAME).open() as f:
        return list(csv.DictReader(f))


def curve(rows: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """(env_steps [P], values [S, P]) for a metric column, log steps where it is present."""
    by_chunk: dict[int, dict[int, float]] = {}
    steps: dict[int, int] = {}
    for r in rows:
        v = r.get(key, "")
        if v in ("", None):
            continue
        c = int(r["chunk"])
        by_chunk.setdefault(c, {})[int(r["seed"])] = float(v)
        steps[c] = int(r["env_steps"])
    chunks = sorted(c for c in by_chunk if all(math.isfinite(x) for x in by_chunk[c].values()))
    if not chunks:
        return np.zeros(0), np.zeros((0, 0))
    seeds = sorted(by_chunk[chunks[0]])
    values = np.array([[by_chunk[c].get(s, np.nan) for c in chunks] for s in seeds])
    return np.array([steps[c] for c in chunks]), values


def plot_curve(run_dir: Path, rows: list[dict], key: str | Sequence[str], title: str,
               file: str = "curve.png", ylabel: str | None = None,
               xlabel: str = "environment steps (per seed)", baseline: float | None = None) -> Path | None:
    """The learning curve of metric `key` (IQM over seeds, 95% bootstrap CI), or one
    panel per metric side by side when `key` is several (each objective's, say);
    None when no row has the metric. `ylabel`: the metric in words (one key);
    `baseline`: a uniformly random policy's value, drawn as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [key] if isinstance(key, str) else list(key)
    found = [(k, *curve(rows, k)) for k in keys]
    found = [(k, steps, values) for k, steps, values in found if steps.size]
    if not found:
        return None
    fig, axes = plt.subplots(1, len(found), figsize=(6 * len(found), 4), dpi=100, squeeze=False)
    for ax, (k, steps, values) in zip(axes[0], found):
        draw_band(ax, steps, values, "C0", f"IQM over {values.shape[0]} seeds", ci_label="95% bootstrap CI")
        if baseline is not None and math.isfinite(baseline):
            ax.axhline(baseline, color="0.4", linestyle="--", linewidth=1, label="uniformly random policy")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel if ylabel is not None and len(found) == 1 else k)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    return save_figure(fig, Path(run_dir) / file)


def plot_series(path: Path, steps: np.ndarray, values: np.ndarray, xlabel: str, ylabel: str, title: str) -> Path:
    """One curve, `values` [P] against `steps` [P]; on a log scale when every value is
    positive (exploitability falls by orders of magnitude)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(steps, values, color="C0", marker="." if len(steps) <= 60 else None)
    if np.all(np.asarray(values) > 0):
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    return save_figure(fig, Path(path))


def draw_band(ax, steps: np.ndarray, values: np.ndarray, color: str, label: str, ci_label: str | None = None) -> None:
    """Draw a learning curve on `ax`: the IQM over runs with its 95% bootstrap CI as a band.
    steps: [P]; values: [runs, P]."""
    est = iqm_ci(values, reps=2000)
    mid = np.array([e.value for e in est])
    lo = np.array([e.low for e in est])
    hi = np.array([e.high for e in est])
    ax.plot(steps, mid, color=color, label=label)
    ax.fill_between(steps, lo, hi, color=color, alpha=0.25, label=ci_label)


def save_figure(fig, path: Path) -> Path:
    """Save and close a matplotlib figure; written under a temporary name and renamed,
    so a reader never sees half a file."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return path


def write_summary(run_dir: Path, final: dict[str, np.ndarray], extra: dict) -> dict:
    """final: name -> [S, episodes] evaluation results. Each seed's mean over its
    episodes is one run; the headline is the IQM over seeds with a 95% CI."""
    summary = dict(extra)
    names = list(final)
    per_seed = np.stack([np.asarray(final[k], np.float64).mean(axis=-1) for k in names], axis=1)  # [S, metrics]
    # One bootstrap call for every metric (runs are resampled within each column), not one call per metric.
    estimates = iqm_ci(per_seed, reps=SUMMARY_REPS)
    summary["final"] = {k: {**est.as_dict(), "per_seed": per_seed[:, i].tolist()}
                        for i, (k, est) in enumerate(zip(names, estimates))}
    atomic_write(Path(run_dir) / "summary.json", json.dumps(summary, indent=2).encode())
    return summary


def write_marl_eval(run_dir: Path, env_name: str, task_name: str, algo: str,
                    evals: list[tuple[int, dict[str, np.ndarray]]]) -> None:
    """marl-eval's raw JSON: env -> task -> algo -> run -> step_i -> {step_count,
    metric: [per-episode values]}, plus absolute_metrics from the final evaluation."""
    runs: dict[str, dict] = {}
    if not evals:
        return
    seeds = np.asarray(next(iter(evals[-1][1].values()))).shape[0]
    for s in range(seeds):
        run = {}
        for i, (step_count, metrics) in enumerate(evals):
            entry = {"step_count": int(step_count)}
            entry.update({k: np.asarray(v[s], np.float64).tolist() for k, v in metrics.items()})
            run[f"step_{i}"] = entry
        run["absolute_metrics"] = {k: np.asarray(v[s], np.float64).tolist() for k, v in evals[-1][1].items()}
        runs[f"seed_{s}"] = run
    data = {env_name: {task_name: {algo: runs}}}
    atomic_write(Path(run_dir) / "marl_eval.json", json.dumps(data).encode())
