"""Aggregate statistics over seeds: interquartile mean with a stratified
bootstrap 95% confidence interval (Agarwal et al., 2021), computed by rliable."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import textwrap
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval."""

    value: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict:
        return {"iqm": self.value, "ci_low": self.low, "ci_high": self.high, "n": self.n}

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def iqm(x: np.ndarray, axis: int | None = 0) -> np.ndarray:
    """Interquartile mean: mean of the middle 50% (25% trimmed from each end).

    The same numbers as `scipy.stats.trim_mean(x, 0.25, axis)` (the same partition
    and slice), without its argument-checking wrapper: the bootstrap behind every
    summary calls this 10,000 times, and the wrapper alone costs about 1 ms a call.
    For float64 (the bootstrap's case) the mean is `np.mean`'s own sum and division
    without its wrappers, which halves this function's time."""
    x = np.asarray(x)
    if axis is None:
        x, axis = x.ravel(), 0
    n = x.shape[axis]
    if n == 0:  # nothing to trim: NaN, as scipy gives
        return np.full(np.delete(x.shape, axis), np.nan)
    cut = int(0.25 * n)
    middle = np.partition(x, (cut, n - cut - 1), axis=axis)
    kept = middle[(slice(None),) * (axis % x.ndim) + (slice(cut, n - cut),)]
    if kept.dtype == np.float64:
        return np.add.reduce(kept, axis=axis) / (n - 2 * cut)
    return np.mean(kept, axis=axis)


def iqm_ci(scores: np.ndarray, reps: int = 2000, confidence: float = 0.95, seed: int = 0) -> list[Estimate]:
    """scores: [runs, points] -> one Estimate per point (column), each a bootstrap
    over the runs of that column. With a single run the interval collapses to the value.
    Inside `remembered`, an interval computed before is read back instead."""
    scores = np.asarray(scores, np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    runs = scores.shape[0]
    point = iqm(scores, axis=0)
    if runs < 2:
        return [Estimate(float(v), float(v), float(v), runs) for v in point]
    memo = _MEMO[-1] if _MEMO else None
    if memo is None:
        lo, hi = _bootstrap(scores, reps, confidence, seed)
    else:
        key = memo.key(scores, reps, confidence, seed)
        if key in memo.intervals:
            lo, hi = (np.asarray(v, np.float64) for v in memo.intervals[key])
            memo.read.append((scores, reps, confidence, seed))
        else:
            lo, hi = _bootstrap(scores, reps, confidence, seed)
            memo.intervals[key] = [lo.tolist(), hi.tolist()]
        memo.used.add(key)
    return [Estimate(float(p), float(a), float(b), runs) for p, a, b in zip(point, lo, hi)]


def _bootstrap(scores: np.ndarray, reps: int, confidence: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """rliable's stratified bootstrap interval of each column's IQM: (low [P], high [P])."""
    from rliable import library as rly

    # rliable's stratified bootstrap draws its resamples from numpy's global generator
    # (np.random.choice), whatever random_state it is given: seed that generator for the
    # call, so the interval is the same every time, and put its state back after
    outside = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():  # arch deprecates the RandomState that rliable passes
            warnings.simplefilter("ignore", FutureWarning)
            _, interval = rly.get_interval_estimates(
                {"scores": scores}, lambda s: iqm(s, axis=0), reps=reps,
                confidence_interval_size=confidence, random_state=np.random.RandomState(seed),
            )
    finally:
        np.random.set_state(outside)
    lo, hi = interval["scores"]
    return np.asarray(lo, np.float64), np.asarray(hi, np.float64)


@dataclass
class Remembered:
    """Intervals `iqm_ci` computed, by `key`: JSON-ready (`intervals`), with the keys read or
    added inside `remembered` (`used`) and the inputs of those read back (`read`)."""

    intervals: dict[str, list]
    used: set[str] = field(default_factory=set)
    read: list[tuple] = field(default_factory=list)

    def __post_init__(self):
        from importlib.metadata import version

        # What the numbers depend on besides the inputs: the code that computes them (not its comments
        # or docstrings), and rliable's, arch's and numpy's versions (arch's resampling draws from numpy's
        # legacy generator).
        code = _code(iqm) + _code(_bootstrap)
        self._salt = f"{code}|rliable {version('rliable')}|arch {version('arch')}|numpy {np.__version__}"

    def key(self, scores: np.ndarray, reps: int, confidence: float, seed: int) -> str:
        h = hashlib.sha256(self._salt.encode())
        h.update(repr((scores.shape, reps, float(confidence), seed)).encode())
        h.update(np.ascontiguousarray(scores, np.float64).tobytes())
        return h.hexdigest()


def _code(fn) -> str:
    """`fn`'s syntax tree as text, without its docstring: what its code does, not how it reads."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    body = tree.body[0].body    # type: ignore[attr-defined]
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        del body[0]
    return ast.dump(tree)


_MEMO: list[Remembered] = []


@contextlib.contextmanager
def remembered(memo: Remembered) -> Iterator[Remembered]:
    """Within, `iqm_ci` reads an interval from `memo.intervals` where the same scores,
    resamples, confidence and seed gave it before (under the same code and rliable, arch and
    numpy versions, which the key includes), and adds the ones it computes. For a page of
    several hundred intervals recomputed from results files that rarely change: a bootstrap
    of 10,000 resamples takes about half a second. `memo` (yielded) then says which keys were
    used (to drop the others) and which inputs were read back (to check some again)."""
    _MEMO.append(memo)
    try:
        yield memo
    finally:
        _MEMO.pop()


SUMMARY_REPS = 10_000  # bootstrap resamples behind a headline figure


def summarize(values: np.ndarray, reps: int = SUMMARY_REPS) -> Estimate:
    """values: [runs] -> IQM with its 95% bootstrap CI."""
    return iqm_ci(np.asarray(values).reshape(-1, 1), reps=reps)[0]
