"""A training run: many seeds in one compiled loop, chunked so that logging,
evaluation and checkpoints happen between chunks.

    chunk = jit(vmap(scan(update, length=updates_per_chunk)))   # over seeds

The TrainState holds everything the run needs (parameters, optimiser state,
environment states, RNG keys), so a checkpoint at a chunk boundary resumes the
run exactly. Evaluation draws its keys from (seed, chunk), never from the
TrainState, so evaluating does not change what is learned."""

from __future__ import annotations

import errno
import json
import math
import shlex
import signal
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.algos import get_algo
from coplay.algos.base import Trainer, check_env_support
from coplay.algos.common.evaluation import make_evaluator
from coplay.core.compile import jit, jit_once
from coplay.core.config import parse_numbers
from coplay.core.env import Env
from coplay.core.errors import (
    CheckpointConfigError,
    CheckpointError,
    ConfigError,
    CoplayError,
    StorageError,
    TrainingError,
    callback_errors,
)
from coplay.core.registry import ENVS
from coplay.experiment import checkpoint, fronts, warm_start
from coplay.experiment.config import Experiment, parse_overrides, result_dict, resume_differences
from coplay.experiment.health import HealthWatch
from coplay.experiment.report import MetricsLog, plot_curve, read_metrics, write_marl_eval, write_summary
from coplay.lm import LM_KIND
from coplay.nets.init import init_stacked
from coplay.scale.devices import describe, run_mesh, shard_state, state_placement
from coplay.wrappers import Scalarise
from coplay.wrappers.episode_stats import is_info_entry


@dataclass
class RunResult:
    run_dir: Path
    summary: dict
    interrupted: bool = False
    state: Any = field(default=None, repr=False)  # the final TrainState, seeds on the leading axis

    @property
    def final_return(self) -> dict:
        return self.summary.get("final", {}).get("return", {})


@dataclass
class Plan:
    """Everything derived from an Experiment before any compilation."""

    exp: Experiment
    env: Env
    trainer: Trainer
    updates_per_chunk: int
    num_chunks: int
    reference: np.ndarray | None = None   # several objectives: the point each front's hypervolume is taken from

    @property
    def steps_per_chunk(self) -> int:
        return self.updates_per_chunk * self.trainer.steps_per_update


def plan(exp: Experiment) -> Plan:
    """Validate the config, build the environment and trainer; nothing is compiled."""
    exp.validate()
    run = exp.run
    if run.init_params is not None and run.init_from is None:
        raise ConfigError(f"init_params={run.init_params} is read only with init_from=<run directory>")
    if run.scalarise is None and (run.preference is not None or run.utopia is not None):
        raise ConfigError("preference and utopia are read only when scalarising: add scalarise=linear or "
                          "scalarise=chebyshev")
    if run.scalarise is not None and not run.preference:
        raise ConfigError(f"scalarise={run.scalarise} needs the weights of the objectives: preference=0.7:0.3 "
                          "(one number per objective)")
    env = ENVS.make(exp.env, **exp.env_config)
    if run.scalarise is not None and run.preference:
        try:
            env = Scalarise(env, parse_numbers(run.preference), method=run.scalarise,
                            utopia=None if run.utopia is None else parse_numbers(run.utopia))
        except ConfigError as e:
            env.close()
            raise ConfigError(f"scalarise={run.scalarise} preference={run.preference}"
                              + ("" if run.utopia is None else f" utopia={run.utopia}") + f": {e}") from None
    entry = get_algo(exp.algo)
    if entry.kind == LM_KIND:
        env.close()
        check_env_support(env.spec, exp.algo, entry.capabilities)   # an unfit pair: the algorithms that can
        raise ConfigError(f"algo={exp.algo} trains a language model on the host: `coplay train` runs it, and "
                          f"`coplay eval` and `coplay tournament` take its runs; sweeps and datasets (`coplay "
                          f"sweep`, `coplay record`) do not")
    try:
        _, updates_per_chunk, num_chunks = chunk_schedule(exp, env.spec)
    except ConfigError:
        env.close()
        raise
    try:
        trainer = entry.factory(exp.algo_config, env, num_updates=updates_per_chunk * num_chunks)
        if trainer.preferences is None and run.reference_point is not None:
            raise ConfigError(f"reference_point={run.reference_point} is read only by the trainers of several "
                              "objectives, which score fronts (mo_ppo)")
        reference = None if trainer.preferences is None else fronts.reference_point(
            env, None if run.reference_point is None else parse_numbers(run.reference_point))   # refused now if none
    except BaseException:
        env.close()
        raise
    return Plan(exp, env, trainer, updates_per_chunk, num_chunks, reference)


def chunk_schedule(exp: Experiment, spec: Any) -> tuple[int, int, int]:
    """(steps per update, updates per chunk, chunks) of `exp` on an environment of `spec`;
    refused where the run is shorter than one update."""
    run = exp.run
    per_update = exp.algo_config.update_steps(spec)
    if run.total_steps < per_update:
        raise ConfigError(f"total_steps={run.total_steps} is smaller than one update "
                          f"({per_update} environment steps per seed); raise total_steps")
    # A chunk is never longer than the run: total_steps=512 trains 512 steps, not one default chunk of 50,000.
    updates_per_chunk = max(1, min(run.chunk_steps, run.total_steps) // per_update)
    return per_update, updates_per_chunk, max(1, math.ceil(run.total_steps / (updates_per_chunk * per_update)))


def seed_keys(exp: Experiment) -> jax.Array:
    return jax.random.split(jax.random.PRNGKey(exp.run.seed), exp.run.seeds)


def init_state(p: Plan) -> Any:
    """Initial TrainState for every seed, stacked (each seed initialised outside vmap).
    No leaf is weakly typed (as a library's `jnp.array(0)` would be): a checkpoint
    restores strong types, and a resumed run then reuses the fresh run's compiled chunk."""
    state = init_stacked(p.trainer.init, seed_keys(p.exp), top_level=True)
    return jax.tree.map(lambda x: jax.numpy.asarray(x, x.dtype), state)


def place(p: Plan, state: Any) -> Any:
    """The stacked state spread over the visible devices: seeds, then each seed's environments."""
    return shard_state(state, run_mesh(p.exp.run.seeds, p.trainer.num_envs))


# A run of at most this many updates in all (a smoke test, a first try of a config) spends
# its time compiling, not training: its chunk compiles as a program that runs a few times
# (`coplay.core.compile`), about twice as fast.
FEW_UPDATES = 24


def chunk_function(p: Plan, placed: Any = None):
    """`chunk(state) -> (state, metrics)`: `updates_per_chunk` updates of every seed,
    compiled; the state's leaves are `[S, ...]` and the metrics `[S, updates]`.

    `placed`: the state as `place` spread it over several devices; the chunk then
    hands its state back placed the same way, so that the next chunk's input matches
    the first's and the program compiles once (left to XLA, the output's placement
    can differ from the input's in form, and every later call compiled again)."""
    trainer = p.trainer
    placement = state_placement(placed)
    pin: dict[str, Any] = {} if placement is None else {"out_shardings": (placement, None)}

    def one_seed(state):
        return jax.lax.scan(lambda s, _: trainer.update(s), state, None, length=p.updates_per_chunk)

    once = p.num_chunks * p.updates_per_chunk <= FEW_UPDATES
    if p.exp.run.seeds == 1:  # no vmap over a seed axis of size 1: batching costs time in every op
        def only_seed(state):
            out = one_seed(jax.tree.map(lambda x: x[0], state))
            return jax.tree.map(lambda x: x[None], out)

        return jit(only_seed, once=once, donate_argnums=0, **pin)
    return jit(jax.vmap(one_seed), once=once, donate_argnums=0, **pin)


def evaluates_after(p: Plan, chunk: int) -> bool:
    """Whether the run evaluates after chunk `chunk`: every `eval_every` chunks, and after the last."""
    every = p.exp.run.eval_every
    return chunk == p.num_chunks - 1 or bool(every and (chunk + 1) % every == 0)


# A run that evaluates at most this many times, or plays at most this many evaluation
# episodes per seed in all, compiles its evaluator as a program that runs once
# (`coplay.core.compile`): it compiles about twice as fast and runs slower.
FEW_EVALUATIONS = 3
FEW_EVALUATION_EPISODES = 256


def evaluation_function(p: Plan):
    """`evaluate(params [S, ...], keys [S, 2]) -> dict of [S, episodes]`, compiled for
    the evaluations the whole run makes (a resumed run compiles the program its first
    part did, which the compilation cache may already hold)."""
    evaluations = sum(evaluates_after(p, c) for c in range(p.num_chunks))
    few = evaluations <= FEW_EVALUATIONS or evaluations * p.exp.run.eval_episodes <= FEW_EVALUATION_EPISODES
    return jit(jax.vmap(p.trainer.evaluator(p.exp.run.eval_episodes)), once=few)


def uniform_policy_return(config: Experiment | dict | list[str], episodes: int = 512, seed: int = 7) -> float:
    """Mean per-agent episode return of the trainer's own policy with every weight
    zero (uniform over the legal actions, for discrete actions) on the config's
    environment: the baseline a learning result is compared against."""
    p = plan(resolve(config))
    try:
        params = p.trainer.zero_policy_params()
        evaluate = jit_once(make_evaluator(p.trainer.policy(), episodes))
        return float(np.mean(evaluate(params, jax.random.PRNGKey(seed))["return"]))
    finally:
        p.env.close()


def eval_keys(exp: Experiment, chunk: int) -> jax.Array:
    base = jax.random.fold_in(jax.random.PRNGKey(exp.run.seed), 1_000_003 + chunk)
    return jax.random.split(base, exp.run.seeds)


def new_run_dir(out_dir: str | Path, name: str | None, algo: str, env: str) -> Path:
    """Make and return a new run directory under `out_dir`: `name`, by default
    `<time>-<algo>-<env>`, with `-1`, `-2`, ... appended while that exists.
    One that cannot be made or written in is refused (`StorageError`)."""
    out = Path(out_dir)
    name = name or f"{datetime.now():%Y%m%d-%H%M%S}-{algo}-{env}"
    path = out / name
    i = 1
    try:
        while path.exists():  # never write into somebody else's run
            path = out / f"{name}-{i}"
            i += 1
        path.mkdir(parents=True)
    except OSError as e:
        raise StorageError(f"cannot make the run directory {path} (out_dir={str(out_dir)!r}): "
                           f"{_reason(e)}") from None
    try:
        check_writable(path)
    except StorageError:
        path.rmdir()
        raise
    return path


def check_writable(directory: Path) -> None:
    """Refuse a directory in which no file can be written (`StorageError`)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise StorageError(f"cannot write in {directory}: {_reason(e)}") from None


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def resume_command(run_dir: Path) -> str:
    """The command that resumes `run_dir`, quoted for a shell."""
    return f"coplay train resume={shlex.quote(str(run_dir))}"


def _task_name(exp: Experiment) -> str:
    defaults = ENVS.parameters(exp.env)
    changed = [f"{k}={v}" for k, v in exp.env_config.items() if defaults.get(k) != v]
    return ",".join(changed) or "default"


class _Interrupt:
    """First Ctrl-C: finish the chunk, checkpoint, stop. Second: stop at once."""

    def __init__(self):
        self.requested = False

    def __call__(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\ninterrupt: finishing this chunk and saving a checkpoint (Ctrl-C again to abort)",
              file=sys.stderr, flush=True)


@contextmanager
def _sigint(handler):
    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: run without the handler
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def resolve(config: Experiment | dict | list[str] | None = None, **overrides: Any) -> Experiment:
    """Turn any accepted config form into a validated Experiment."""
    if config is None:
        exp = Experiment()
    elif isinstance(config, Experiment):
        exp = config
    elif isinstance(config, dict):
        exp = Experiment.from_dict(config)
    elif isinstance(config, (list, tuple)):
        exp = parse_overrides(list(config))
    else:
        raise ConfigError(f"config must be an Experiment, a dict or a list of key=value overrides, got {type(config)}")
    if overrides:
        exp = parse_overrides([f"{k}={v}" for k, v in overrides.items()], base=exp)
    return exp


def train(config: Experiment | dict | list[str] | None = None, *, stop_after_chunks: int | None = None,
          **overrides: Any) -> RunResult:
    """Train and evaluate; returns the run directory, the summary and the final state.

    `config`: an Experiment, a dict shaped like config.yaml, or key=value strings.
    `stop_after_chunks` stops early as an interrupt would (checkpoint kept), for tests."""
    exp = resolve(config, **overrides)
    resume_dir = Path(exp.run.resume) if exp.run.resume else None
    if resume_dir is not None:
        stored = Experiment.load(resume_dir / "config.yaml")
        diffs = resume_differences(stored, exp)
        if diffs:
            a, b = stored.to_dict(), exp.to_dict()
            detail = ", ".join(f"{d}: run has {_get(a, d)!r}, requested {_get(b, d)!r}" for d in diffs)
            raise ConfigError(f"cannot resume {resume_dir} with a different config ({detail}); "
                              "resume with the run's own config, or start a new run")
    if get_algo(exp.algo).kind == LM_KIND:   # a language model, trained on the host
        from coplay.experiment.lm_run import train_lm

        return train_lm(exp, stop_after_chunks=stop_after_chunks)
    p = plan(exp)  # all validation happens here, before any compilation
    if exp.run.init_from is not None and resume_dir is None:
        try:
            warm_start.check(exp, jax.eval_shape(p.trainer.init, jax.random.PRNGKey(0)))
        except BaseException:
            p.env.close()
            raise
    try:
        with callback_errors():  # a bridged environment's error keeps its type and message
            return _run(p, resume_dir, stop_after_chunks)
    finally:
        p.env.close()  # host-stepped environments hold copies and worker processes


def _run(p: Plan, resume_dir: Path | None, stop_after_chunks: int | None) -> RunResult:
    """The run in a new run directory, or continued in `resume_dir`; a write that
    fails midway (a full disk) is reported as a `StorageError` that says how to resume."""
    exp = p.exp
    if resume_dir is None:
        run_dir = new_run_dir(exp.run.out_dir, exp.run.name, exp.algo, exp.env)
    else:
        run_dir = resume_dir
        for directory in (run_dir, run_dir / "checkpoints"):
            if directory.exists() and not directory.is_dir():
                raise StorageError(f"{directory} is not a directory; a run keeps its checkpoints in one")
            if directory.is_dir():
                check_writable(directory)
    try:
        return _train(p, run_dir, resume_dir is not None, stop_after_chunks)
    except OSError as e:
        if isinstance(e, CoplayError):
            raise
        last = checkpoint.list_checkpoints(run_dir / "checkpoints")
        kept = f"the newest checkpoint is {last[-1]}" if last else "no checkpoint was written yet"
        where = f" {e.filename}" if e.filename else ""
        fix = "Make room" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "Fix that"
        raise StorageError(f"writing{where} in {run_dir} failed: {_reason(e)}; {kept}. {fix} and resume "
                           f"with: {resume_command(run_dir)}") from e


def _train(p: Plan, run_dir: Path, resumed: bool, stop_after_chunks: int | None) -> RunResult:
    exp = p.exp
    resume_dir = run_dir if resumed else None
    ckpt_dir = run_dir / "checkpoints"
    if resume_dir is None:
        checkpoint.atomic_write(run_dir / "config.yaml", exp.to_yaml().encode())

    state = init_state(p)
    start_chunk = 0
    earlier_s = 0.0  # wall time of the run's earlier parts (a resumed run's clock goes on from there)
    meta: dict = {}
    if resume_dir is not None:
        for directory in (run_dir, ckpt_dir):  # what writes killed mid-way left behind
            checkpoint.remove_temporaries(directory)
        if checkpoint.list_checkpoints(ckpt_dir):
            state, meta, path = latest_checkpoint(ckpt_dir, state, exp)
            start_chunk = int(meta["chunk"]) + 1
            earlier_s = float(meta.get("wall_time_s", 0.0))
            if start_chunk >= p.num_chunks and (run_dir / "summary.json").exists():
                print(f"{run_dir} has finished: nothing to resume", flush=True)
                return RunResult(run_dir, json.loads((run_dir / "summary.json").read_text()), state=state)
            print(f"resuming {run_dir} from {path.name} (chunk {start_chunk}/{p.num_chunks})", flush=True)
        else:
            print(f"resuming {run_dir}: it stopped before its first checkpoint, so it starts from the beginning",
                  flush=True)
    if start_chunk == 0 and exp.run.init_from is not None:
        state = warm_start.apply(exp, state)
    state = place(p, state)

    log = MetricsLog(run_dir, exp.run.tensorboard)
    log.truncate(start_chunk - 1)
    evals = _load_evals(run_dir, start_chunk * p.steps_per_chunk) if resume_dir is not None else []
    chunk_fn = chunk_function(p, state)
    eval_fn = evaluation_function(p)
    watch = HealthWatch(p.trainer.health(), p.updates_per_chunk, p.trainer.steps_per_update, meta.get("health"))
    interrupt = _Interrupt()
    bar = _progress(exp, p, start_chunk)
    interrupted = False
    t_start = time.time() - earlier_s
    try:
        with _sigint(interrupt):
            for chunk in range(start_chunk, p.num_chunks):
                t0 = time.time()
                state, metrics = chunk_fn(state)
                metrics = jax.device_get(metrics)                       # name -> [S, updates]
                _check_finite(metrics, chunk, p, run_dir)
                for warning in watch.check(chunk, metrics):
                    print(f"warning: {warning}", file=sys.stderr, flush=True)
                env_steps = (chunk + 1) * p.steps_per_chunk
                per_seed = {k: _nanmean(v) for k, v in metrics.items()}
                last = chunk == p.num_chunks - 1
                if evaluates_after(p, chunk):
                    results = jax.device_get(eval_fn(p.trainer.policy_params(state), eval_keys(exp, chunk)))
                    front = p.trainer.front(results)                     # several objectives: [S, P, K]
                    if front is not None:
                        assert p.reference is not None, "plan() sets it for a trainer with preferences"
                        results.update(fronts.quality(front, p.reference))
                        if not last:   # a trainer may move its preferences where its fronts can still improve
                            moved = p.trainer.after_evaluation(state, front)
                            state = state if moved is state else place(p, moved)
                    evals.append((env_steps, {k: v for k, v in results.items() if k != "finished"}))
                    per_seed.update({f"eval/{k}": v.mean(-1) for k, v in results.items() if k != "finished"})
                    write_marl_eval(run_dir, exp.env, _task_name(exp), exp.algo, evals)
                log.write(chunk, env_steps, per_seed, time.time() - t_start)
                stopping = not last and (interrupt.requested or (
                    stop_after_chunks is not None and chunk + 1 - start_chunk >= stop_after_chunks))
                if last or stopping or (chunk + 1) % exp.run.checkpoint_every == 0:
                    checkpoint.save(ckpt_dir, chunk, state, {"chunk": chunk, "env_steps": env_steps,
                                                             "config": config_key(exp),
                                                             "wall_time_s": time.time() - t_start,
                                                             "health": watch.saved()},
                                    keep=exp.run.keep_checkpoints)
                _advance(bar, p, per_seed, time.time() - t0)
                if stopping:
                    interrupted = True
                    break
    finally:
        log.close()
        if bar is not None:
            bar.close()

    if interrupted:
        summary = {"interrupted": True, "resume": resume_command(run_dir)}
        return RunResult(run_dir, summary, interrupted=True, state=state)

    rows = read_metrics(run_dir)
    plot_curve(run_dir, rows, "eval/return", f"{exp.algo} on {exp.env}")
    objectives = [k for k in (rows[0] if rows else {}) if k.startswith(("objective/", "eval/objective/"))]
    if objectives:   # a vector reward: each objective's curve, training and (scalarised runs) evaluation
        plot_curve(run_dir, rows, objectives, f"{exp.algo} on {exp.env}", file="objectives.png")
    final = evals[-1][1]
    extra: dict[str, Any] = {}
    if p.trainer.preferences is not None:
        points = p.trainer.front(final)
        assert points is not None, "a trainer with preferences returns its front"
        assert p.reference is not None, "plan() sets it for a trainer with preferences"
        extra["front"] = fronts.summary(points, p.env, p.trainer.preferences, p.reference)
        now = p.trainer.weights_of(state)
        if now is not None:   # the weights each seed's policies ended with
            extra["front"]["final_weights"] = np.asarray(now).tolist()
        truth = extra["front"].get("true_front")
        fronts.plot_front(run_dir / "front.png", points, p.env.spec.objective_names,
                          None if truth is None else np.asarray(truth), f"{exp.algo} on {exp.env}: final fronts")
        plot_curve(run_dir, rows, "eval/hypervolume", f"{exp.algo} on {exp.env}", file="hypervolume.png")
    summary = write_summary(run_dir, final, {
        "algo": exp.algo, "env": exp.env, "seeds": exp.run.seeds,
        "env_steps_per_seed": p.num_chunks * p.steps_per_chunk,
        "eval_episodes_per_seed": exp.run.eval_episodes,
        "return_convention": p.trainer.return_convention,
        "wall_time_s": round(time.time() - t_start, 2),
        "devices": describe(exp.run.seeds, p.trainer.num_envs),
        "warnings": watch.warnings,
        **extra,
    })
    return RunResult(run_dir, summary, state=state)


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
        stored = Experiment.from_dict(json.loads(meta["config"]))
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path} does not record a readable config ({e})") from e
    if result_dict(stored) != result_dict(exp):
        a, b = result_dict(stored), result_dict(exp)
        detail = ", ".join(f"{d}: checkpoint has {_get(a, d)!r}, config has {_get(b, d)!r}"
                           for d in resume_differences(stored, exp))
        raise CheckpointConfigError(f"checkpoint {path} was written by a different config ({detail})")


def latest_checkpoint(directory: Path, target: Any, exp: Experiment) -> tuple[Any, dict, Path]:
    """The newest usable checkpoint of `exp`'s run in `directory`, restored into
    `target`'s structure: refused when another config wrote it, and loaded with the
    `info` entries an environment added since starting at zero (`checkpoint.latest`)."""
    return checkpoint.latest(directory, target, lambda m, f: check_checkpoint_config(m, exp, f),
                             may_be_new=is_info_entry)


def _nanmean(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64)
    with np.errstate(all="ignore"):
        counts = np.sum(np.isfinite(v), axis=-1)
        sums = np.nansum(v, axis=-1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _check_finite(metrics: dict, chunk: int, p: Plan, run_dir: Path) -> None:
    watched = sorted(k for k in metrics if k.startswith("loss/")) + [k for k in metrics if k == "grad_norm"]
    for name in watched:
        values = metrics[name]
        bad = ~np.isfinite(values)
        if bad.any():
            seed, update = map(int, np.argwhere(bad)[0])
            at = chunk * p.updates_per_chunk + update
            raise TrainingError(
                f"{name} became {values[seed, update]} in seed {seed} at update {at} "
                f"(chunk {chunk}, env step ~{at * p.trainer.steps_per_update}); "
                + (f"the last good checkpoint is in {run_dir / 'checkpoints'}. "
                   if checkpoint.list_checkpoints(run_dir / "checkpoints") else "no checkpoint was written yet. ")
                + "Try a lower algo.lr or check the environment's rewards."
            )


def _load_evals(run_dir: Path, max_steps: int) -> list:
    """The evaluations a resumed run made before (from marl_eval.json). A damaged
    file is set aside as marl_eval.json.damaged, with a warning: the run resumes
    and its later evaluations are kept, the earlier ones are in the damaged file."""
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


def _progress(exp: Experiment, p: Plan, start_chunk: int):
    if not exp.run.progress:
        return None
    from tqdm import tqdm

    total = p.num_chunks * p.steps_per_chunk
    bar = tqdm(total=total, initial=start_chunk * p.steps_per_chunk, unit="step", unit_scale=True,
               desc=f"{exp.algo}/{exp.env} x{exp.run.seeds} seeds", dynamic_ncols=True)
    return bar


def _advance(bar, p: Plan, per_seed: dict, seconds: float) -> None:
    if bar is None:
        return
    from coplay.eval.stats import iqm

    ret = per_seed.get("eval/return", per_seed.get("return"))
    finite = ret[np.isfinite(ret)] if ret is not None else np.zeros(0)
    postfix = {"steps/s": f"{p.steps_per_chunk * len(next(iter(per_seed.values()))) / max(seconds, 1e-9):,.0f}"}
    if finite.size:
        postfix["return"] = f"{float(iqm(finite)):.2f}"
    bar.set_postfix(postfix, refresh=False)
    bar.update(p.steps_per_chunk)
