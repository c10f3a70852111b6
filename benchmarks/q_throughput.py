"""Q-learning training throughput (IQL, VDN, QMIX) on `spread` and `foraging` at
a fixed budget, with the return reached.

    python benchmarks/q_throughput.py                # every row
    python benchmarks/q_throughput.py --budget 200000 --only spread

Each row is one seed trained for the budget, timed like train_throughput.py
(compile apart from the steady state; the steady-state time includes acting,
replay writes and sampling, and every gradient step). Returns are per-agent
episode returns of the greedy policy over 32 evaluation episodes.
Results go to benchmarks/results/q_throughput.json and BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write_section  # noqa: E402
from coplay.experiment.config import parse_overrides  # noqa: E402
from train_throughput import machine, timed_run  # noqa: E402

ENVS = {
    "spread": ["env=spread"],
    "foraging": ["env=foraging", "env.grid_size=6"],  # 2 agents, 2 food, 50 steps
}
ROWS = [
    ("iql", "feed-forward", []),
    ("vdn", "feed-forward", []),
    ("qmix", "feed-forward", []),
    # JaxMARL's Q-learning sizes for MPE: GRU agents of 64 units, 8 envs, batches of 32 windows
    ("iql", "GRU, JaxMARL sizes", ["algo.recurrent=true", "algo.num_envs=8", "algo.rollout_len=26",
                                   "algo.batch_size=32", "algo.grad_steps=1", "algo.seq_len=26"]),
    ("qmix", "GRU, JaxMARL sizes", ["algo.recurrent=true", "algo.num_envs=8", "algo.rollout_len=26",
                                    "algo.batch_size=32", "algo.grad_steps=1", "algo.seq_len=26"]),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=300_000)
    ap.add_argument("--only", choices=tuple(ENVS))
    args = ap.parse_args()
    results = {"machine": machine(), "budget": args.budget, "rows": []}
    lines = [f"Machine: {machine()}. Command: `python benchmarks/q_throughput.py"
             + (f" --budget {args.budget}" if args.budget != 300_000 else "")
             + (f" --only {args.only}" if args.only else "") + "`.", "",
             f"One seed, {args.budget:,} environment steps asked (rounded up to whole 50k-step chunks: "
             "{steps} run), coplay's Q defaults unless noted (16 envs x 8 steps "
             "per update, 2 gradient steps of 64 windows, MLP 2x64 relu). Return: per-agent episode return of the "
             "greedy policy, 32 episodes; a uniformly random policy gets about -27.7 on spread. JaxMARL's Q-learning "
             "scripts were not run beside these rows.", "",
             "| env | algo | agent network | env-steps/s | gradient steps/s | train s | compile s | return |",
             "|---|---|---|---|---|---|---|---|"]
    for env, env_args in ENVS.items():
        if args.only and env != args.only:
            continue
        for algo, label, extra in ROWS:
            overrides = [f"algo={algo}", *env_args, *extra, f"total_steps={args.budget}", "seeds=1",
                         "chunk_steps=50000", "eval_episodes=32"]
            r = timed_run(overrides)
            c = parse_overrides(overrides).algo_config
            grad_sps = r["env_steps_per_s_per_seed"] / (c.num_envs * c.rollout_len) * c.grad_steps
            r.update({"env": env, "algo": algo, "network": label, "grad_steps_per_s": grad_sps})
            results["rows"].append(r)
            print(f"{env} {algo} {label}: {r['env_steps_per_s_per_seed']:,.0f} env-steps/s, "
                  f"return {r['final_return_iqm']['iqm']:.2f}", flush=True)
            lines.append(f"| {env} | {algo} | {label} | {r['env_steps_per_s_per_seed']:,.0f} | {grad_sps:,.0f} | "
                         f"{r['train_s']:.1f} | {r['compile_s']:.1f} | {r['final_return_iqm']['iqm']:.2f} |")
    steps = ", ".join(f"{n:,}" for n in sorted({r["env_steps_per_seed"] for r in results["rows"]}))
    lines[2] = lines[2].replace("{steps}", steps)
    path = ROOT / "benchmarks" / "results" / "q_throughput.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2))
    write_section("q_throughput", "\n".join(lines))


if __name__ == "__main__":
    main()
