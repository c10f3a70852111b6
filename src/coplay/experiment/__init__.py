"""Runs: config, seeds, the chunked compiled loop, logging, checkpoints, resume, reports."""

from coplay.experiment.config import Experiment, RunConfig, parse_overrides
from coplay.experiment.runner import RunResult, train

__all__ = ["Experiment", "RunConfig", "RunResult", "parse_overrides", "train"]
