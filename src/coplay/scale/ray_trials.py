"""Running many independent trials as Ray Tune trials, locally or on a cluster.

This module knows nothing about what a trial does: it takes a trial function
and a mapping `trial id -> payload`, and runs `fn(payload)` once per trial as a
Tune trial, with Tune's FailureConfig retrying a trial whose worker died.

    outcomes = run_trials(fn, {"a-seed0": {...}, "a-seed1": {...}}, storage_dir=..., max_failures=2)

Why Tune's own search and checkpoints are not used: the caller expands the
search space itself (so every configuration is known, and validated, before
Ray starts) and hands Tune a plain grid over trial ids. A retried trial is the
same call `fn(payload)` again; the trial function is expected to find its own
state on disk (coplay runs checkpoint every chunk into their run directory) and
continue from there, so Tune needs no checkpoint of its own.

Ray is an optional dependency (`pip install coplay[ray]`); it is imported only
when trials are run.
"""

from __future__ import annotations

import os
import socket
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coplay.core.errors import SweepError
from coplay.interop import require

FEATURE = "coplay sweep"


@dataclass
class TrialOutcome:
    """What Tune saw of one trial: `metrics` is the last dict the trial function
    returned (empty if it never finished); `error` the last failure's message."""

    trial_id: str
    finished: bool
    metrics: dict = field(default_factory=dict)
    error: str | None = None


def require_ray() -> Any:
    """Ray with Tune, or MissingExtraError naming the extra to install."""
    require("ray.tune", "ray", FEATURE)
    return require("ray", "ray", FEATURE)


def check_address(address: str | None) -> None:
    """Refuse an address that is not a Ray address, or a host:port where nothing
    listens, quickly and before `ray.init` (which would otherwise retry for a
    long time before failing).

    Accepted: None or "local" (start a local instance), "auto" (the cluster this
    machine belongs to), "host:port" (a cluster's GCS) and "ray://host:port"
    (Ray Client)."""
    if address in (None, "local", "auto"):
        return
    hostport = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SweepError(f"--address {address!r} is not a Ray address; expected host:port, ray://host:port, "
                         "auto (the running cluster of this machine) or local (start a local Ray instance)")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as e:
        raise SweepError(f"cannot reach a Ray cluster at {address!r} ({e}); is the head node running "
                         "(`ray start --head`) and is the address its GCS address?") from e


def current_node() -> str | None:
    """The id of the Ray node this process runs on, when it is connected to Ray (a
    trial's or a task's worker, or a driver); None otherwise. Does not import Ray."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return str(ray.get_runtime_context().get_node_id())


def connect(ray: Any, address: str | None, num_cpus: int | None) -> bool:
    """Make sure this process is connected to Ray; True when we started the connection
    (and so must shut it down), False when the caller had already connected."""
    if ray.is_initialized():
        return False
    check_address(address)
    local = address in (None, "local")
    try:
        with warnings.catch_warnings():
            # JAX warns about any fork once it is loaded; Ray forks only to exec its own processes.
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")
            ray.init(address=None if local else address, num_cpus=num_cpus if local else None,
                     include_dashboard=False, configure_logging=True, logging_level="warning")
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = "a local Ray instance" if local else f"the Ray cluster at {address!r}"
        raise SweepError(f"cannot connect to {where}: {e}") from e
    return True


def run_trials(fn: Callable[[dict], dict], trials: Mapping[str, dict], *, storage_dir: Path,
               name: str = "tune", address: str | None = None, num_cpus: int | None = None,
               cpus_per_trial: float = 1.0, gpus_per_trial: float = 0.0, max_failures: int = 2,
               reuse_actors: bool = True, verbose: int = 1) -> dict[str, TrialOutcome]:
    """Run `fn(payload)` for every `trial id -> payload` as a Ray Tune trial.

    `fn` must be importable by the workers (a module-level function) and return
    a flat dict of JSON-able values, which Tune records as the trial's result.
    A trial whose worker process dies or whose `fn` raises is started again, up
    to `max_failures` times, with the same payload. Trials run in parallel as
    far as the resources allow (`cpus_per_trial`, `gpus_per_trial` each).

    `address`: None or "local" starts a local Ray instance (`num_cpus` CPUs, all
    by default) and stops it afterwards; "auto", "host:port" or "ray://host:port"
    joins a running cluster. If this process is already connected to Ray (e.g.
    `ray.init` was called before), that connection is used and left open.
    `storage_dir`: an absolute directory for Tune's own records (experiment state,
    per-trial logs); on a cluster it should be on storage every node can reach.

    `reuse_actors`: run the next trial in the worker process of a finished one,
    which saves starting a process and importing everything again per trial.

    Returns trial id -> TrialOutcome for every trial."""
    if not trials:
        return {}
    ray = require_ray()
    tune = require("ray.tune", "ray", FEATURE)
    payloads = dict(trials)
    storage_dir = Path(storage_dir).absolute()
    storage_dir.mkdir(parents=True, exist_ok=True)

    share_gpu = 0 < gpus_per_trial < 1

    def trainable(config: dict) -> None:
        # Runs in a Ray worker; the payloads travel with this closure.
        if share_gpu:  # JAX would otherwise take most of the GPU's memory for the first trial on it
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        tune.report(fn(payloads[config["trial_id"]]))

    resources = {"cpu": cpus_per_trial, "gpu": gpus_per_trial}
    started = connect(ray, address, num_cpus)
    try:
        tuner = tune.Tuner(
            tune.with_resources(trainable, resources),
            param_space={"trial_id": tune.grid_search(list(payloads))},
            tune_config=tune.TuneConfig(
                reuse_actors=reuse_actors,
                # Short names: Tune's own names would embed the whole config.
                trial_name_creator=lambda t: t.config["trial_id"],
                trial_dirname_creator=lambda t: t.config["trial_id"],
            ),
            run_config=tune.RunConfig(
                name=name, storage_path=str(storage_dir), verbose=verbose,
                failure_config=tune.FailureConfig(max_failures=max_failures, fail_fast=False),
            ),
        )
        try:
            grid = tuner.fit()
        except Exception as e:  # noqa: BLE001 - Tune's own failure (not a trial's): say so plainly
            raise SweepError(f"Ray Tune failed: {type(e).__name__}: {e}") from e
        outcomes: dict[str, TrialOutcome] = {}
        for result in grid:
            trial_id = (result.config or {}).get("trial_id")
            if trial_id is None:
                continue
            error = None if result.error is None else f"{type(result.error).__name__}: {result.error}"
            metrics = {k: v for k, v in (result.metrics or {}).items() if k in _reported_keys(result)}
            outcomes[trial_id] = TrialOutcome(trial_id, finished=error is None and bool(metrics),
                                              metrics=metrics, error=error)
        for trial_id in payloads:  # a trial Tune never reported on counts as not finished
            outcomes.setdefault(trial_id, TrialOutcome(trial_id, finished=False, error="no result from Ray Tune"))
        return outcomes
    finally:
        if started:
            ray.shutdown()


# Keys Tune adds to every reported result; the trial's own metrics are the rest.
_TUNE_KEYS = frozenset({
    "timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id", "date", "time_this_iter_s",
    "time_total_s", "pid", "hostname", "node_ip", "config", "time_since_restore", "iterations_since_restore",
    "experiment_tag",
})


def _reported_keys(result: Any) -> set[str]:
    return {k for k in (result.metrics or {}) if k not in _TUNE_KEYS}
