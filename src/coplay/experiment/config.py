"""Experiment configuration and the `key=value` override grammar.

    coplay train algo=ippo env=foraging seeds=8 algo.lr=3e-4 env.n_agents=3 total_steps=2e6

`algo=NAME` and `env=NAME` choose the algorithm and environment; `algo.FIELD`
and `env.FIELD` set their parameters; bare `FIELD` sets a run field. Everything
is checked, and unknown names rejected with the valid choices, before anything
is compiled. `config.yaml` in a run directory holds the fully resolved config in
the same shape, so it reads back into the same Experiment."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from coplay import lm as _lm  # noqa: F401  (registers algo=lm_grpo)
from coplay.algos import ALGOS, algo_config_class, get_algo
from coplay.core.config import (
    check,
    describe,
    fields,
    free_fields,
    number_list,
    param,
    parse_numbers,
    set_field,
)
from coplay.core.errors import ConfigError, unknown_name
from coplay.core.registry import ENVS
from coplay.wrappers.social import preference_error

DEFAULT_ALGO = "mappo"
DEFAULT_ENV = "spread"


def directory_name(value: str) -> str | None:
    """What is wrong with `value` as the name of one directory inside `out_dir` (None: nothing)."""
    if value in ("", ".", "..") or any(c in value for c in "/\\\0"):
        return "a run directory name is one directory inside out_dir: not empty, '.' or '..', without '/' or '\\'"
    return None


LOGGERS = ("csv", "tensorboard", "wandb")


def logger_names(value: str) -> str | None:
    """What is wrong with `value` as loggers joined by '+' (None: nothing)."""
    names = value.split("+")
    bad = [n for n in names if n not in LOGGERS]
    if bad or not names:
        return f"{bad[0] if bad else value!r} is not a logger; choose from {', '.join(LOGGERS)}, joined by '+'"
    if "csv" in names and len(names) > 1:
        return "csv means metrics.csv alone (it is always written); leave it out when naming other loggers"
    return None


def directory_path(value: str) -> str | None:
    """What is wrong with `value` as a directory path (None: nothing)."""
    if not value.strip():
        return "name a directory (e.g. out_dir=runs, or out_dir=. for this one)"
    if "\0" in value:
        return "a path cannot hold a NUL character"
    return None


# Every seed of a run is held in memory at once (one vmapped program).
MAX_SEEDS = 100_000


def seeds_named(seed: int | None, seeds: int, who: str) -> list[int]:
    """The seeds of a run of `seeds` seeds that `seed` names (None: all of them), or a
    ConfigError for `who` (the argument that named it) listing the ones the run has."""
    if seed is not None and not 0 <= seed < seeds:
        raise ConfigError(f"{who}: the run has seeds 0..{seeds - 1}, not {seed}")
    return [seed] if seed is not None else list(range(seeds))


MINORITY_FORM = ("<run dir>[@<seed>]:seat=<k>[:influence=<weight>[:horizon=<steps>]], e.g. "
                 "runs/spread@0:seat=2:influence=0.5:horizon=2")


def parse_minority(text: str) -> tuple[str, int | None, int, float, int]:
    """`<run dir>[@<seed>]:seat=<k>[:influence=<weight>[:horizon=<steps>]]` -> (run directory,
    seed or None, seat, weight of the influence reward (0 where not given), its horizon (1))."""
    match = re.fullmatch(r"(.+?)(?:@(\d+))?:seat=(\d+)"
                         r"(?::influence=((?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?::horizon=([1-9]\d*))?)?",
                         text.strip())
    if match is None:
        raise ConfigError(f"minority={text!r}: expected {MINORITY_FORM}")
    return (match.group(1), None if match.group(2) is None else int(match.group(2)), int(match.group(3)),
            float(match.group(4) or 0.0), int(match.group(5) or 1))


def minority_error(text: str) -> str | None:
    """What is wrong with `text` as a `minority=` value (None: nothing), for the config's checks."""
    try:
        parse_minority(text)
    except ConfigError:
        return f"expected {MINORITY_FORM}"
    return None


@dataclass(frozen=True)
class RunConfig:
    seeds: int = param(4, "independent seeds trained together in one compiled run", min=1, max=MAX_SEEDS)
    seed: int = param(0, "base random seed; seed i of the run uses (seed, i)", min=0)
    total_steps: int = param(1_000_000, "environment steps per seed (gradient steps offline; for grpo and "
                                        "lm_grpo, each episode counts its longest length); the run trains the "
                                        "whole updates that fit in it", min=1)
    chunk_steps: int = param(50_000, "environment steps per seed between logging, evaluation and checkpoints", min=1)
    eval_episodes: int = param(32, "evaluation episodes per seed", min=1)
    eval_every: int = param(1, "evaluate every this many chunks (0: only at the end)", min=0)
    checkpoint_every: int = param(1, "checkpoint every this many chunks", min=1, affects_results=False)
    keep_checkpoints: int = param(2, "how many recent checkpoints to keep", min=1, affects_results=False)
    out_dir: str = param("runs", "directory in which run directories are created", affects_results=False,
                         rule=directory_path)
    name: str | None = param(None, "run directory name (default: <time>-<algo>-<env>)", affects_results=False,
                             rule=directory_name)
    resume: str | None = param(None, "run directory to continue from its last checkpoint", affects_results=False)
    init_from: str | None = param(None, "run directory whose trained networks this run starts from (offline to "
                                        "online fine-tuning): the parameter groups both trainers have")
    init_params: str | None = param(None, "with init_from, the groups to copy, source:destination, e.g. "
                                          "agent:actor (default: every group both runs have by name)")
    progress: bool = param(True, "show a progress bar", affects_results=False)
    check_memory: bool = param(True, "refuse a compiled run whose estimated memory exceeds what the machine has "
                                     "available (`coplay train ... --plan` prints the estimate)", affects_results=False)
    logger: str = param("tensorboard", "where metrics go besides metrics.csv, joined by '+': tensorboard (event "
                                       "files in the run directory), wandb (a Weights & Biases run, offline unless "
                                       "WANDB_MODE says otherwise, its files in the run directory), or csv alone",
                        affects_results=False, rule=logger_names)
    scalarise: str | None = param(None, "train on a utility of the environment's vector reward "
                                        "(coplay.wrappers.Scalarise): linear or chebyshev",
                                  choices=("linear", "chebyshev"))
    preference: str | None = param(None, "the scalarisation's weights, one per objective, e.g. 0.7:0.3 (scaled to "
                                         "sum to 1)", rule=number_list)
    utopia: str | None = param(None, "chebyshev's utopia point, one number per objective, e.g. 10:0",
                               rule=number_list)
    social: str | None = param(None, "a social preference added to the reward the learner trains on "
                                     "(coplay.wrappers.social): name[:field=value...], e.g. "
                                     "inequity_aversion:alpha=5:beta=0.05, reward_exchange:share=0.5; it is "
                                     "reported as info['shaping/<name>'], which algo.shaped_reward=shaping/<name> "
                                     "trains on", rule=preference_error)
    minority: str | None = param(None, "a seat of a trained team taken over by the learner, rewarded for "
                                       "lowering the other agents' return, and with influence=<weight> also for "
                                       "moving their policies (coplay.wrappers.minority): "
                                       "<run dir>[@<seed>]:seat=<k>[:influence=<weight>[:horizon=<steps>]]",
                               rule=minority_error)
    reference_point: str | None = param(None, "several objectives: the point each front's hypervolume is taken "
                                              "from, one number per objective (default: the environment's)",
                                        rule=number_list)


# Run fields that may differ between a run and its resumption without changing its results.
RESUMABLE = tuple(sorted(free_fields(RunConfig)))

# Algorithm fields that older coplay versions wrote to config.yaml and that no longer
# exist: (algo, field) -> {old value: None to drop it, or the error to raise}.
LEGACY_ALGO_FIELDS: dict[tuple[str, str], dict[Any, str | None]] = {
    ("mappo", "critic"): {"global": None, "local": "a run of MAPPO with a local critic is IPPO: use algo=ippo"},
    ("ippo", "critic"): {"local": None, "global": "a run of IPPO with a global critic is MAPPO: use algo=mappo"},
    ("vdn", "reward"): {"team": None},
    ("qmix", "reward"): {"team": None},
    # pc_mappo's config once inherited the weight sweep's; only their defaults meant anything.
    ("pc_mappo", "select"): {"even": None},
    ("pc_mappo", "utility"): {"linear": None},
    ("pc_mappo", "utopia"): {None: None},
}


# Algorithm fields and values that older coplay versions wrote to config.yaml under names
# that now mean something else or nothing: (algo, field) -> today's field, and
# (algo, field) -> {old value: today's}. Only a stored config (a run's config.yaml, a
# checkpoint's) is read through them; a command line takes today's names only.
RENAMED_ALGO_FIELDS: dict[tuple[str, str], str] = {
    ("grpo", "num_envs"): "episodes",
    ("grpo", "rollout_len"): "max_turns",
    ("lm_grpo", "num_envs"): "episodes",
}
RENAMED_ALGO_VALUES: dict[tuple[str, str], dict[Any, Any]] = {
    ("lm_grpo", "decoding"): {"legal": "choose_legal"},
}


def upgrade_stored(d: Mapping[str, Any]) -> dict:
    """A stored config dict with the fields and values older coplay versions wrote under
    other names renamed (`RENAMED_ALGO_FIELDS`, `RENAMED_ALGO_VALUES`, and `tensorboard: false`
    as `logger: csv`)."""
    d = dict(d)
    if "tensorboard" in d and "logger" not in d:   # a bool before the loggers were named
        d["logger"] = "tensorboard" if d.pop("tensorboard") else "csv"
    algo = d.get("algo")
    if isinstance(algo, Mapping):
        algo = dict(algo)
        for (name, old), new in RENAMED_ALGO_FIELDS.items():
            if algo.get("name") == name and old in algo and new not in algo:
                algo[new] = algo.pop(old)
        for (name, key), renamed in RENAMED_ALGO_VALUES.items():
            value = algo.get(key)
            if algo.get("name") == name and isinstance(value, str) and value in renamed:
                algo[key] = renamed[value]
        d["algo"] = algo
    return d


def _drop_legacy_fields(algo: str, values: dict) -> dict:
    """`values` without the fields an older coplay wrote that mean nothing now
    (their only value is today's behaviour); a value that meant something else
    is refused, saying what to use."""
    out = dict(values)
    for (name, key), known in LEGACY_ALGO_FIELDS.items():
        if name != algo or key not in out:
            continue
        value = out.pop(key)
        if value not in known:
            raise ConfigError(f"algo.{key}={value!r} is not a field of {algo} (written by an older coplay)")
        if known[value] is not None:
            raise ConfigError(f"algo.{key}={value!r} (written by an older coplay): {known[value]}")
    return out


def result_dict(exp: ConfigFile) -> dict:
    """The config as a dict without the run fields that do not change results:
    two runs with equal result dicts compute the same thing."""
    d = exp.to_dict()
    for k in free_fields(exp.run):
        d.pop(k, None)
    return d


def resolve_env_config(env: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter of environment `env`: its defaults with `values` on top, each
    value read as its default's type (strings from the command line included)."""
    return {**ENVS.parameters(env), **ENVS.arguments(env, dict(values), "env.")}


def sections(d: Mapping[str, Any]) -> tuple[dict, dict, dict]:
    """A config dict's `algo` and `env` sections (mappings) and its run fields."""
    if not isinstance(d, Mapping):
        raise ConfigError(f"a config is a mapping of fields, got a {type(d).__name__}")
    d = dict(d)
    parts = []
    for key in ("algo", "env"):
        part = d.pop(key, None) or {}
        if isinstance(part, str):
            part = {"name": part}
        if not isinstance(part, Mapping):
            raise ConfigError(f"config field {key!r} must be a name or a mapping of its name and fields, "
                              f"got {part!r}")
        parts.append(dict(part))
    return parts[0], parts[1], d


class ConfigFile:
    """What a training run's and a solve's configs share: an algorithm (or solver)
    with its config, an environment with its fields, the run's fields, and
    config.yaml written and read back."""

    algo: str
    env: str
    algo_config: Any
    env_config: dict
    run: Any

    def validate(self) -> None:
        """Check every value's type and range (cheap; no environment or network is built)."""
        check(self.run)
        check(self.algo_config, "algo.")

    def to_dict(self) -> dict:
        return {
            "algo": {"name": self.algo, **dataclasses.asdict(self.algo_config)},
            "env": {"name": self.env, **self.env_config},
            **dataclasses.asdict(self.run),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def load(cls, path: Path) -> Any:
        """The config in `path` (a run directory's config.yaml), refused with the
        file named when it is missing, not YAML, empty, not a mapping, or invalid."""
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ConfigError(f"no config file at {path}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path} cannot be read: {e}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path} is not valid YAML: {e}") from None
        if data is None:
            raise ConfigError(f"{path} is empty; a run's config.yaml holds its whole config "
                              f"(algo, env and run fields)")
        if not isinstance(data, dict):
            raise ConfigError(f"{path} holds a {type(data).__name__}, not a mapping of config fields "
                              f"(algo, env and run fields)")
        try:
            return cls.from_dict(upgrade_stored(data))
        except ConfigError as e:
            raise type(e)(f"{path}: {e}") from None


def recommended(config_class: type, env: str) -> dict[str, Any]:
    """The settings `config_class`'s algorithm starts from on environment `env` (see
    `TrainerConfig.recommended`); empty where it names none."""
    return dict(getattr(config_class, "recommended", {}).get(env, {}))


@dataclass
class Experiment(ConfigFile):
    algo: str = DEFAULT_ALGO
    env: str = DEFAULT_ENV
    algo_config: Any = None
    env_config: dict = field(default_factory=dict)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        config_class = algo_config_class(self.algo)
        if self.algo_config is None or isinstance(self.algo_config, dict):
            # Fields left out take the algorithm's settings for this environment where it
            # names some (`TrainerConfig.recommended`), else their defaults.
            given = _drop_legacy_fields(self.algo, self.algo_config or {})
            cfg = config_class()
            for k, v in {**recommended(config_class, self.env), **given}.items():
                cfg = set_field(cfg, k, v, "algo.")
            self.algo_config = cfg
        self.env_config = resolve_env_config(self.env, self.env_config)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Experiment:
        algo, env, d = sections(d)
        exp = cls(algo=algo.pop("name", DEFAULT_ALGO), env=env.pop("name", DEFAULT_ENV),
                  algo_config=algo, env_config=env)
        run = RunConfig()
        for k, v in d.items():
            run = set_field(run, k, v)
        exp.run = run
        return exp


def parse_overrides(args: list[str], base: Experiment | None = None) -> Experiment:
    """Apply `key=value` overrides to `base` (default config when None)."""
    exp = apply_overrides(args, base, Experiment, RunConfig, lambda name: get_algo(name).name,
                          "e.g. algo=ippo, algo.lr=3e-4, seeds=8")
    return normalise_preference(exp, base)


def normalise_preference(exp: Experiment, base: Experiment | None) -> Experiment:
    """`exp` with a `preference` given now that does not sum to 1 scaled to sum to 1, saying
    so on stderr: a utility's weights sum to 1, and other sums only scale the reward
    (`preference=1:1` means 0.5:0.5). The scaled value is what config.yaml keeps. A
    preference with a weight that is negative or not finite, or none positive, or without
    `scalarise=`, is left for the run's checks to refuse; one that `base` holds already (a
    stored run's) is kept as written, so that an older run resumes exactly."""
    given = exp.run.preference
    if given is None or exp.run.scalarise is None or (base is not None and given == base.run.preference):
        return exp
    weights = np.asarray(parse_numbers(given), np.float64)
    total = float(weights.sum())
    # 1e-5: a sum of weights written to six digits, as this writes them, counts as 1
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or total <= 0 or abs(total - 1.0) <= 1e-5:
        return exp
    value = ":".join(format(w, ".6g") for w in weights / total)
    if base is None or value != base.run.preference:
        print(f"coplay: note: preference={given} sums to {total:g}, not 1; normalised to preference={value} "
              "(a utility's weights sum to 1; other sums would only scale the reward)", file=sys.stderr, flush=True)
    exp.run = dataclasses.replace(exp.run, preference=value)
    return exp


def apply_overrides(args: list[str], base: Any, experiment: type[Any], run_class: type[Any],
                    algo_name: Callable[[str], str], example: str) -> Any:
    """The override grammar shared by `coplay train` and `coplay solve`: `key=value`
    pairs applied to `base` (an `experiment` instance, or None for its defaults).
    `algo=` and `env=` are read first, and choosing another algorithm or environment
    starts from its defaults (`algo_name` checks the name and gives its canonical
    form); then `algo.<field>`, `env.<field>` and the fields of `run_class`."""
    pairs = []
    for arg in args:
        if "=" not in arg:
            raise ConfigError(f"override {arg!r} is not of the form key=value ({example})")
        key, value = arg.split("=", 1)
        pairs.append((key.strip(), value))
    d = base.to_dict() if base is not None else {}
    for key, value in pairs:
        if key in ("algo", "algo.name"):
            d["algo"] = {"name": algo_name(value)}
        elif key in ("env", "env.name"):
            ENVS.get(value)
            d["env"] = {"name": value}
    exp = experiment.from_dict(d)
    algo_cfg, env_cfg, run = exp.algo_config, dict(exp.env_config), exp.run
    env_params = ENVS.parameters(exp.env)
    for key, value in pairs:
        if key in ("algo", "algo.name", "env", "env.name"):
            continue
        if key.startswith("algo."):
            algo_cfg = set_field(algo_cfg, key[5:], value, "algo.")
        elif key.startswith("env."):
            name = key[4:]
            if name not in env_params:
                raise ENVS.unknown_argument(exp.env, name, env_params, "env.")
            env_cfg[name] = value
        else:
            if key not in fields(run_class):
                raise unknown_name("config field", key, [*fields(run_class), "algo", "env", "algo.<field>",
                                                         "env.<field>"])
            run = set_field(run, key, value)
    exp = experiment(algo=exp.algo, env=exp.env, algo_config=algo_cfg, env_config=env_cfg, run=run)
    exp.validate()
    return exp


def resume_differences(stored: Experiment, requested: Experiment) -> list[str]:
    """Fields (dotted) whose values differ, ignoring the run fields that cannot change results."""
    a, b = _flatten(stored.to_dict()), _flatten(requested.to_dict())
    return sorted(k for k in set(a) | set(b) if k not in RESUMABLE and a.get(k) != b.get(k))


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def help_text(env: str | None = None) -> str:
    """Every config field with its default, for `coplay train --help`; with `env` (`coplay
    train --help env=NAME`), that environment's fields first, a prefixed name's included
    (`jaxmarl:overcooked`, `pgx:othello`)."""
    lines = []
    if env is not None:
        lines.append(f"Environment {env} (env.<field>=value):")
        lines += [f"  env.{k:<22} {v!s}" for k, v in ENVS.parameters(env).items()] or ["  (no fields)"]
        lines.append("")
    lines.append("Run fields:")
    lines += [f"  {n:<22} {d!s:<12} {h}" for n, d, h in describe(RunConfig)]
    lines.append("\nAlgorithms (algo=NAME):")
    for name, entry in ALGOS.items():
        lines.append(f"  {name:<12} [{entry.kind}] {entry.description}")
    for name in ALGOS.names():
        lines.append(f"\n  algo={name} fields:")
        lines += [f"    {n:<24} {d!s:<12} {h}" for n, d, h in describe(algo_config_class(name), "algo.")]
    lines.append("\nEnvironments (env=NAME):")
    for e in ENVS.entries():
        lines.append(f"  {e.name:<12} [{e.kind}] {e.description}")
        params = ENVS.parameters(e.name)
        lines += [f"    env.{k:<20} {v!s}" for k, v in params.items()]
    for p in ENVS.prefixes():
        lines.append(f"  {p.prefix + ':<name>':<12} [{p.kind}] {p.description}")
    return "\n".join(lines)
