"""Meta-solvers: mixed strategies for a two-player game given as a payoff matrix.

Population methods (PSRO, fictitious play) reduce a large game to a small
normal-form "meta-game" between the policies found so far and ask a solver
which mixture of them to play. `payoffs[i, j]` is the row player's payoff
when row policy i meets column policy j; the games here are zero-sum, so the
column player receives minus it.

- `nash`: an exact Nash equilibrium by linear programming (von Neumann's
  minimax theorem; scipy's HiGHS solver).
- `replicator`: the time average of discrete replicator dynamics from the
  uniform mixture (which approaches equilibrium in zero-sum games).
- `uniform`: every policy equally likely; PSRO with it is fictitious play
  over the population.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from coplay.core.errors import ConfigError, SolverError

META_SOLVERS = ("nash", "replicator", "uniform")


def _maximin(payoffs: np.ndarray) -> tuple[np.ndarray, float]:
    """The row player's maximin mixture of a zero-sum game and its value."""
    rows, cols = payoffs.shape
    # Variables: the mixture x (rows) and the value v. Maximise v subject to
    # x . payoffs[:, j] >= v for every column j, sum x = 1, x >= 0.
    cost = np.zeros(rows + 1)
    cost[-1] = -1.0
    a_ub = np.hstack([-payoffs.T, np.ones((cols, 1))])
    a_eq = np.hstack([np.ones((1, rows)), np.zeros((1, 1))])
    bounds = [(0, None)] * rows + [(None, None)]
    res = linprog(cost, A_ub=a_ub, b_ub=np.zeros(cols), A_eq=a_eq, b_eq=[1.0], bounds=bounds, method="highs")
    if not res.success:
        raise SolverError(f"the Nash linear program failed: {res.message}")
    x = np.clip(res.x[:rows], 0.0, None)
    return x / x.sum(), float(res.x[-1])


def zero_sum_nash(payoffs: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A Nash equilibrium `(row mixture, column mixture, row player's value)` of a zero-sum game."""
    payoffs = np.asarray(payoffs, np.float64)
    x, value = _maximin(payoffs)
    y, _ = _maximin(-payoffs.T)
    return x, y, value


def replicator(payoffs: np.ndarray, steps: int = 5000, lr: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Time-averaged two-population replicator dynamics of a zero-sum game, from uniform."""
    payoffs = np.asarray(payoffs, np.float64)
    rows, cols = payoffs.shape
    x, y = np.full(rows, 1.0 / rows), np.full(cols, 1.0 / cols)
    x_sum, y_sum = np.zeros(rows), np.zeros(cols)
    for _ in range(steps):
        fx, fy = payoffs @ y, -(x @ payoffs)
        # The multiplicative (exponential) form keeps the mixtures on the simplex.
        x = x * np.exp(lr * (fx - x @ fx))
        y = y * np.exp(lr * (fy - y @ fy))
        x, y = x / x.sum(), y / y.sum()
        x_sum += x
        y_sum += y
    return x_sum / steps, y_sum / steps


def solve_meta_game(payoffs: np.ndarray, solver: str) -> tuple[np.ndarray, np.ndarray]:
    """Mixtures `(over rows, over columns)` chosen by meta-solver `solver`."""
    if solver == "nash":
        x, y, _ = zero_sum_nash(payoffs)
        return x, y
    if solver == "replicator":
        return replicator(payoffs)
    if solver == "uniform":
        rows, cols = np.shape(payoffs)
        return np.full(rows, 1.0 / rows), np.full(cols, 1.0 / cols)
    raise ConfigError(f"meta-solver {solver!r} is not one of {', '.join(META_SOLVERS)}")
