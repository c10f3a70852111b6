"""The host engine: a `HostTrainer`'s run (a pretrained language model in PyTorch),
each seed's updates called one after another on the host.

A chunk is `chunk_steps` environment steps reserved per seed, counted as for the
compiled engine (`algo.num_envs` x the environment's max_steps per update, for
`lm_grpo`). Besides the run directory every run writes, the host engine writes
`samples.txt`: the last evaluation's first episodes, as the learner read and
wrote them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from coplay.algos import get_algo
from coplay.algos.base import HostTrainer
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.core.registry import ENVS
from coplay.experiment import checkpoint
from coplay.experiment.config import Experiment
from coplay.experiment.headline import EXPLOITABILITY, Headline, tree_baseline
from coplay.experiment.loop import Engine, Evaluation, chunk_schedule, latest_checkpoint, nanmean

# The random streams of `coplay eval`'s fresh episodes: numbers no training update or
# evaluation of a run uses.
FRESH = 1_000_000


class HostEngine(Engine):
    """Runs a `HostTrainer`, built (its model loaded) before any run directory exists."""

    learner: HostTrainer

    def __init__(self, exp: Experiment):
        exp.validate()
        run = exp.run
        for name in ("init_from", "init_params", "scalarise", "preference", "utopia", "reference_point", "social",
                     "minority"):
            if getattr(run, name) is not None:
                raise ConfigError(f"{name}= is not offered for algo={exp.algo}, which trains on the host "
                                  f"(it starts from its own config)")
        self.exp = exp
        self.env = ENVS.make(exp.env, **exp.env_config)
        try:
            self.schedule = chunk_schedule(exp, self.env.spec)
            self.learner = get_algo(exp.algo).factory(exp.algo_config, self.env, self.schedule.num_updates,
                                                      seeds=run.seeds, seed=run.seed)
        except BaseException:
            self.env.close()
            raise

    def restore(self, directory: Path) -> tuple[dict, Path]:
        state, meta, path = latest_checkpoint(directory, self.learner.state(), self.exp)
        self.learner.load_state(state)
        return meta, path

    def start(self, chunk: int) -> None:
        pass

    def train_chunk(self, chunk: int) -> dict[str, np.ndarray]:
        first, count = chunk * self.updates_per_chunk, self.schedule.updates_in(chunk)
        rows = [[self.learner.update(seed, first + u) for u in range(count)] for seed in range(self.exp.run.seeds)]
        return {k: np.asarray([[r[k] for r in seed] for seed in rows], np.float64) for k in rows[0][0]}

    def evaluate(self, chunk: int, last: bool) -> Evaluation:
        return self._evaluate(chunk, self.exp.run.eval_episodes)

    def _evaluate(self, number: int, episodes: int) -> Evaluation:
        results = [self.learner.evaluate(seed, number, episodes) for seed in range(self.exp.run.seeds)]
        return {k: np.stack([r[k] for r in results]) for k in results[0]}

    def state(self) -> Any:
        return self.learner.state()

    def baseline(self, headline: Headline) -> float | None:
        """Uniform play among the legal moves, where the game's tree scores it exactly."""
        return tree_baseline(self.env) if headline is EXPLOITABILITY else None

    def finish(self, run_dir: Path, rows: list[dict], evals: list[tuple[int, Evaluation]]) -> dict:
        samples = self.learner.samples()
        if samples:
            checkpoint.atomic_write(run_dir / "samples.txt", "\n\n".join(
                f"dialogue {i + 1}:\n" + "\n".join(f"  {line}" for line in d)
                for i, d in enumerate(samples)).encode())
        config = self.exp.algo_config
        fields = {k: getattr(config, k) for k in ("model", "estimator") if hasattr(config, k)}
        # in float64: an evaluation restored from a checkpoint's metadata is float64, one made now float32
        return {**fields, "curve": [{"env_steps": s, **{k: float(np.mean(nanmean(v))) for k, v in e.items()}}
                                    for s, e in evals]}

    def close(self) -> None:
        self.env.close()

    # ----- playing a finished run (`coplay eval`, tournaments) ------------------------------------
    def policy(self) -> Policy:
        return self.learner.policy()

    def policy_params(self) -> Any:
        return self.learner.policy_params()

    def fresh_evaluation(self, episodes: int, seed: int) -> Evaluation:
        return self._evaluate(FRESH + seed, episodes)

    def dialogues(self, count: int, seed: int) -> list[list[str]]:
        return self.learner.samples()[:count]
