"""Statistics and evaluation of trained policies."""

from coplay.eval.stats import Estimate, iqm, iqm_ci, summarize

__all__ = ["Estimate", "iqm", "iqm_ci", "summarize"]
