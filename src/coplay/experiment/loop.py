"""The one run loop: whatever engine trains, a run is chunks of updates with
logging, evaluation and checkpoints between them.

    for chunk in chunks:
        metrics = engine.train_chunk(chunk)          # name -> [S, updates]
        results = engine.evaluate(chunk, last)       # name -> [S, episodes], every eval_every chunks
        log, checkpoint (state, evaluation history, health), progress

An `Engine` is what differs between learners: the compiled engine
(`coplay.experiment.compiled`) runs a `Trainer`'s `update` as one program over
every seed; the host engine (`coplay.experiment.host`) calls a `HostTrainer`
seed by seed. The loop owns everything else, once: resume from the newest usable
checkpoint, the metrics log, the non-finite and health checks, the interrupt
guard, checkpoint cadence, the evaluation history (kept in every checkpoint's
metadata, so a resumed run's marl_eval.json and curve hold every evaluation),
the summary and the plots.

Evaluation draws its keys from (seed, chunk), never from the training state, so
evaluating does not change what is learned."""

from __future__ import annotations

import abc
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.core.errors import CheckpointConfigError, CheckpointError, ConfigError, TrainingError
from coplay.core.policy import Policy
from coplay.core.registry import ENVS
from coplay.experiment import checkpoint
from coplay.experiment.config import Experiment, result_dict, resume_differences, upgrade_stored
from coplay.experiment.headline import Headline, headline_of
from coplay.experiment.health import HealthWatch
from coplay.experiment.report import MetricsLog, plot_curve, read_metrics, write_marl_eval, write_summary
from coplay.experiment.rundir import interrupt_guard, resume_command


@dataclass
class RunResult:
    run_dir: Path
    summary: dict
    interrupted: bool = False
    state: Any = field(default=None, repr=False)  # the final state: a TrainState with the seeds on the leading axis

    @property
    def final_return(self) -> dict:
        return self.summary.get("final", {}).get("return", {})


Evaluation = dict[str, np.ndarray]   # name -> [S, episodes]


class Engine(abc.ABC):
    """What runs a learner's updates and evaluations; built from a validated
    Experiment before any run directory exists (everything that can be refused is
    refused then). The loop calls, in order: `restore` (when resuming from a
    checkpoint), `start`, then `train_chunk` / `evaluate` / `state` per chunk, and
    `finish` once; `close` always."""

    exp: Experiment
    learner: Any            # the Trainer or HostTrainer
    schedule: Schedule

    @property
    def updates_per_chunk(self) -> int:
        return self.schedule.updates_per_chunk

    @property
    def num_chunks(self) -> int:
        return self.schedule.num_chunks

    @property
    def wins(self) -> str | None:
        """What a `win` of the evaluation means: "rivals" (a game of several teams, won
        against random play), "team" (one team that reports its own wins in `info["win"]`:
        SMAX against its built-in enemy), or None (one team that reports none: a win means
        nothing there)."""
        env = getattr(self.learner, "env", None)
        if env is None or len(set(env.spec.teams)) > 1:
            return "rivals"
        if env.spec.turn_based:
            return None
        _, ts = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
        return "team" if "win" in ts.info else None

    @property
    def steps_per_update(self) -> int:
        return int(self.learner.steps_per_update)

    @property
    def steps_per_chunk(self) -> int:
        return self.updates_per_chunk * self.steps_per_update

    @abc.abstractmethod
    def restore(self, directory: Path) -> tuple[dict, Path]:
        """Load the newest usable checkpoint in `directory`: (its metadata, its path)."""

    @abc.abstractmethod
    def start(self, chunk: int) -> None:
        """Ready to train from chunk `chunk` (fresh or restored)."""

    @abc.abstractmethod
    def train_chunk(self, chunk: int) -> dict[str, np.ndarray]:
        """`schedule.updates_in(chunk)` updates of every seed: name -> `[S, updates]`."""

    @abc.abstractmethod
    def evaluate(self, chunk: int, last: bool) -> Evaluation:
        """Every seed's evaluation after chunk `chunk`: name -> `[S, episodes]`."""

    @abc.abstractmethod
    def state(self) -> Any:
        """What a checkpoint holds: the whole truth of the run's learning."""

    def finish(self, run_dir: Path, rows: list[dict], evals: list[tuple[int, Evaluation]]) -> dict:
        """Files and summary fields of this engine's kind of run, once it has finished."""
        return {}

    def close(self) -> None:  # noqa: B027 - an engine that holds nothing releases nothing
        """Release what the engine holds (host-stepped environments, worker processes)."""

    # ----- playing a finished run (`coplay eval`, tournaments) ------------------------------------
    @abc.abstractmethod
    def policy(self) -> Policy:
        """The policy the learner plays."""

    @abc.abstractmethod
    def policy_params(self) -> Any:
        """Every seed's parameters of `policy()`, the seeds on the leading axis."""

    @abc.abstractmethod
    def fresh_evaluation(self, episodes: int, seed: int) -> Evaluation:
        """Every seed's evaluation on `episodes` fresh episodes drawn from `seed`: name -> `[S, episodes]`."""

    def front(self, results: Evaluation) -> dict | None:
        """A trainer of several objectives: each seed's front (`points [S, P, K]`), the run's
        `reference` point and the fronts' `quality`; None otherwise."""
        return None

    def baseline(self, headline: Headline) -> float | None:
        """A uniformly random policy's score on `headline` (`coplay.experiment.headline`);
        None where there is none to compute."""
        return None

    def dialogues(self, count: int, seed: int) -> list[list[str]]:
        """Up to `count` episodes of seed 0 as lines of text, on a text environment."""
        return []

    def frames(self, seed: int) -> list[np.ndarray]:
        """One episode of seed 0 as rendered RGB frames, where the environment renders."""
        return []


@dataclass(frozen=True)
class Schedule:
    """How a run's updates fall into chunks: `num_updates` in all, `updates_per_chunk` in
    every chunk but the last, which holds what is left (at least one update)."""

    per_update: int           # environment steps (gradient steps, episodes) per seed in one update
    updates_per_chunk: int
    num_chunks: int
    num_updates: int

    def updates_in(self, chunk: int) -> int:
        return min(self.updates_per_chunk, self.num_updates - chunk * self.updates_per_chunk)

    def steps_after(self, chunk: int) -> int:
        """Steps per seed once chunk `chunk` has run."""
        return min((chunk + 1) * self.updates_per_chunk, self.num_updates) * self.per_update


def chunk_schedule(exp: Experiment, spec: Any) -> Schedule:
    """The schedule of `exp` on an environment of `spec`: `total_steps // per_update`
    updates (the budget, less under one update), in chunks of at most `chunk_steps`
    balanced so that the last is not a sliver; refused where the run is shorter than one update."""
    run = exp.run
    per_update = exp.algo_config.update_steps(spec)
    if run.total_steps < per_update:
        raise ConfigError(f"total_steps={run.total_steps} is smaller than one update "
                          f"({per_update} environment steps per seed); raise total_steps")
    num_updates = run.total_steps // per_update
    most = max(1, min(run.chunk_steps // per_update, num_updates))
    per_chunk = math.ceil(num_updates / math.ceil(num_updates / most))
    return Schedule(per_update, per_chunk, math.ceil(num_updates / per_chunk), num_updates)


def evaluates_after(exp: Experiment, num_chunks: int, chunk: int) -> bool:
    """Whether the run evaluates after chunk `chunk`: every `eval_every` chunks, and after the last."""
    every = exp.run.eval_every
    return chunk == num_chunks - 1 or bool(every and (chunk + 1) % every == 0)


# ----- checkpoints of a config --------------------------------------------------------------------


def _get(d: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def config_key(exp: Experiment) -> str:
    """What a checkpoint records of the config that wrote it: the fields that change results."""
    return json.dumps(result_dict(exp), sort_keys=True)


def check_checkpoint_config(meta: dict, exp: Experiment, path: Path) -> None:
    """Refuse a checkpoint written by another config than `exp`. Both are read through
    today's config classes, so a checkpoint whose config was written by an older
    coplay (fields since added, renamed or dropped) is compared by meaning."""
    try:
        stored = Experiment.from_dict(upgrade_stored(json.loads(meta["config"])))
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path} does not record a readable config ({e})") from e
    if result_dict(stored) != result_dict(exp):
        a, b = result_dict(stored), result_dict(exp)
        detail = ", ".join(f"{d}: checkpoint has {_get(a, d)!r}, config has {_get(b, d)!r}"
                           for d in resume_differences(stored, exp))
        raise CheckpointConfigError(f"checkpoint {path} was written by a different config ({detail})")


def differences(stored: Experiment, requested: Experiment) -> str:
    """The fields where `requested` differs from a run's `stored` config, for a refusal."""
    a, b = stored.to_dict(), requested.to_dict()
    return ", ".join(f"{d}: run has {_get(a, d)!r}, requested {_get(b, d)!r}"
                     for d in resume_differences(stored, requested))


def latest_checkpoint(directory: Path, target: Any, exp: Experiment, may_be_new: Any = None) -> tuple[Any, dict, Path]:
    """The newest usable checkpoint of `exp`'s run in `directory`, restored into
    `target`'s structure; refused when another config wrote it (`checkpoint.latest`)."""
    return checkpoint.latest(directory, target, lambda m, f: check_checkpoint_config(m, exp, f),
                             may_be_new=may_be_new)


# ----- the evaluation history ---------------------------------------------------------------------


def _history(evals: list[tuple[int, Evaluation]]) -> list:
    return [(int(s), {k: np.asarray(v).tolist() for k, v in e.items()}) for s, e in evals]


def _read_history(meta: dict, run_dir: Path, max_steps: int) -> list[tuple[int, Evaluation]]:
    """The evaluations a resumed run made before: from the checkpoint's metadata, or,
    for a checkpoint written before coplay kept them there, from marl_eval.json."""
    if "evals" in meta:
        return [(int(s), {k: np.asarray(v) for k, v in e.items()}) for s, e in meta["evals"]]
    return _legacy_history(run_dir, max_steps)


def _legacy_history(run_dir: Path, max_steps: int) -> list[tuple[int, Evaluation]]:
    """The evaluations recorded in an older run's marl_eval.json. A damaged file is set
    aside as marl_eval.json.damaged, with a warning: the run resumes and its later
    evaluations are kept, the earlier ones are in the damaged file."""
    path = run_dir / "marl_eval.json"
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
        (env_data,) = data.values()
        (task,) = env_data.values()
        (runs,) = task.values()
        seeds = sorted(runs, key=lambda s: int(s.split("_")[1]))
        steps = sorted((k for k in runs[seeds[0]] if k.startswith("step_")), key=lambda s: int(s.split("_")[1]))
        evals = []
        for step in steps:
            count = runs[seeds[0]][step]["step_count"]
            if count > max_steps:
                continue
            names = [k for k in runs[seeds[0]][step] if k != "step_count"]
            evals.append((count, {k: np.array([runs[s][step][k] for s in seeds]) for k in names}))
        return evals
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        aside = path.with_name(path.name + ".damaged")
        path.replace(aside)
        print(f"warning: {path} is damaged ({type(e).__name__}: {e}); it is kept as {aside.name}, and "
              f"marl_eval.json starts again with this part's evaluations", file=sys.stderr, flush=True)
        return []


def task_name(exp: Experiment) -> str:
    """The environment's parameters that differ from their defaults (marl-eval's task)."""
    defaults = ENVS.parameters(exp.env)
    changed = [f"{k}={v}" for k, v in exp.env_config.items() if defaults.get(k) != v]
    return ",".join(changed) or "default"


# ----- per chunk ----------------------------------------------------------------------------------


def nanmean(v: np.ndarray) -> np.ndarray:
    """The mean over the last axis of the finite values (NaN where there is none)."""
    v = np.asarray(v, np.float64)
    with np.errstate(all="ignore"):
        counts = np.sum(np.isfinite(v), axis=-1)
        sums = np.nansum(v, axis=-1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def check_finite(metrics: dict, chunk: int, engine: Engine, run_dir: Path) -> None:
    """Stop the run where a loss or the gradient norm became NaN or infinite, saying where. A
    learner that reports `learning` (the Q family, 0 while its replay buffer fills) has no
    loss in the updates that took no gradient step: their NaN is not a failure."""
    watched = sorted(k for k in metrics if k.startswith("loss/")) + [k for k in metrics if k == "grad_norm"]
    learned = np.asarray(metrics["learning"]) > 0 if "learning" in metrics else True
    for name in watched:
        values = np.asarray(metrics[name])
        bad = ~np.isfinite(values) & learned
        if bad.any():
            seed, update = map(int, np.argwhere(bad)[0])
            at = chunk * engine.updates_per_chunk + update
            raise TrainingError(
                f"{name} became {values[seed, update]} in seed {seed} at update {at} "
                f"(chunk {chunk}, env step ~{at * engine.steps_per_update}); "
                + (f"the last good checkpoint is in {run_dir / 'checkpoints'}. "
                   if checkpoint.list_checkpoints(run_dir / "checkpoints") else "no checkpoint was written yet. ")
                + "Try a lower algo.lr or check the environment's rewards."
            )


def _progress(exp: Experiment, engine: Engine, start_chunk: int):
    if not exp.run.progress:
        return None
    from tqdm import tqdm

    total = engine.schedule.num_updates * engine.steps_per_update
    return tqdm(total=total, initial=start_chunk * engine.steps_per_chunk, unit="step", unit_scale=True,
                desc=f"{exp.algo}/{exp.env}, {exp.run.seeds} seeds (steps per seed)", dynamic_ncols=True)


def _advance(bar, engine: Engine, chunk: int, per_seed: dict) -> None:
    if bar is None:
        return
    from coplay.eval.stats import iqm

    shown = headline_of((k[len("eval/"):] for k in per_seed if k.startswith("eval/")), engine.wins).metric
    value = per_seed.get(f"eval/{shown}", per_seed.get(shown))
    finite = value[np.isfinite(value)] if value is not None else np.zeros(0)
    postfix = {}
    if finite.size:
        postfix[shown] = f"{float(iqm(finite)):.{4 if shown in ('exploitability', 'win') else 2}f}"
    bar.set_postfix(postfix, refresh=False)
    bar.update(engine.schedule.updates_in(chunk) * engine.steps_per_update)


# ----- the loop -----------------------------------------------------------------------------------


def run_loop(engine: Engine, run_dir: Path, resumed: bool, stop_after_chunks: int | None = None) -> RunResult:
    """Train `engine`'s run in `run_dir` (new, or resumed from its newest checkpoint) and
    return its result. `stop_after_chunks` stops early as an interrupt would."""
    exp = engine.exp
    ckpt_dir = run_dir / "checkpoints"
    start_chunk = 0
    earlier_s = 0.0  # wall time of the run's earlier parts (a resumed run's clock goes on from there)
    meta: dict = {}
    evals: list[tuple[int, Evaluation]] = []
    if not resumed:
        checkpoint.atomic_write(run_dir / "config.yaml", exp.to_yaml().encode())
    else:
        for directory in (run_dir, ckpt_dir):  # what writes killed mid-way left behind
            checkpoint.remove_temporaries(directory)
        if checkpoint.list_checkpoints(ckpt_dir):
            meta, path = engine.restore(ckpt_dir)
            start_chunk = int(meta["chunk"]) + 1
            earlier_s = float(meta.get("wall_time_s", 0.0))
            evals = _read_history(meta, run_dir, start_chunk * engine.steps_per_chunk)
            if start_chunk >= engine.num_chunks and (run_dir / "summary.json").exists():
                print(f"{run_dir} has finished: nothing to resume", flush=True)
                return RunResult(run_dir, json.loads((run_dir / "summary.json").read_text()), state=engine.state())
            print(f"resuming {run_dir} from {path.name} (chunk {start_chunk}/{engine.num_chunks})", flush=True)
        else:
            print(f"resuming {run_dir}: it stopped before its first checkpoint, so it starts from the beginning",
                  flush=True)
    engine.start(start_chunk)

    log = MetricsLog(run_dir, exp.run.logger, exp.to_dict())
    log.truncate(start_chunk - 1)
    watch = HealthWatch(engine.learner.health(), engine.updates_per_chunk, engine.steps_per_update,
                        meta.get("health"))
    bar = _progress(exp, engine, start_chunk)
    interrupted = False
    t_start = time.time() - earlier_s
    try:
        with interrupt_guard() as interrupt:
            for chunk in range(start_chunk, engine.num_chunks):
                metrics = engine.train_chunk(chunk)                     # name -> [S, updates]
                check_finite(metrics, chunk, engine, run_dir)
                for warning in watch.check(chunk, metrics):
                    print(f"warning: {warning}", file=sys.stderr, flush=True)
                env_steps = engine.schedule.steps_after(chunk)
                per_seed = {k: nanmean(v) for k, v in metrics.items()}
                last = chunk == engine.num_chunks - 1
                if evaluates_after(exp, engine.num_chunks, chunk):
                    results = engine.evaluate(chunk, last)
                    evals.append((env_steps, results))
                    # an episode without a result (a free-text game that raised or was cut short) is NaN:
                    # left out of its seed's mean, never counted as a 0
                    per_seed.update({f"eval/{k}": nanmean(v) for k, v in results.items()})
                    write_marl_eval(run_dir, exp.env, task_name(exp), exp.algo, evals)
                log.write(chunk, env_steps, per_seed, time.time() - t_start)
                stopping = not last and (interrupt.requested or (
                    stop_after_chunks is not None and chunk + 1 - start_chunk >= stop_after_chunks))
                if last or stopping or (chunk + 1) % exp.run.checkpoint_every == 0:
                    checkpoint.save(ckpt_dir, chunk, engine.state(), {
                        "chunk": chunk, "env_steps": env_steps, "config": config_key(exp),
                        "wall_time_s": time.time() - t_start, "health": watch.saved(), "evals": _history(evals)},
                        keep=exp.run.keep_checkpoints)
                _advance(bar, engine, chunk, per_seed)
                if stopping:
                    interrupted = True
                    break
    finally:
        log.close()
        if bar is not None:
            bar.close()

    if interrupted:
        summary = {"interrupted": True, "resume": resume_command(run_dir)}
        return RunResult(run_dir, summary, interrupted=True, state=engine.state())

    rows = read_metrics(run_dir)
    final = evals[-1][1]
    head = headline_of(final, engine.wins)
    baseline = engine.baseline(head)
    wall = time.time() - t_start
    steps = engine.schedule.num_updates * engine.steps_per_update
    unit = engine.learner.config.step_unit
    title = f"{exp.algo} on {exp.env}"
    plot_curve(run_dir, rows, f"eval/{head.metric}", title, ylabel=head.label, xlabel=f"{unit} (per seed)",
               baseline=baseline)
    objectives = [k for k in (rows[0] if rows else {}) if k.startswith(("objective/", "eval/objective/"))]
    if objectives:   # a vector reward: each objective's curve, training and (scalarised runs) evaluation
        plot_curve(run_dir, rows, objectives, title, file="objectives.png", xlabel=f"{unit} (per seed)")
    extra = engine.finish(run_dir, rows, evals)
    summary = write_summary(run_dir, final, {
        "algo": exp.algo, "env": exp.env, "seeds": exp.run.seeds,
        "headline": {**head.as_dict(), "random_baseline": baseline},
        "env_steps_per_seed": steps,
        "step_unit": unit,
        "updates_per_seed": engine.schedule.num_updates,
        "eval_episodes_per_seed": exp.run.eval_episodes,
        "return_convention": engine.learner.return_convention,
        "wall_time_s": round(wall, 2),
        "steps_per_s": round(steps * exp.run.seeds / max(wall, 1e-9), 1),
        "warnings": watch.warnings,
        **extra,
    })
    return RunResult(run_dir, summary, state=engine.state())
