"""A solver's run: `coplay solve algo=cfr env=tree:leduc_holdem algo.iterations=1000`.

The grammar is `coplay train`'s: `algo=NAME` picks a solver of
`coplay.algos.solvers.SOLVERS` and `env=NAME` the game (by default, the one
the solver names); `algo.FIELD=...` and `env.FIELD=...` set their
parameters; bare `FIELD=...` sets a run field (`seed`, `out_dir`, `name`,
`progress`). Everything is checked before anything is computed: unknown
names, values of the wrong type or out of range, and a game the solver cannot
use are refused with the valid choices, and no run directory is made.

A run writes one directory:

    runs/<time>-<solver>-<env>/
      config.yaml     the full resolved config (reads back with `SolveExperiment.load`)
      summary.json    final exploitability, what it measures, iterations, wall time
      curve.csv       step, exploitability: the solver's curve
      curve.png       the curve (log scale when positive)
      solution.npz    the solution's arrays (no pickle): `policy...`, `details/...`, and
                      on game trees the rows' information sets and the actions' names

From Python: `solve(["algo=cfr", "env=tree:kuhn_poker"])` or
`solve({"algo": {"name": "cfr", "iterations": 500}})` returns the run
directory, the summary and the solver's `SolveResult`.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.algos import ALGOS
from coplay.algos.solvers import SOLVERS, SolveResult, game_tree, solver_config_class, validate
from coplay.core.config import describe, param, set_field
from coplay.core.env import Env
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.core.registry import ENVS, Entry
from coplay.experiment.checkpoint import atomic_write
from coplay.experiment.config import (
    ConfigFile,
    apply_overrides,
    directory_name,
    directory_path,
    resolve_env_config,
    sections,
)
from coplay.experiment.report import plot_series, write_csv
from coplay.experiment.rundir import new_run_dir

DEFAULT_SOLVER = "cfr"
SOLUTION = "solution.npz"


@dataclass(frozen=True)
class SolveRunConfig:
    seed: int = param(0, "random seed (solvers that sample, e.g. psro_ppo; the exact ones are deterministic)",
                      min=0)
    out_dir: str = param("runs", "directory in which run directories are created", affects_results=False,
                         rule=directory_path)
    name: str | None = param(None, "run directory name (default: <time>-<solver>-<env>)", affects_results=False,
                             rule=directory_name)
    progress: bool = param(True, "show a progress bar", affects_results=False)


def get_solver(name: str) -> Entry:
    """The registered solver `name`; a trainer's name is refused with the verb that runs it."""
    try:
        return SOLVERS.get(name)
    except UnknownNameError:
        if isinstance(name, str) and name in ALGOS:
            raise UnknownNameError(f"{name!r} is a trainer, not a solver: run it with coplay train algo={name}. "
                                   f"Solvers: {', '.join(SOLVERS.names())}") from None
        raise


@dataclass(init=False)
class SolveExperiment(ConfigFile):
    """A solver, a game and the run's fields; `to_dict` is config.yaml's shape.

    Built with `env=None`, it plays the solver's default game; `algo_config` may be
    given as the solver's Config, a dict of its fields, or None (its defaults)."""

    algo: str
    env: str
    algo_config: Any                  # the solver's Config
    env_config: dict
    run: SolveRunConfig

    def __init__(self, algo: str = DEFAULT_SOLVER, env: str | None = None, algo_config: Any = None,
                 env_config: dict | None = None, run: SolveRunConfig | None = None) -> None:
        entry = get_solver(algo)
        config_class = solver_config_class(algo)
        if algo_config is None:
            algo_config = config_class()
        elif isinstance(algo_config, dict):
            cfg = config_class()
            for k, v in algo_config.items():
                cfg = set_field(cfg, k, v, "algo.")
            algo_config = cfg
        elif not isinstance(algo_config, config_class):
            raise ConfigError(f"solver {algo!r} needs a {config_class.__module__}.{config_class.__qualname__}, "
                              f"got {type(algo_config).__name__}")
        self.algo = algo
        self.env = env if env is not None else entry.capabilities.default
        self.algo_config = algo_config
        self.env_config = resolve_env_config(self.env, env_config or {})
        self.run = run if run is not None else SolveRunConfig()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SolveExperiment:
        algo, env, d = sections(d)
        run = SolveRunConfig()
        for k, v in d.items():
            run = set_field(run, k, v)
        return cls(algo=algo.pop("name", DEFAULT_SOLVER), env=env.pop("name", None), algo_config=algo,
                   env_config=env, run=run)


def parse_overrides(args: list[str], base: SolveExperiment | None = None) -> SolveExperiment:
    """Apply `key=value` overrides to `base` (the defaults when None). Choosing another
    solver or game starts from its defaults; with no game named at all, the solver's
    default game is used."""
    exp: SolveExperiment = apply_overrides(args, base, SolveExperiment, SolveRunConfig,
                                           lambda name: get_solver(name).name,
                                           "e.g. algo=cfr, env=tree:leduc_holdem, algo.iterations=1000")
    return exp


def resolve(config: SolveExperiment | Mapping | list[str] | None = None, **overrides: Any) -> SolveExperiment:
    """Turn any accepted config form into a validated SolveExperiment."""
    if config is None:
        # Overrides alone choose like the command line: a solver named without a game gets its own.
        exp = parse_overrides([f"{k}={v}" for k, v in overrides.items()])
        overrides = {}
    elif isinstance(config, SolveExperiment):
        exp = config
    elif isinstance(config, Mapping):
        exp = SolveExperiment.from_dict(config)
    elif isinstance(config, (list, tuple)):
        exp = parse_overrides(list(config))
    else:
        raise ConfigError("config must be a SolveExperiment, a dict or a list of key=value overrides, "
                          f"got {type(config).__name__}")
    if overrides:
        exp = parse_overrides([f"{k}={v}" for k, v in overrides.items()], base=exp)
    exp.validate()
    return exp


def prepare(exp: SolveExperiment) -> Env:
    """Build the game and check that the solver can use it with this config; nothing is computed."""
    exp.validate()
    game = ENVS.make(exp.env, **exp.env_config)
    try:
        validate(exp.algo, game, exp.algo_config)
    except BaseException:
        game.close()
        raise
    return game


@dataclass
class SolveRun:
    run_dir: Path
    summary: dict
    result: SolveResult = field(repr=False)


def solve(config: SolveExperiment | Mapping | list[str] | None = None, **overrides: Any) -> SolveRun:
    """Validate, solve, and write the run directory (see the module docstring).

    `config`: a SolveExperiment, a dict shaped like config.yaml, or key=value strings;
    keyword overrides on top (`solve(algo="psro", seed=3)`)."""
    exp = resolve(config, **overrides)
    game = prepare(exp)  # every refusal happens here, before a run directory exists
    try:
        return _run(exp, game)
    finally:
        game.close()


def _run(exp: SolveExperiment, game: Env) -> SolveRun:
    run_dir = new_run_dir(exp.run.out_dir, exp.run.name, exp.algo, exp.env)
    atomic_write(run_dir / "config.yaml", exp.to_yaml().encode())
    entry = get_solver(exp.algo)
    bar = _progress(exp)
    start = time.time()
    try:
        result = entry.factory(game, exp.algo_config, jax.random.PRNGKey(exp.run.seed),
                               log=bar.advance if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    wall = time.time() - start

    rows = [{"step": int(s), "exploitability": repr(float(v))}
            for s, v in zip(result.steps, result.exploitability, strict=True)]
    write_csv(run_dir / "curve.csv", ["step", "exploitability"], rows)
    plot_series(run_dir / "curve.png", result.steps, result.exploitability, "iteration", result.measure_name,
                f"{exp.algo} on {exp.env}")
    write_solution(run_dir / SOLUTION, result, game)
    summary = {
        "algo": exp.algo, "env": exp.env, "measure": result.measure,
        "final_exploitability": result.final, "iterations": int(result.steps[-1]),
        "curve_points": int(result.steps.size), "wall_time_s": round(wall, 2), "seed": exp.run.seed,
        **{k: float(v) for k, v in result.details.items()
           if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)},
    }
    atomic_write(run_dir / "summary.json", json.dumps(summary, indent=2).encode())
    return SolveRun(run_dir, summary, result)


# ----- the solution's arrays --------------------------------------------------------------------------------------


def solution_arrays(result: SolveResult, game: Env | None = None) -> dict[str, np.ndarray]:
    """Every array of the solution by a `/`-joined name: `policy` (or `policy/...` for a
    pytree), `details/<name>/...`; on a game tree also `infoset_keys` `[I]`,
    `infoset_player` `[I]` and `action_names` `[A]`, which name the policy's rows and
    columns. What is not an array of numbers or strings (a policy's act function) is left out."""
    out: dict[str, np.ndarray] = {}
    _flatten("policy", result.policy, out)
    _flatten("details", result.details, out)
    tree = game_tree(game) if game is not None else None
    if tree is not None:
        out["infoset_keys"] = np.asarray(tree.infoset_keys, dtype=str)
        out["infoset_player"] = np.asarray(tree.infoset_player)
        out["action_names"] = np.asarray(tree.action_names, dtype=str)
    return out


def _flatten(name: str, value: Any, out: dict[str, np.ndarray]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{name}/{k}", v, out)
        return
    if isinstance(value, (list, tuple)) and value and not all(np.isscalar(v) for v in value):
        for i, v in enumerate(value):
            _flatten(f"{name}/{i}", v, out)
        return
    if isinstance(value, (np.ndarray, np.generic, jax.Array, int, float, str, list, tuple)):
        array = np.asarray(value)
        if array.dtype != object:
            out[name] = array


def write_solution(path: Path, result: SolveResult, game: Env | None = None) -> None:
    """`solution_arrays` as an .npz archive (no pickle), written atomically."""
    buf = io.BytesIO()
    # Typed Any: mypy would check every array against savez's keyword `allow_pickle: bool`.
    arrays: dict[str, Any] = solution_arrays(result, game)
    np.savez(buf, **arrays)
    atomic_write(Path(path), buf.getvalue())


def load_solution(run_dir: Path) -> dict[str, np.ndarray]:
    """A solver run's arrays, by the names `solution_arrays` gives them."""
    with np.load(Path(run_dir) / SOLUTION, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


# ----- help and progress ------------------------------------------------------------------------------------------


def help_text() -> str:
    """Every solver with the games it uses and its fields, for `coplay solve --help`."""
    lines = ["Run fields:"]
    lines += [f"  {n:<22} {d!s:<12} {h}" for n, d, h in describe(SolveRunConfig)]
    lines.append("\nSolvers (algo=NAME):")
    for name, entry in SOLVERS.items():
        lines.append(f"  {name:<16} [{entry.kind}] {entry.description}")
    for name, entry in SOLVERS.items():
        support = entry.capabilities
        lines.append(f"\n  algo={name}: uses {support.uses}; default env={support.default}")
        lines += [f"    {n:<24} {d!s:<12} {h}" for n, d, h in describe(solver_config_class(name), "algo.")]
    return "\n".join(lines)


class _Progress:
    """A progress bar over the solver's iterations, moved by the solver's log rows."""

    def __init__(self, exp: SolveExperiment):
        from tqdm import tqdm

        total = getattr(exp.algo_config, "iterations", None)
        self.measure = SOLVERS.get(exp.algo).capabilities.measure   # what the solver's curve is, by its name
        self.bar = tqdm(total=total, unit="it", desc=f"{exp.algo}/{exp.env}", dynamic_ncols=True)

    def advance(self, row: dict) -> None:
        step = int(row.get("step", self.bar.n))
        if "exploitability" in row:   # the solvers log their curve's value under this key
            self.bar.set_postfix({self.measure: f"{row['exploitability']:.3g}"}, refresh=False)
        self.bar.update(max(step - self.bar.n, 0))

    def close(self) -> None:
        self.bar.close()


def _progress(exp: SolveExperiment) -> _Progress | None:
    return _Progress(exp) if exp.run.progress else None
