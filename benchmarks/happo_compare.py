"""HAPPO and HATRPO beside MAPPO with and without parameter sharing, same run, same budget.

    python benchmarks/happo_compare.py            # about 10 minutes on 2 cores
    python benchmarks/happo_compare.py --quick    # smoke run, nothing written

Each algorithm trains 4 seeds (one compiled run) at coplay's PPO defaults on two tasks:

- `spread`: cooperative navigation, 3 agents, 99,200 steps (the learning tests' budget);
- `penalty` (k = 0), one round: 10 to both players where one plays action 0 and the other
  action 2, 2 where both play 1, else 0, and both see the same observation. One network
  shared without agent ids plays one distribution for both and is held to 5 in
  expectation; 20,000 steps at a learning rate of 0.005 with no entropy bonus, and
  HATRPO's trust region 0.1 (its default 0.01 moves too little in 12 updates).

MAPPO is run three ways: one network with agent ids (its default), one network without
them, and one network per agent (`algo.share_params=false`: the agents' own actors,
updated at once on the same data, which is what HAPPO changes). The return is the final
evaluation's episode return per agent (64 episodes per seed), interquartile mean over
seeds with a 95% bootstrap interval; env-steps/s counts every seed's steps over the
run's wall time, compiling included.

Writes benchmarks/results/happo_compare.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "happo_compare.json"
COMMAND = "python benchmarks/happo_compare.py"

TASKS: dict[str, list[str]] = {
    "spread": ["env=spread", "total_steps=99200"],
    "penalty": ["env=matrix", "env.game=penalty", "env.penalty_k=0", "env.rounds=1", "total_steps=20000",
                "algo.ent_coef=0", "algo.lr=0.005"],
}
VARIANTS: dict[str, list[str]] = {
    "happo": ["algo=happo"],
    "hatrpo": ["algo=hatrpo"],
    "mappo, shared with ids": ["algo=mappo"],
    "mappo, shared without ids": ["algo=mappo", "algo.agent_id=false"],
    "mappo, one network per agent": ["algo=mappo", "algo.share_params=false"],
}
SEEDS = 4


def run(task: str, variant: str, out: Path, quick: bool) -> dict:
    import coplay

    extra = ["algo.kl_threshold=0.1"] if variant == "hatrpo" and task == "penalty" else []
    budget = ["total_steps=3200"] if quick else []
    args = [*VARIANTS[variant], *TASKS[task], *extra, *budget, f"seeds={SEEDS}", "progress=false", "logger=csv",
            "eval_episodes=64", f"out_dir={out}"]
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    per_seed = [float(x) for x in result.final_return["per_seed"]]
    print(f"{task} / {variant}: {np.round(per_seed, 2).tolist()} in {seconds:.0f} s", flush=True)
    return {"args": args, "per_seed": per_seed, "seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3,200 steps each; nothing written")
    args = ap.parse_args()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for task in TASKS:
            results[task] = {v: run(task, v, Path(tmp), args.quick) for v in VARIANTS}
    if args.quick:
        return
    write_results("happo_compare", {**stamp(), "seeds": SEEDS, "results": results})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def section(data: dict) -> str:
    from coplay.eval.stats import summarize

    lines = ["## HAPPO and HATRPO beside MAPPO with and without parameter sharing", "",
             f"`{COMMAND}` on {data['machine']} ({data['date']}, coplay {data['commit']}): {data['seeds']} seeds "
             "per algorithm in one compiled run, at coplay's PPO defaults; `spread` 99,200 steps; the one-round "
             "penalty game with k = 0 (both players see the same observation and must play different actions; "
             "one network shared without ids is held to 5 in expectation) 20,000 steps at lr 0.005 without "
             "entropy bonus, HATRPO's trust region 0.1 there. Episode return per agent at the end, IQM over seeds "
             "with 95% bootstrap interval; env-steps/s over every seed, compiling included. HARL's own HAPPO "
             "beside coplay's: [HAPPO beside HARL's own HAPPO on MPE simple spread]"
             "(#happo-beside-harls-own-happo-on-mpe-simple-spread).", ""]
    rows = []
    for task, variants in data["results"].items():
        for name, r in variants.items():
            steps = int(float([a for a in r["args"] if a.startswith("total_steps=")][-1].split("=")[1]))
            rate = steps * data["seeds"] / r["seconds"]
            rows.append([f"`{task}`", name, str(summarize(np.asarray(r["per_seed"]))),
                         " ".join(f"{x:.2f}" for x in r["per_seed"]), f"{rate:,.0f}"])
    lines += table(["task", "algorithm", "return per agent", "per seed", "env-steps/s"], rows)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
