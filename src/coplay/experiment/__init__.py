"""Runs: config, the run directory, the one run loop and its two engines (compiled, host),
logging, checkpoints, resume, reports."""

from coplay.experiment.config import Experiment, RunConfig, parse_overrides
from coplay.experiment.loop import RunResult
from coplay.experiment.runner import train

__all__ = ["Experiment", "RunConfig", "RunResult", "parse_overrides", "train"]
