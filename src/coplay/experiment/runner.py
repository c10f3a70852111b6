"""`train`: a run of any registered trainer, from any accepted config form.

The registry entry of the algorithm names its engine (`coplay.algos.registry.ENGINES`):
the compiled engine (`coplay.experiment.compiled`) or the host engine
(`coplay.experiment.host`); the one run loop (`coplay.experiment.loop`) drives
either in a run directory (`coplay.experiment.rundir`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from coplay.algos import get_algo
from coplay.core.errors import ConfigError, callback_errors
from coplay.experiment.compiled import CompiledEngine, plan, uniform_return
from coplay.experiment.config import Experiment, parse_overrides, recommended, resume_differences
from coplay.experiment.host import HostEngine
from coplay.experiment.loop import Engine, RunResult, differences, evaluates_after, run_loop
from coplay.experiment.memory import advice as memory_advice
from coplay.experiment.rundir import hold_run_dir, open_run_dir, storage_errors
from coplay.interop.extras import require

ENGINES: dict[str, Callable[[Experiment], Engine]] = {"compiled": CompiledEngine, "host": HostEngine}


def build_engine(exp: Experiment) -> Engine:
    """The engine that runs `exp`'s algorithm, built and validated; nothing is compiled
    and no run directory is made."""
    return ENGINES[str(get_algo(exp.algo).engine)](exp)


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
    if "wandb" in exp.run.logger.split("+"):
        require("wandb", "wandb", "logger=wandb")   # refused now, not after the run directory exists
    resume_dir = Path(exp.run.resume) if exp.run.resume else None
    if resume_dir is not None:
        stored = Experiment.load(resume_dir / "config.yaml")
        if resume_differences(stored, exp):
            raise ConfigError(f"cannot resume {resume_dir} with a different config ({differences(stored, exp)}); "
                              "resume with the run's own config, or start a new run")
    engine = build_engine(exp)  # all validation happens here, before any compilation
    applied = {k: v for k, v in recommended(type(exp.algo_config), exp.env).items()
               if getattr(exp.algo_config, k) == v}
    if applied and resume_dir is None:
        shown = " ".join(f"algo.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in applied.items())
        print(f"algo={exp.algo} on env={exp.env} starts from the settings recommended there (its defaults do not "
              f"learn it): {shown}; set a field to change it", flush=True)
    try:
        with callback_errors():  # a bridged environment's error keeps its type and message
            run_dir = open_run_dir(exp.run.out_dir, exp.run.name, exp.algo, exp.env, resume_dir)
            with hold_run_dir(run_dir), storage_errors(run_dir):
                return run_loop(engine, run_dir, resume_dir is not None, stop_after_chunks)
    finally:
        engine.close()


def plan_lines(config: Experiment | dict | list[str] | None = None, **overrides: Any) -> list[str]:
    """What `train` would run, as lines of text: the engine, the schedule and (for the
    compiled engine) the memory estimate against what the machine has. Nothing is
    compiled, initialised or written."""
    exp = resolve(config, **overrides)
    engine = build_engine(parse_overrides(["check_memory=false"], base=exp))
    try:
        s, run = engine.schedule, exp.run
        evaluations = sum(evaluates_after(exp, s.num_chunks, c) for c in range(s.num_chunks))
        lines = [f"algo={exp.algo} on env={exp.env}: the {get_algo(exp.algo).engine} engine, {run.seeds} seeds",
                 f"{s.num_updates} updates of {s.per_update} {engine.learner.config.step_unit} per seed "
                 f"({s.num_updates * s.per_update} of total_steps={run.total_steps}), in {s.num_chunks} chunks of "
                 f"up to {s.updates_per_chunk}; {evaluations} evaluations of {run.eval_episodes} episodes per seed"]
        estimate = getattr(engine, "memory", None)
        if estimate is None:
            return [*lines, "memory: not estimated for this engine"]
        verdict = ("fits" if estimate.fits() else
                   f"does not fit: {memory_advice(estimate, exp.algo_config)}; check_memory=false runs it anyway")
        return [*lines, *estimate.lines(), f"the run {verdict}"]
    finally:
        engine.close()


def uniform_policy_return(config: Experiment | dict | list[str], episodes: int = 512, seed: int = 7) -> float:
    """Mean per-agent episode return of the trainer's own policy with every weight
    zero (uniform over the legal actions, for discrete actions) on the config's
    environment: the baseline a learning result is compared against."""
    p = plan(resolve(config))
    try:
        return uniform_return(p, episodes, seed)
    finally:
        p.env.close()
