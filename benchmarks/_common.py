"""Shared by the benchmark scripts: results files, machine facts, timing in alternation,
the checks every comparison makes, and the page's regeneration.

Every script that backs a section of BENCHMARKS.md exposes, at module level and without
doing any work at import:

- `RESULTS`: its results file under benchmarks/results/ (`"name.json"`), a tuple of them,
  or a study's folder (`"study/"`, every JSON file in it);
- `section(data) -> str`: its Markdown section(s), each starting `## <title>`, from the
  results alone (`data` as `load` gives it);
- `claims(data) -> list[dict]`: its rows of the page's headline table,
  `{"claim", "workload", "ratio", "machine"}` (and `"section"`, the title linked to, where
  it is not the first one `section` writes).

`benchmarks/page.py` puts them together; a script's `main` writes its results and then
calls `regenerate_page()`."""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


# ----- machine facts ---------------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def cores() -> int:
    return os.cpu_count() or 0


def machine() -> str:
    """`2 cores, <CPU>, JAX <version>, Python <version>`: what every results file records."""
    import jax

    return f"{cores()} cores, {cpu_model()}, JAX {jax.__version__}, Python {platform.python_version()}"


def version(dist: str) -> str | None:
    """An installed distribution's version, or None."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        return _version(dist)
    except PackageNotFoundError:
        return None


def git_head(path: Path, otherwise: str = "unknown") -> str:
    """The short commit of the git checkout at `path` (coplay's, or a peer's), else `otherwise`."""
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return otherwise


def stamp() -> dict:
    """What a results file records of the run that made it: machine, time, git commit."""
    return {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "commit": git_head(ROOT)}


# ----- results files ---------------------------------------------------------------------------------------


def write_results(name: str, data: dict) -> Path:
    """`data` as benchmarks/results/<name>.json (`name` may name a study's folder: `study/run`)."""
    from coplay.experiment.checkpoint import atomic_write

    path = RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # atomic: a run killed while writing leaves the last good results, never half a file
    atomic_write(path, (json.dumps(data, indent=1, default=str) + "\n").encode())
    return path


def read_results(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def load(spec: str | tuple[str, ...]) -> dict | None:
    """The data a script's `RESULTS` names: one file's contents; for a tuple, {stem: contents}
    of those present; for a folder (`"study/"`), {stem: contents} of its JSON files. None
    where nothing is there."""
    if isinstance(spec, tuple):
        found = {Path(n).stem: read_results(n) for n in spec if (RESULTS / n).exists()}
        return found or None
    if spec.endswith("/"):
        folder = RESULTS / spec
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        return {p.stem: json.loads(p.read_text()) for p in files} or None
    return read_results(spec) if (RESULTS / spec).exists() else None


def regenerate_page() -> None:
    """Write BENCHMARKS.md again from every results file (benchmarks/page.py)."""
    import page

    page.write()


def keep_condition(name: str, data: dict, quick: bool, section: Callable[[dict], str]) -> None:
    """At a script's end, or after each condition of a long one: a quick run prints its section; a
    full run writes `data` as results `name` and the page again (so a long run cut short keeps the
    conditions it finished)."""
    if quick:
        print(section(data))
    else:
        write_results(name, data)
        regenerate_page()


# ----- comparisons: the same budget, timed in alternation ----------------------------------------------------


class BudgetMismatch(SystemExit):
    """Two runs asked to be compared were given different budgets."""


def same_budget(a: str, a_steps: float, b: str, b_steps: float, unit: str = "env steps") -> None:
    """Refuse (BudgetMismatch, naming both) to compare two runs whose budgets differ."""
    if a_steps != b_steps:
        raise BudgetMismatch(f"refusing to compare {a} ({a_steps:,} {unit}) with {b} ({b_steps:,} {unit}): "
                             "their budgets differ; give both the same budget")


def alternate(sides: dict[str, Callable[[], Any]], rounds: int, min_seconds: float = 0.0,
              max_rounds: int = 10_000) -> dict[str, list]:
    """Call each side once per round, in turn (a, b, c, a, b, c, ...), for at least `rounds`
    rounds and until `min_seconds` have passed: {side: [what each call returned]}. Each call
    returns its own measurement (seconds, or a rate); a change of the machine's speed then
    reaches every side alike, and the per-round ratios (`paired`) show how much it moved."""
    out: dict[str, list] = {name: [] for name in sides}
    start, done = time.perf_counter(), 0
    while done < max_rounds and (done < rounds or time.perf_counter() - start < min_seconds):
        for name, measure in sides.items():
            out[name].append(measure())
        done += 1
    return out


def paired(numerator: list[float], denominator: list[float]) -> dict:
    """The per-round ratios of two sides measured in alternation: median, range, rounds."""
    if len(numerator) != len(denominator) or not numerator:
        raise ValueError(f"paired: {len(numerator)} and {len(denominator)} measurements; need equal, non-zero")
    ratios = [a / b for a, b in zip(numerator, denominator)]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios), "n": len(ratios)}


def fmt_ratio(r: dict | None, unit: str = "rounds") -> str:
    """`1.33x (1.03-1.63 over 3 rounds)` from `paired`'s result."""
    if not r:
        return "–"
    if r["n"] == 1:
        return f"{r['median']:.2f}x (1 {unit[:-1]})"
    return f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f} over {r['n']} {unit})"


def median(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(xs) if xs else float("nan")


# ----- training runs timed with compile apart ----------------------------------------------------------------


def timed_run(overrides: list[str]) -> dict:
    """Train like `coplay train` would, but time compile and steady state apart.
    `updates` holds one (env steps, seconds into the steady state, mean training
    return over seeds) per update; the time of an update inside a chunk is
    interpolated linearly between the chunk's start and end (updates of a chunk
    cost the same)."""
    import jax
    import numpy as np

    from coplay.eval.stats import summarize
    from coplay.experiment.compiled import chunk_function, eval_keys, evaluation_function, init_state, plan
    from coplay.experiment.config import parse_overrides

    exp = parse_overrides(overrides + ["progress=false", "logger=csv"])
    p = plan(exp)
    if p.ragged:   # every timed chunk must be the same program doing the same work
        raise SystemExit(f"timed_run: {p.schedule.num_updates} updates do not fill chunks of "
                         f"{p.updates_per_chunk}; choose total_steps and chunk_steps so that they do")
    t0 = time.perf_counter()
    state = init_state(p)
    jax.block_until_ready(state)
    t_init = time.perf_counter() - t0
    chunk = chunk_function(p)
    t0 = time.perf_counter()
    compiled = chunk.lower(state).compile()
    t_compile = time.perf_counter() - t0
    per_update, k = p.trainer.steps_per_update, p.updates_per_chunk
    updates = []
    t0 = time.perf_counter()
    for i in range(p.num_chunks):
        start = time.perf_counter() - t0
        state, metrics = compiled(state)
        ret = np.asarray(jax.device_get(metrics["return"]))    # [seeds, updates]: training episodes
        end = time.perf_counter() - t0
        for j in range(k):
            ended = ret[~np.isnan(ret[:, j]), j]                 # NaN: no episode ended in that update
            updates.append(((i * k + j + 1) * per_update, start + (end - start) * (j + 1) / k,
                            float(ended.mean()) if ended.size else float("nan")))
    t_train = time.perf_counter() - t0
    evaluate = evaluation_function(p)
    results = jax.device_get(evaluate(p.trainer.policy_params(state), eval_keys(exp, p.num_chunks)))
    per_seed = np.asarray(results["return"]).mean(-1)
    steps = p.num_chunks * p.steps_per_chunk
    p.env.close()
    return {
        "overrides": overrides, "seeds": exp.run.seeds, "env_steps_per_seed": steps,
        "init_s": t_init, "compile_s": t_compile, "train_s": t_train,
        "env_steps_per_s_total": steps * exp.run.seeds / t_train,
        "env_steps_per_s_per_seed": steps / t_train,
        "final_return_iqm": summarize(per_seed).as_dict(), "updates": updates,
    }


def whole_updates(overrides: list[str], budget: int) -> list[str]:
    """`total_steps` and `chunk_steps` for a run of exactly the whole updates that fit in
    `budget` (as JaxMARL's `TOTAL_TIMESTEPS // batch` does), in one chunk: a chunk asked
    as long as the budget would otherwise be rounded down to whole updates and a second
    chunk added for the rest, running twice the budget."""
    from coplay.experiment.config import parse_overrides

    per_update = parse_overrides(overrides).algo_config.steps_per_update
    steps = budget // per_update * per_update
    if steps < 1:
        raise SystemExit(f"a budget of {budget} env steps is less than one update ({per_update} steps)")
    return [f"total_steps={steps}", f"chunk_steps={steps}"]


# ----- JaxMARL's scripts (train_throughput.py and ceiling.py run them from a JaxMARL checkout) ---------------


def ippo_dir(path: Path) -> Path:
    """A JaxMARL checkout, or its baselines/IPPO directory: the directory of `ippo_ff_mpe.py`."""
    for d in (path, path / "baselines" / "IPPO"):
        if (d / "ippo_ff_mpe.py").exists() and (d / "config" / "ippo_ff_mpe.yaml").exists():
            return d
    raise SystemExit(f"--jaxmarl {path}: no ippo_ff_mpe.py with config/ippo_ff_mpe.yaml there or in "
                     "baselines/IPPO below it")


def git_blob(path: Path) -> str:
    """The file's git object id: `git log --find-object=<id>` in JaxMARL names its commits."""
    import hashlib

    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def jaxmarl_config(d: Path) -> dict:
    """ippo_ff_mpe.yaml as the script's hydra entry point reads it (OmegaConf: 1e7 is a float)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(d / "config" / "ippo_ff_mpe.yaml"))


def jaxmarl_imports(checkout: Path | None) -> list[str]:
    """Make JaxMARL importable from a checkout (the directory holding its `jaxmarl` package; None: an installed
    one), with stand-ins for two imports its spread path never uses where they are absent: `brax` (MABrax's
    class bodies name `brax.envs.*`) and `wandb` (its baseline scripts import it at the top). Returns what was
    stood in for, for the results file."""
    import importlib.util
    import sys
    import types

    if checkout is not None:
        for d in (checkout, *checkout.parents):
            if (d / "jaxmarl").is_dir():
                if str(d) not in sys.path:
                    sys.path.insert(0, str(d))
                break
    patches = []
    if importlib.util.find_spec("brax") is None:
        brax, envs = types.ModuleType("brax"), types.ModuleType("brax.envs")

        def placeholder(name: str) -> type:
            if name.startswith("__"):   # __file__ and the like: absent, as `inspect` expects of a module
                raise AttributeError(name)
            return type(name, (), {})

        envs.__getattr__ = placeholder  # type: ignore[method-assign]
        brax.envs = envs  # type: ignore[attr-defined]
        sys.modules.update({"brax": brax, "brax.envs": envs})
        patches.append("brax (absent): an empty stand-in module; only MABrax's class definitions name it")
    if importlib.util.find_spec("wandb") is None:
        sys.modules["wandb"] = types.ModuleType("wandb")
        patches.append("wandb (absent): an empty stand-in module; the scripts' logging is replaced or disabled")
    return patches


def _load_script(d: Path):
    """JaxMARL's `ippo_ff_mpe` module from its directory `d`."""
    import importlib
    import sys

    if str(d) not in sys.path:
        sys.path.insert(0, str(d))
    return importlib.import_module("ippo_ff_mpe")


def eval_returns(run_dir: Path) -> dict[int, list[float]]:
    """A training run's evaluations from its metrics.csv: {env steps: [each seed's `eval/return`]}."""
    import csv

    by_step: dict[int, dict[int, float]] = {}
    with open(Path(run_dir) / "metrics.csv") as f:
        for row in csv.DictReader(f):
            if row.get("eval/return") not in (None, ""):
                by_step.setdefault(int(row["env_steps"]), {})[int(row["seed"])] = float(row["eval/return"])
    return {step: [seeds[s] for s in sorted(seeds)] for step, seeds in sorted(by_step.items())}


class WandbRecorder:
    """Stands in for `wandb` in JaxMARL's baseline scripts: keeps what they log (nested dicts
    left out), with arrival times."""

    def __init__(self):
        self.logged: list[tuple[float, dict]] = []

    def log(self, metric: dict) -> None:
        import numpy as np

        self.logged.append((time.perf_counter(), {k: np.asarray(v) for k, v in metric.items()
                                                  if not isinstance(v, dict)}))


# ----- Markdown ------------------------------------------------------------------------------------------------


def table(header: list[str], rows: list[list], align: str | None = None) -> list[str]:
    """A Markdown table's lines."""
    out = ["| " + " | ".join(header) + " |", align or "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def needs_rerun(what: str, command: str) -> str:
    """The line a section carries where its results cannot support a figure."""
    return f"**Needs a rerun** ({what}): `{command}`."
