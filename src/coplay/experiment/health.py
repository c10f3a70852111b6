"""Divergence that is not (yet) NaN: a run's metrics checked, chunk by chunk,
against what a healthy run of its algorithm keeps to (`Trainer.health()`).

A run that leaves it goes on (stopping is for non-finite values only), and the
warning goes to the log (standard error) and into summary.json's `warnings`;
it travels with the checkpoints, so a resumed run keeps its earlier warnings.
Each measure warns once per run, at the first chunk that breaks it, with the
seeds it affected."""

from __future__ import annotations

import numpy as np

from coplay.algos.base import Health


class HealthWatch:
    """Checks each chunk's metrics (`name -> [seeds, updates]`) against `health`."""

    def __init__(self, health: Health, updates_per_chunk: int, steps_per_update: int, saved: dict | None = None):
        self.health = health
        self.updates_per_chunk = updates_per_chunk
        self.steps_per_update = steps_per_update
        saved = saved or {}
        self.warnings: list[str] = list(saved.get("warnings", []))
        # steady loss -> smallest per-seed chunk mean so far
        self.lowest = {k: np.asarray(v, np.float64) for k, v in saved.get("lowest", {}).items()}
        self.warned = {w.split(" ", 1)[0] for w in self.warnings}

    def saved(self) -> dict:
        """What a checkpoint keeps, so that a resumed run watches as if it had never stopped."""
        return {"warnings": self.warnings, "lowest": {k: v.tolist() for k, v in self.lowest.items()}}

    def _where(self, chunk: int, update: int) -> str:
        at = chunk * self.updates_per_chunk + update
        return f"at update {at} (chunk {chunk}, env step ~{at * self.steps_per_update})"

    def check(self, chunk: int, metrics: dict) -> list[str]:
        """The new warnings for this chunk (also kept in `self.warnings`)."""
        new = []
        for name, (low, high, why) in self.health.ranges.items():
            if name not in metrics or name in self.warned:
                continue
            values = np.asarray(metrics[name], np.float64)
            outside = np.isfinite(values) & ((values < low) | (values > high))
            if outside.any():
                seed, update = map(int, np.argwhere(outside)[0])
                seeds = sorted({int(s) for s in np.argwhere(outside)[:, 0]})
                new.append(f"{name} reached {values[seed, update]:.4g} in seed {seed} {self._where(chunk, update)}, "
                           f"outside [{low:.3g}, {high:.3g}] ({why}); seeds affected: {seeds}. The run may be "
                           f"diverging: try a lower algo.lr")
                self.warned.add(name)
        for name in self.health.steady:
            if name not in metrics:
                continue
            with np.errstate(all="ignore"):
                level = np.nanmean(np.abs(np.asarray(metrics[name], np.float64)), axis=-1)  # [seeds]
            lowest = self.lowest.get(name)
            if lowest is not None and name not in self.warned:
                grown = level / np.maximum(lowest, 1e-8)
                if np.nanmax(grown) >= self.health.growth:
                    seed = int(np.nanargmax(grown))
                    seeds = [int(s) for s in np.flatnonzero(grown >= self.health.growth)]
                    new.append(f"{name} grew {grown[seed]:.3g}-fold in seed {seed}, to {level[seed]:.4g} in chunk "
                               f"{chunk} from {lowest[seed]:.4g} earlier in the run; seeds affected: {seeds}. The "
                               f"run may be diverging: try a lower algo.lr")
                    self.warned.add(name)
            self.lowest[name] = level if lowest is None else np.fmin(lowest, level)
        self.warnings += new
        return new
