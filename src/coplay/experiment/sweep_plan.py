"""A sweep's plan: its grammar parsed (`parse_sweep`), its axes expanded into
configurations (`expand`), and every configuration validated and given its trials
and directories (`plan_sweep`), all before Ray starts. The grammar and the sweep
directory are described in `coplay.experiment.sweep`, which runs the plan."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coplay.algos import SOLVERS
from coplay.core.errors import ConfigError
from coplay.experiment import solve as solving
from coplay.experiment.config import Experiment, parse_overrides, result_dict

SEARCHES = ("grid", "random")
DISTRIBUTIONS = ("uniform", "loguniform", "randint")
DEFAULT_SEEDS = 3
# Run fields the sweep sets itself for every trial.
RESERVED = ("out_dir", "name", "resume")
_DIST = re.compile(r"^\s*(\w+)\s*\(\s*([^,()]+)\s*,\s*([^,()]+)\s*\)\s*$")


@dataclass(frozen=True)
class Objective:
    """What a sweep's table ranks configurations by: `metric` of each trial's summary,
    better when higher or lower, and the curve each trial's run directory holds
    (`curve_file`'s `curve_key` column against `x_label`)."""

    metric: str
    label: str
    higher_is_better: bool
    curve_file: str
    curve_key: str
    x_label: str
    fmt: str   # how the table writes a figure


TRAINING = Objective("return", "final return", True, "metrics.csv", "eval/return", "environment steps (per seed)",
                     ".3f")
# Exploitability spans orders of magnitude: significant digits, not decimals.
SOLVING = Objective("exploitability", "final exploitability", False, "curve.csv", "exploitability", "iteration",
                    ".4g")


# --- the grammar --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """One swept key: either a list of values (`values`, as given on the command
    line) or a distribution (`dist` in DISTRIBUTIONS, on [low, high])."""

    key: str
    values: tuple[str, ...] = ()
    dist: str | None = None
    low: float = 0.0
    high: float = 0.0

    def __str__(self) -> str:
        if self.dist:
            return f"{self.key}={self.dist}({self.low},{self.high})"
        return f"{self.key}=[{','.join(self.values)}]"


@dataclass(frozen=True)
class SweepArgs:
    """A parsed sweep command: overrides every configuration shares, the axes, and the seeds."""

    fixed: tuple[str, ...]
    axes: tuple[Axis, ...]
    seeds: int = DEFAULT_SEEDS
    seed: int = 0


def parse_sweep(args: list[str]) -> SweepArgs:
    """Split `key=value` arguments into fixed overrides, swept axes and the seed count.
    Only the grammar is checked here; the values are checked per configuration by `expand`."""
    fixed: list[str] = []
    axes: list[Axis] = []
    seen: set[str] = set()
    seeds, seed = DEFAULT_SEEDS, 0
    for arg in args:
        if "=" not in arg:
            raise ConfigError(f"argument {arg!r} is not of the form key=value "
                              "(e.g. algo=ippo, algo.lr=1e-3,3e-4, seeds=3)")
        key, value = (s.strip() for s in arg.split("=", 1))
        if key in seen:
            raise ConfigError(f"{key} is given twice; give an axis once, as {key}=a,b,c")
        seen.add(key)
        if key in RESERVED:
            raise ConfigError(f"{key} is set by coplay sweep for every trial; "
                              "choose the sweep's directory with --out instead")
        if key == "progress":  # trials run in Ray workers, where a progress bar is noise
            continue
        axis = _parse_axis(key, value)
        if key in ("seeds", "seed"):
            if axis is not None:
                raise ConfigError(f"{key} cannot be swept; seeds=N runs every configuration with N seeds "
                                  "(seed, seed+1, ..., numbered from seed=S)")
            n = _int_arg(key, value, minimum=1 if key == "seeds" else 0)
            seeds, seed = (n, seed) if key == "seeds" else (seeds, n)
        elif axis is not None:
            axes.append(axis)
        else:
            fixed.append(f"{key}={value}")
    return SweepArgs(tuple(fixed), tuple(axes), seeds, seed)


def _parse_axis(key: str, value: str) -> Axis | None:
    """An Axis when `value` is a list or a distribution, None for a single value."""
    m = _DIST.match(value)
    if m:
        name = m.group(1)
        if name not in DISTRIBUTIONS:
            raise ConfigError(f"{key}={value}: unknown distribution {name!r}; "
                              f"valid choices: {', '.join(DISTRIBUTIONS)}")
        low, high = (_number(key, value, m.group(i)) for i in (2, 3))
        if not low < high:
            raise ConfigError(f"{key}={value}: the low end must be below the high end")
        if name == "loguniform" and low <= 0:
            raise ConfigError(f"{key}={value}: loguniform needs both ends > 0")
        if name == "randint" and (low != int(low) or high != int(high)):
            raise ConfigError(f"{key}={value}: randint needs integer ends")
        return Axis(key, dist=name, low=low, high=high)
    bracketed = value.startswith("[") and value.endswith("]")
    if not bracketed and "," not in value:
        return None
    items = tuple(v.strip() for v in (value[1:-1] if bracketed else value).split(","))
    if not items or any(v == "" for v in items):
        raise ConfigError(f"{key}={value}: empty value in the list; write {key}=a,b or {key}=[a,b]")
    return Axis(key, values=items)


def _number(key: str, value: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{key}={value}: {text.strip()!r} is not a number") from None


def _int_arg(key: str, value: str, minimum: int) -> int:
    try:
        n = float(value)
    except ValueError:
        n = math.nan
    if not math.isfinite(n) or n != int(n) or n < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return int(n)


# --- expansion and validation -------------------------------------------------------------------------------------


def expand(sweep_args: SweepArgs, search: str = "grid", samples: int = 8, search_seed: int = 0) -> list[dict[str, str]]:
    """Every configuration as `swept key -> value text`, in a fixed order.

    grid: the product of the axes (first axis slowest), every axis a list.
    random: `samples` draws, each axis independently (a list: uniformly among
    its values), from a generator seeded by `search_seed`; repeated
    configurations are dropped, so there may be fewer than `samples`."""
    if search not in SEARCHES:
        raise ConfigError(f"unknown search {search!r}; valid choices: {', '.join(SEARCHES)}")
    axes = sweep_args.axes
    if search == "grid":
        ranged = [a for a in axes if a.dist]
        if ranged:
            raise ConfigError(f"{ranged[0]} is a distribution, which a grid cannot enumerate; "
                              "use --search random, or list the values (key=a,b,c)")
        combos = itertools.product(*(a.values for a in axes))
        configs = [dict(zip((a.key for a in axes), combo)) for combo in combos]
    else:
        if samples < 1:
            raise ConfigError(f"--samples must be >= 1, got {samples}")
        rng = np.random.default_rng(search_seed)
        configs = [{a.key: _draw(a, rng) for a in axes} for _ in range(samples)]
    unique: list[dict[str, str]] = []
    for c in configs:  # keep first occurrences, in order
        if c not in unique:
            unique.append(c)
    return unique


def _draw(axis: Axis, rng: np.random.Generator) -> str:
    if not axis.dist:
        return axis.values[int(rng.integers(len(axis.values)))]
    if axis.dist == "randint":
        return str(int(rng.integers(int(axis.low), int(axis.high) + 1)))
    if axis.dist == "uniform":
        x = rng.uniform(axis.low, axis.high)
    else:
        x = math.exp(rng.uniform(math.log(axis.low), math.log(axis.high)))
    return f"{x:.6g}"  # readable in labels and tables; far finer than any sensible sweep needs


@dataclass(frozen=True)
class Configuration:
    """One point of the search: `values` (swept key -> value text) on top of the
    fixed overrides; `id` is its directory-name prefix (label and config hash)."""

    id: str
    values: dict[str, str]
    overrides: tuple[str, ...]


@dataclass(frozen=True)
class Trial:
    """One Tune trial: a coplay run of configuration `config` with `seeds` (the
    run's `seed` and `seeds` fields follow from them) in `run_dir`; `kind` is
    "train" (a `coplay train` run) or "solve" (a `coplay solve` run, one seed)."""

    id: str
    config: str
    seeds: tuple[int, ...]
    run_dir: Path
    overrides: tuple[str, ...]  # everything `coplay train` (or `coplay solve`) needs, for this trial
    kind: str = "train"

    def payload(self) -> dict:
        # The JAX compilation cache is shared by the sweep's trials: every seed of a
        # configuration compiles the same programs, so all but the first read them back.
        return {"trial_id": self.id, "run_dir": str(self.run_dir), "overrides": list(self.overrides),
                "jax_cache_dir": str(self.run_dir.parent.parent / "jax_cache"), "kind": self.kind}


@dataclass
class SweepPlan:
    """Everything fixed before Ray starts: the configurations, trials and directory."""

    sweep_dir: Path
    args: list[str]
    search: str
    seeds: tuple[int, ...]
    configurations: list[Configuration]
    trials: list[Trial]
    axes: tuple[str, ...]
    kind: str = "train"   # "train": trainers' runs; "solve": game solvers' runs

    @property
    def objective(self) -> Objective:
        return SOLVING if self.kind == "solve" else TRAINING

    def trials_of(self, config_id: str) -> list[Trial]:
        return [t for t in self.trials if t.config == config_id]


def plan_sweep(args: list[str], *, search: str = "grid", samples: int = 8, search_seed: int = 0,
               vmap_seeds: bool = False, out: str | Path | None = None) -> SweepPlan:
    """Parse, expand and validate a sweep; nothing is run and nothing is written.

    Every configuration goes through `parse_overrides` and the runner's `plan`
    (environment and trainer built, nothing compiled), or for a solver through
    `coplay solve`'s own checks (game built, nothing solved), so any bad value
    in any configuration is refused here, with the standard message."""
    from coplay.experiment.compiled import plan

    sweep_args = parse_sweep(args)
    values_list = expand(sweep_args, search, samples, search_seed)
    kind = _kind(sweep_args, values_list)
    if kind == "solve" and vmap_seeds:
        raise ConfigError("--vmap-seeds trains a configuration's seeds in one compiled run; a solver runs one "
                          "seed per trial, so leave it out")
    seeds = tuple(range(sweep_args.seed, sweep_args.seed + sweep_args.seeds))
    configurations: list[Configuration] = []
    experiments: list[Experiment | solving.SolveExperiment] = []
    exp: Experiment | solving.SolveExperiment
    for values in values_list:
        overrides = (*sweep_args.fixed, *(f"{k}={v}" for k, v in values.items()))
        try:
            if kind == "solve":
                exp = solving.parse_overrides([*overrides, f"seed={seeds[0]}"])
                solving.prepare(exp).close()
            else:
                exp = parse_overrides([*overrides, f"seeds={len(seeds) if vmap_seeds else 1}", f"seed={seeds[0]}"])
                plan(exp).env.close()  # validation has no use for host copies or worker processes
        except ConfigError as e:
            if not values:
                raise
            where = ", ".join(f"{k}={v}" for k, v in values.items())
            raise type(e)(f"in sweep configuration {where}: {e}") from e
        digest = _config_hash(exp)
        if any(c.id.endswith(f"-{digest}") for c in configurations):  # e.g. lr=1e-3,0.001: one configuration
            continue
        config_id = f"{_label(values)}-{digest}"
        configurations.append(Configuration(config_id, dict(values), overrides))
        experiments.append(exp)

    identity = {"args": list(args), "search": search, "samples": samples if search == "random" else None,
                "search_seed": search_seed if search == "random" else None, "vmap_seeds": vmap_seeds}
    if out is None:
        algos = "+".join(dict.fromkeys(e.algo for e in experiments))
        envs = "+".join(dict.fromkeys(e.env for e in experiments))
        out = Path("runs") / _safe(f"sweep-{algos}-{envs}-{_digest(identity)}")
    sweep_dir = Path(out).absolute()

    trials: list[Trial] = []
    trials_dir = sweep_dir / "trials"
    for c in configurations:
        groups = [seeds] if vmap_seeds else [(s,) for s in seeds]
        for group in groups:
            suffix = f"seed{group[0]}" if len(group) == 1 and not vmap_seeds else f"seeds{group[0]}-{group[-1]}"
            trial_id = f"{c.id}-{suffix}"
            count = () if kind == "solve" else (f"seeds={len(group)}",)
            overrides = (*c.overrides, *count, f"seed={group[0]}", f"out_dir={trials_dir}", f"name={trial_id}",
                         "progress=false")
            trials.append(Trial(trial_id, c.id, group, trials_dir / trial_id, overrides, kind))
    return SweepPlan(sweep_dir, list(args), search, seeds, configurations, trials,
                     tuple(a.key for a in sweep_args.axes), kind)


def _kind(sweep_args: SweepArgs, values_list: list[dict[str, str]]) -> str:
    """"solve" when every configuration's `algo` names a game solver, "train" when none
    does (no `algo` at all: the trainers' default); a mixture is refused."""
    pairs = [o.split("=", 1) for o in sweep_args.fixed]
    fixed = [v.strip() for k, v in pairs if k.strip() in ("algo", "algo.name")]
    names = set()
    for values in values_list:
        swept = [v for k, v in values.items() if k in ("algo", "algo.name")]
        names.update(swept or fixed or [""])
    solvers = sorted(n for n in names if n in SOLVERS)
    if solvers and len(solvers) < len(names):
        others = sorted(n or "the default trainer" for n in names if n not in SOLVERS)
        raise ConfigError(f"a sweep runs trainers or solvers, not both: {', '.join(solvers)} "
                          f"(coplay solve) and {', '.join(others)} (coplay train); sweep them apart")
    return "solve" if solvers else "train"


def _label(values: dict[str, str]) -> str:
    if not values:
        return "base"
    text = "_".join(f"{k.split('.')[-1] if k.startswith(('algo.', 'env.')) else k}={v}" for k, v in values.items())
    return _safe(text)[:60]


def _safe(name: str) -> str:
    """A directory name: anything but letters, digits and ._=+- becomes _ (e.g. pgx:othello)."""
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", name)


def _config_hash(exp: Any) -> str:
    """A hash of the resolved config's fields that change results, seeds apart, so
    `lr=1e-3` and `lr=0.001` are the same configuration and any change is a new one."""
    d = result_dict(exp)
    for k in ("seed", "seeds"):
        d.pop(k, None)
    return _digest(d)


def _digest(obj: Any) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:8]
