"""Writes tests/data/legacy_runs/: tiny finished runs (config.yaml and the last
checkpoint) made by coplay as of commit ea11801, before the explicit algorithm
contract. tests/test_legacy_runs.py checks that today's coplay still loads and
evaluates them. Run from the repository root with that commit's coplay on the path:

    python tests/data/make_legacy_runs.py
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import coplay

OUT = Path(__file__).resolve().parent / "legacy_runs"
SMALL = {"total_steps": 1024, "chunk_steps": 512, "seeds": 2, "eval_episodes": 4, "progress": False,
         "tensorboard": False, "keep_checkpoints": 1}
RUNS = {
    "mappo-spread": {"algo": {"name": "mappo", "hidden_size": 8, "num_envs": 4, "rollout_len": 8},
                     "env": {"name": "spread"}},
    "ippo-spread": {"algo": {"name": "ippo", "hidden_size": 8, "num_envs": 4, "rollout_len": 8},
                    "env": {"name": "spread"}},
    "mappo-gru-spread": {"algo": {"name": "mappo", "hidden_size": 8, "num_envs": 4, "rollout_len": 8,
                                  "recurrent": True, "minibatches": 2}, "env": {"name": "spread"}},
    "qmix-two_step": {"algo": {"name": "qmix", "hidden_size": 8, "num_envs": 4, "rollout_len": 4,
                               "learning_starts": 64, "buffer_size": 256, "batch_size": 8,
                               "mixer_embed": 4, "hypernet_hidden": 8}, "env": {"name": "two_step"}},
    "iql-spread": {"algo": {"name": "iql", "hidden_size": 8, "num_envs": 4, "rollout_len": 4,
                            "learning_starts": 64, "buffer_size": 256, "batch_size": 8}, "env": {"name": "spread"}},
    "selfplay_ppo-tic_tac_toe": {"algo": {"name": "selfplay_ppo", "hidden_size": 8, "num_envs": 8,
                                          "rollout_len": 8, "pool_size": 2, "snapshot_every": 1},
                                 "env": {"name": "tic_tac_toe"}},
}


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in RUNS.items():
            result = coplay.train({**cfg, **SMALL, "out_dir": tmp, "name": name})
            dest = OUT / name
            (dest / "checkpoints").mkdir(parents=True)
            shutil.copy(result.run_dir / "config.yaml", dest / "config.yaml")
            for ckpt in (result.run_dir / "checkpoints").iterdir():
                shutil.copy(ckpt, dest / "checkpoints" / ckpt.name)
            print(name, result.final_return)


if __name__ == "__main__":
    main()
