"""Does value factorisation beat independent Q-learning on cooperative foraging?

    python benchmarks/q_foraging.py                   # every configuration below
    python benchmarks/q_foraging.py --steps 250000 --seeds 2

Trains IQL (on its own reward, and on the team reward as VDN and QMIX learn),
VDN and QMIX on foraging configurations where food needs several agents, with
the same Q settings for all (coplay's defaults with 3-step returns and batches
of 256), and writes the greedy policies' per-agent returns, one column per
seed, to BENCHMARKS.md. The per-agent maximum is 1 / n_agents (the team's
rewards for an episode add up to 1 when all food is eaten). A uniformly random
policy's return is measured in the same run."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write_section  # noqa: E402
from train_throughput import machine  # noqa: E402

import coplay  # noqa: E402
from coplay.algos.common.evaluation import make_evaluator  # noqa: E402
from coplay.experiment.config import parse_overrides  # noqa: E402
from coplay.experiment.compiled import init_state, plan  # noqa: E402


def random_return(env: list[str], episodes: int = 512) -> float:
    """Per-agent return of the uniform random legal policy (an epsilon-greedy policy with epsilon 1)."""
    p = plan(parse_overrides(["algo=iql", *SHARED, *env, "algo.eval_epsilon=1.0", "seeds=1", "algo.learning_starts=0"]))
    params = jax.tree.map(lambda x: x[0], p.trainer.policy_params(init_state(p)))
    out = jax.jit(make_evaluator(p.trainer.policy(), episodes))(params, jax.random.PRNGKey(7))
    return float(np.mean(out["return"]))

CONFIGS = {
    "5x5, 2 agents, 1 food needing both, 25 steps":
        ["env.grid_size=5", "env.n_food=1", "env.force_coop=true", "env.max_steps=25"],
    "6x6, 2 agents, 2 food needing both, 40 steps":
        ["env.grid_size=6", "env.n_food=2", "env.force_coop=true", "env.max_steps=40"],
    "7x7, 4 agents of level 1, 3 food of level 1-2, sight 1, 40 steps":
        ["env.grid_size=7", "env.n_agents=4", "env.max_agent_level=1", "env.n_food=3", "env.sight=1",
         "env.max_steps=40"],
}
ALGOS = {"IQL (own reward)": ["algo=iql"], "IQL (team reward)": ["algo=iql", "algo.reward=team"],
         "VDN": ["algo=vdn"], "QMIX": ["algo=qmix"]}
SHARED = ["env=foraging", "algo.n_step=3", "algo.batch_size=256", "eval_episodes=64", "eval_every=0",
          "progress=false", "tensorboard=false"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=500_000)
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="coplay-q-foraging-")
    run = [f"total_steps={args.steps}", f"chunk_steps={args.steps // 5}", f"seeds={args.seeds}", f"out_dir={out}"]
    results, lines = {}, [
        f"Machine: {machine()}. Command: `python benchmarks/q_foraging.py"
        + (f" --steps {args.steps}" if args.steps != 500_000 else "")
        + (f" --seeds {args.seeds}" if args.seeds != 2 else "") + "`.", "",
        f"{args.steps:,} environment steps per seed, {args.seeds} seeds; per-agent return of the greedy policy over "
        "64 episodes, one figure per seed. Q settings shared by all: coplay's defaults with `algo.n_step=3 "
        "algo.batch_size=256`.", "",
        "| configuration | random | " + " | ".join(ALGOS) + " |", "|---|---|" + "---|" * len(ALGOS)]
    for name, env in CONFIGS.items():
        row = {"random": random_return(env)}
        for label, algo in ALGOS.items():
            result = coplay.train([*algo, *SHARED, *env, *run])
            row[label] = result.final_return["per_seed"]
            print(f"{name} | {label}: {np.round(row[label], 3).tolist()}", flush=True)
        results[name] = row
        cells = [" / ".join(f"{v:.2f}" for v in row[label]) for label in ALGOS]
        lines.append(f"| {name} | {row['random']:.2f} | " + " | ".join(cells) + " |")
    path = ROOT / "benchmarks" / "results" / "q_foraging.json"
    path.write_text(json.dumps({"machine": machine(), "steps": args.steps, "seeds": args.seeds, "rows": results},
                               indent=2))
    write_section("q_foraging", "\n".join(lines))


if __name__ == "__main__":
    main()
