"""Load a finished (or interrupted) run and evaluate it: `coplay eval <run dir>`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.algos import get_algo
from coplay.algos.base import Policy
from coplay.core.compile import jit_once
from coplay.core.errors import ConfigError
from coplay.eval.stats import summarize
from coplay.experiment import fronts
from coplay.experiment.config import Experiment
from coplay.experiment.evaluate import record_dialogue, record_episode, save_gif
from coplay.experiment.runner import Plan, init_state, latest_checkpoint, plan
from coplay.lm import LM_KIND


@dataclass
class LoadedRun:
    """A run's newest checkpoint, ready to act: `params` has the seeds on its leading axis."""

    exp: Experiment
    plan: Plan
    state: Any
    meta: dict
    path: Path

    @property
    def policy(self) -> Policy:
        return self.plan.trainer.policy()

    @property
    def params(self) -> Any:
        return self.plan.trainer.policy_params(self.state)


def load_run(run_dir: Path | str) -> LoadedRun:
    """The newest checkpoint of a run directory written by `coplay train`."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists():
        raise ConfigError(f"{run_dir} is not a coplay run directory (no config.yaml)")
    exp = Experiment.load(run_dir / "config.yaml")
    if get_algo(exp.algo).kind == LM_KIND:   # a language model's adapters, played on the host
        from coplay.experiment.lm_run import load_lm_run

        return load_lm_run(run_dir)   # type: ignore[return-value]  # LoadedRun's members that players read
    p = plan(exp)
    state, meta, path = latest_checkpoint(run_dir / "checkpoints", init_state(p), exp)
    return LoadedRun(exp, p, state, meta, path)


def evaluate_run(run_dir: Path, episodes: int = 32, gif: bool = True, seed: int = 12345, dialogues: int = 2) -> dict:
    """Evaluate the run's newest checkpoint: `episodes` per seed. Returns the
    per-seed mean returns, their IQM and 95% CI, the evaluator's other measures
    (means over seeds and episodes), the GIF path if one was written, on a text
    environment `dialogues` sample dialogues of seed 0 (lists of lines), and for a
    trainer of several objectives `front`: each seed's front, its hypervolume and
    expected utility (IQM and 95% CI over seeds) against the run's reference point."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"episodes={episodes!r}: evaluation needs a whole number of at least 1 episode per seed")
    if get_algo(Experiment.load(Path(run_dir) / "config.yaml").algo).kind == LM_KIND:
        from coplay.experiment.lm_run import evaluate_lm_run

        return evaluate_lm_run(Path(run_dir), episodes, seed)
    run = load_run(run_dir)
    exp, p, meta, path = run.exp, run.plan, run.meta, run.path
    run_dir = Path(run_dir)
    policy = run.policy
    params = run.params
    evaluate = jit_once(jax.vmap(p.trainer.evaluator(episodes)))  # runs once
    keys = jax.random.split(jax.random.PRNGKey(seed), exp.run.seeds)
    results = jax.device_get(evaluate(params, keys))
    per_seed = np.asarray(results["return"]).mean(-1)
    measures = {k: float(np.mean(v)) for k, v in results.items() if k not in ("return", "finished")}
    seed0 = jax.tree.map(lambda x: x[0], params)
    talks = [record_dialogue(policy, seed0, k) for k in jax.random.split(jax.random.PRNGKey(seed + 1), dialogues)]
    out = {"checkpoint": str(path), "env_steps": meta.get("env_steps"), "per_seed": per_seed.tolist(),
           "return": summarize(per_seed), "episodes": episodes, "measures": measures, "gif": None,
           "dialogues": [t for t in talks if t]}
    points = p.trainer.front(results)          # several objectives: each seed's front, scored as in training
    if points is not None:
        assert p.reference is not None, "plan() sets it for a trainer with preferences"
        q = fronts.quality(points, p.reference)
        out["front"] = {"per_seed": points.tolist(), "reference_point": p.reference.tolist(),
                        "hypervolume": summarize(q["hypervolume"][:, 0]),
                        "hypervolume_per_seed": q["hypervolume"][:, 0].tolist(),
                        "expected_utility": summarize(q["expected_utility"][:, 0]),
                        "below_reference": int(q["below_reference"].sum())}
    if gif:
        frames = record_episode(policy, seed0, jax.random.PRNGKey(seed))
        if frames:
            gif_path = run_dir / "episode.gif"
            save_gif(frames, gif_path)
            out["gif"] = str(gif_path)
    return out
