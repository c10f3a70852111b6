"""A run with several objectives: each seed's front, how good it is, and front.png.

A multi-objective trainer (`Trainer.fronts` set) trains several policies per
seed; every evaluation gives each seed a set of vector returns (`Fronts.read`).
Each seed's set is scored against the environment's reference point, which
every multi-objective environment names in code (`env.reference_point`), or
which the run gives (`reference_point=0:-10`, for an environment from elsewhere):

    hypervolume         the volume the set dominates above the reference point
    expected_utility    the mean, over weights spread evenly on the simplex, of the
                        best linear utility in the set (Zintgraf et al., 2015)

Both are one value per seed, so metrics.csv has their curves and summary.json
their IQM with a 95% CI over seeds, like every other evaluation figure.
summary.json also keeps each seed's final front, the reference point and, where
the environment computes its true front (`env.true_front()`), that front and its
hypervolume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from coplay.algos.common.preferences import grid_sizes, simplex_weights
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.eval.multi_objective import expected_utility, hypervolume, pareto_front
from coplay.wrappers.scalarise import named_reference_point, true_front

# The expected utility averages over at least this many weights, evenly spread.
UTILITY_WEIGHTS = 100


def reference_point(env: Env, given: tuple[float, ...] | None = None) -> np.ndarray:
    """`[K]`: the reference point a run gives (`reference_point=0:-10`), else the
    environment's, weakly worse than every episode return; refused, before anything
    compiles, where there is none or it has the wrong length."""
    k = env.spec.reward_dim
    ref = named_reference_point(env) if given is None else np.asarray(given, np.float64)
    if ref is None:
        raise ConfigError(f"environment {env.spec.name!r} names no reference point, and a run with several "
                          "objectives scores each front's hypervolume against one: give one, "
                          f"reference_point=... ({k} numbers separated by ':', weakly worse than every episode "
                          "return in each objective)")
    if ref.shape != (k,) or not np.all(np.isfinite(ref)):
        raise ConfigError(f"the reference point of {env.spec.name!r} must be {k} finite numbers (one per objective: "
                          f"{', '.join(env.spec.objective_names)}), got {ref.tolist()}")
    truth = true_front(env)
    if truth is not None and np.any(truth < ref):
        point = truth[np.argmax(np.any(truth < ref, axis=1))]
        names = ", ".join(n for n, below in zip(env.spec.objective_names, point < ref) if below)
        raise ConfigError(f"the reference point {ref.tolist()} of {env.spec.name!r} is not weakly worse than every "
                          f"point of its true front: {point.tolist()} is below it in {names}, so that point would "
                          "add nothing to the hypervolume; give a reference point at or below "
                          f"{truth.min(0).tolist()} in every objective")
    return ref


def utility_weights(k: int) -> np.ndarray:
    """The weights the expected utility averages over: the first even grid over the
    simplex of `k` objectives with at least `UTILITY_WEIGHTS` of them."""
    divisions = len(grid_sizes(k, UTILITY_WEIGHTS - 1)) + 1
    return simplex_weights(k, divisions)


def quality(points: np.ndarray, ref: np.ndarray) -> dict[str, np.ndarray]:
    """points: `[S, P, K]` -> `hypervolume`, `expected_utility` and `below_reference`,
    each `[S, 1]` (one value per seed, shaped like an evaluation's per-episode
    results). A point below the reference point in some objective adds nothing to
    the hypervolume (as in moocore and pymoo), and `below_reference` counts such
    points, so that a reference point set too high shows in metrics.csv instead of
    stopping the run."""
    k = points.shape[-1]
    weights = utility_weights(k)
    above = [p[np.all(p >= ref, axis=1)] for p in points]
    return {"hypervolume": np.array([[hypervolume(a, ref) if len(a) else 0.0] for a in above]),
            "expected_utility": np.array([[expected_utility(p, weights)] for p in points]),
            "below_reference": np.array([[float(len(p) - len(a))] for p, a in zip(points, above)])}


def summary(points: np.ndarray, env: Env, preferences: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """The `front` entry of summary.json: objective names, reference point, the
    weights, each seed's front (its non-dominated points) and, where known, the true
    front and its hypervolume."""
    out: dict[str, Any] = {
        "objectives": list(env.spec.objective_names), "reference_point": ref.tolist(),
        "weights": np.asarray(preferences).tolist(),
        "per_seed": [pareto_front(p).tolist() for p in points],
    }
    truth = true_front(env)
    if truth is not None:
        out["true_front"] = truth.tolist()
        out["true_hypervolume"] = hypervolume(truth, ref)
    return out


def plot_front(path: Path, points: np.ndarray, names: tuple[str, ...], truth: np.ndarray | None,
               title: str) -> Path:
    """front.png: each seed's vector returns (every objective pair, for more than two),
    its front joined, and the true front where known."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from coplay.experiment.report import save_figure

    k = points.shape[-1]
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    fig, axes = plt.subplots(1, len(pairs), figsize=(5 * len(pairs), 4.5), dpi=100, squeeze=False)
    for ax, (i, j) in zip(axes[0], pairs):
        if truth is not None:
            order = np.argsort(truth[:, i])
            ax.plot(truth[order, i], truth[order, j], color="0.6", marker="s", ms=4, lw=1, label="true front")
        for s, p in enumerate(points):
            front = pareto_front(p) if k == 2 else p
            order = np.argsort(front[:, i])
            ax.plot(front[order, i], front[order, j], marker="o", ms=4, lw=1 if k == 2 else 0, alpha=0.8,
                    color=f"C{s % 10}", label=f"seed {s}" if s < 10 else None)
        ax.set_xlabel(names[i])
        ax.set_ylabel(names[j])
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="best", fontsize=8)
    fig.suptitle(title)
    return save_figure(fig, Path(path))
