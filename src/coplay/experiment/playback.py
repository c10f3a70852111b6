"""Load a finished (or interrupted) run and evaluate it: `coplay eval <run dir>`.
Whatever engine trained the run loads it and plays it again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.eval.stats import summarize
from coplay.experiment.config import Experiment
from coplay.experiment.evaluate import save_gif
from coplay.experiment.loop import Engine
from coplay.experiment.outputs import check_output
from coplay.experiment.runner import build_engine


@dataclass
class LoadedRun:
    """A run's newest checkpoint, ready to act: `params` has the seeds on its leading axis."""

    exp: Experiment
    engine: Engine
    meta: dict
    path: Path

    @property
    def policy(self) -> Policy:
        return self.engine.policy()

    @property
    def params(self) -> Any:
        return self.engine.policy_params()

    @property
    def state(self) -> Any:
        """The state the checkpoint held (a compiled run's TrainState, seeds on the leading axis)."""
        return self.engine.state()


def load_run(run_dir: Path | str) -> LoadedRun:
    """The newest checkpoint of a run directory written by `coplay train`."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists():
        raise ConfigError(f"{run_dir} is not a coplay run directory (no config.yaml)")
    exp = Experiment.load(run_dir / "config.yaml")
    engine = build_engine(exp)
    try:
        meta, path = engine.restore(run_dir / "checkpoints")
    except BaseException:
        engine.close()
        raise
    return LoadedRun(exp, engine, meta, path)


def evaluate_run(run_dir: Path, episodes: int = 32, gif: bool = True, seed: int = 12345, dialogues: int = 2) -> dict:
    """Evaluate the run's newest checkpoint: `episodes` per seed. Returns the
    per-seed mean returns, their IQM and 95% CI, the evaluator's other measures
    (means over seeds and episodes), the GIF path if one was written, on a text
    environment `dialogues` sample dialogues of seed 0 (lists of lines), and for a
    trainer of several objectives `front`: each seed's front, its hypervolume and
    expected utility (IQM and 95% CI over seeds) against the run's reference point."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"episodes={episodes!r}: evaluation needs a whole number of at least 1 episode per seed")
    if gif:   # refused before the checkpoint is loaded, not after the evaluation
        check_output(Path(run_dir) / "episode.gif", "file", what="episode animation",
                     fix="coplay eval --no-gif leaves it out")
    run = load_run(run_dir)
    engine, run_dir = run.engine, Path(run_dir)
    try:
        results = engine.fresh_evaluation(episodes, seed)
        per_seed = np.asarray(results["return"]).mean(-1)
        measures = {k: float(np.mean(v)) for k, v in results.items() if k not in ("return", "finished")}
        out = {"checkpoint": str(run.path), "env_steps": run.meta.get("env_steps"), "per_seed": per_seed.tolist(),
               "return": summarize(per_seed), "episodes": episodes, "measures": measures, "gif": None,
               "dialogues": engine.dialogues(dialogues, seed + 1)}
        front = engine.front(results)          # several objectives: each seed's front, scored as in training
        if front is not None:
            q = front["quality"]
            out["front"] = {"per_seed": front["points"].tolist(), "reference_point": front["reference"].tolist(),
                            "hypervolume": summarize(q["hypervolume"][:, 0]),
                            "hypervolume_per_seed": q["hypervolume"][:, 0].tolist(),
                            "expected_utility": summarize(q["expected_utility"][:, 0]),
                            "below_reference": int(q["below_reference"].sum())}
        if gif:
            frames = engine.frames(seed)
            if frames:
                gif_path = run_dir / "episode.gif"
                save_gif(frames, gif_path)
                out["gif"] = str(gif_path)
        return out
    finally:
        engine.close()
