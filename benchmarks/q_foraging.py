"""Does value factorisation beat independent Q-learning on cooperative foraging?

    python benchmarks/q_foraging.py                   # every configuration below
    python benchmarks/q_foraging.py --steps 250000 --seeds 2

Trains IQL (on its own reward, and on the team reward as VDN and QMIX learn),
VDN and QMIX on foraging configurations where food needs several agents, with
the same Q settings for all (coplay's defaults with 3-step returns and batches
of 256), and writes the greedy policies' per-agent returns, one column per
seed, to benchmarks/results/q_foraging.json, then BENCHMARKS.md (benchmarks/page.py).
The per-agent maximum is 1 / n_agents (the team's
rewards for an episode add up to 1 when all food is eaten). A uniformly random
policy's return is measured in the same run."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.algos.common.evaluation import make_evaluator  # noqa: E402
from coplay.experiment.compiled import init_state, plan  # noqa: E402
from coplay.experiment.config import parse_overrides  # noqa: E402


def random_return(env: list[str], episodes: int = 512) -> float:
    """Per-agent return of the uniform random legal policy (an epsilon-greedy policy with epsilon 1)."""
    p = plan(parse_overrides(["algo=iql", *SHARED, *env, "algo.eval_epsilon=1.0", "seeds=1", "algo.learning_starts=0"]))
    params = jax.tree.map(lambda x: x[0], p.trainer.policy_params(init_state(p)))
    out = jax.jit(make_evaluator(p.trainer.policy(), episodes))(params, jax.random.PRNGKey(7))
    return float(np.mean(out["return"]))

RESULTS = "q_foraging.json"
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
          "progress=false", "logger=csv"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=500_000)
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="coplay-q-foraging-")
    run = [f"total_steps={args.steps}", f"chunk_steps={args.steps // 5}", f"seeds={args.seeds}", f"out_dir={out}"]
    results = {}
    for name, env in CONFIGS.items():
        row = {"random": random_return(env)}
        for label, algo in ALGOS.items():
            result = coplay.train([*algo, *SHARED, *env, *run])
            row[label] = result.final_return["per_seed"]
            print(f"{name} | {label}: {np.round(row[label], 3).tolist()}", flush=True)
        results[name] = row
    write_results("q_foraging", {**stamp(), "steps": args.steps, "seeds": args.seeds, "rows": results})
    regenerate_page()


def section(data: dict) -> str:
    algos = [k for k in next(iter(data["rows"].values())) if k != "random"]
    rows = [[name, f"{row['random']:.2f}", *[" / ".join(f"{v:.2f}" for v in row[a]) for a in algos]]
            for name, row in data["rows"].items()]
    return "\n".join([
        "## Value factorisation against independent Q-learning on cooperative foraging", "",
        f"`python benchmarks/q_foraging.py --steps {data['steps']} --seeds {data['seeds']}` on {data['machine']}. "
        f"{data['steps']:,} environment steps per seed, {data['seeds']} seeds; per-agent return of the greedy policy "
        "over 64 episodes, one figure per seed. Q settings shared by all: coplay's defaults with `algo.n_step=3 "
        "algo.batch_size=256`.", "",
        *table(["configuration", "random", *algos], rows)])


def claims(data: dict) -> list[dict]:
    return []

if __name__ == "__main__":
    main()
