"""Offline MARL end to end on coplay's own environments: a behaviour run, its
datasets of every quality, and every offline trainer on each, scored in the
environment.

    python benchmarks/offline_table.py                           # spread, defaults below
    python benchmarks/offline_table.py --env foraging --behaviour-steps 400000 --seeds 10

1. A behaviour run: `coplay train algo=mappo` on the environment for
   `--behaviour-steps` steps, keeping every chunk's checkpoint.
2. Its datasets (`coplay record`): poor, medium, good, replay and mixed,
   `--episodes` episodes each.
3. Every offline trainer (bc, iql_cql, qmix_cql, cfcql) on every dataset,
   `--seeds` seeds vmapped, `--grad-steps` gradient steps, evaluated greedily
   in the environment.

Scores are normalised per dataset: (return - random play's) / (the dataset's
best episode return - random play's), so 1 is the dataset's best episode and 0
random play; IQM and 95% bootstrap CI over seeds. Beside them, each dataset's
mean return (the behaviour the trainers learn from). Results go to
benchmarks/results/offline_<env>.json and BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write_section  # noqa: E402

import coplay  # noqa: E402
from coplay.eval.stats import iqm_ci  # noqa: E402
from coplay.experiment.record import record_dataset  # noqa: E402

QUALITIES = ("poor", "medium", "good", "replay", "mixed")
ALGOS = ("bc", "iql_cql", "qmix_cql", "cfcql")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="spread")
    ap.add_argument("--env-overrides", nargs="*", default=[], help="env.<field>=value ...")
    ap.add_argument("--behaviour-steps", type=int, default=300_000)
    ap.add_argument("--behaviour-chunks", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--grad-steps", type=int, default=5000)
    ap.add_argument("--eval-episodes", type=int, default=32)
    ap.add_argument("--algos", nargs="*", default=list(ALGOS))
    args = ap.parse_args()
    env_args = [f"env={args.env}", *args.env_overrides]
    t0 = time.time()
    out: dict = {"settings": vars(args), "datasets": {}, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        behaviour = coplay.train(["algo=mappo", *env_args, "seeds=1", f"total_steps={args.behaviour_steps}",
                                  f"chunk_steps={args.behaviour_steps // args.behaviour_chunks}",
                                  f"keep_checkpoints={args.behaviour_chunks}", "progress=false", "tensorboard=false",
                                  f"out_dir={tmp}/runs"])
        print(f"behaviour run: {behaviour.final_return} ({time.time() - t0:.0f} s)", flush=True)
        vault = Path(tmp) / f"{args.env}.vlt"
        for quality in QUALITIES:
            rec = record_dataset(str(behaviour.run_dir), quality, args.episodes, vault, seed=1,
                                 eval_episodes=args.eval_episodes)
            s = rec["stats"]
            out["datasets"][quality] = {"path": rec["path"], "return_mean": s["return_mean"],
                                        "return_max": s["return_max"], "random": rec["random_score"],
                                        "checkpoints": rec["checkpoints"]}
            print(quality, out["datasets"][quality]["return_mean"], s["return_max"], flush=True)
        for quality in QUALITIES:
            d = out["datasets"][quality]
            for algo in args.algos:
                t = time.time()
                run = coplay.train([f"algo={algo}", *env_args, f"algo.dataset={d['path']}", f"seeds={args.seeds}",
                                    f"total_steps={args.grad_steps}", f"chunk_steps={args.grad_steps}",
                                    f"eval_episodes={args.eval_episodes}", "progress=false", "tensorboard=false",
                                    f"out_dir={tmp}/runs"])
                per_seed = np.asarray(run.final_return["per_seed"], np.float64)
                score = (per_seed - d["random"]) / (d["return_max"] - d["random"])
                est = iqm_ci(score[:, None])[0]
                out["rows"].append({"quality": quality, "algo": algo, "per_seed": per_seed.tolist(),
                                    "normalised": score.tolist(), "iqm": est.value, "low": est.low, "high": est.high,
                                    "return_iqm": run.final_return["iqm"], "seconds": time.time() - t})
                print(quality, algo, run.final_return["iqm"], f"{est.value:.3f} [{est.low:.3f}, {est.high:.3f}]",
                      f"{time.time() - t:.0f} s", flush=True)
    out["seconds"] = time.time() - t0
    name = "_".join([args.env, *[o.replace("env.", "").replace("=", "") for o in args.env_overrides]])
    (ROOT / "benchmarks" / "results").mkdir(exist_ok=True)
    (ROOT / "benchmarks" / "results" / f"offline_{name}.json").write_text(json.dumps(out, indent=1))
    lines = [f"## Offline trainers on {name}", "",
             f"`python benchmarks/offline_table.py --env {args.env}"
             + (f" --env-overrides {' '.join(args.env_overrides)}" if args.env_overrides else "")
             + f" --behaviour-steps {args.behaviour_steps} --episodes {args.episodes} --seeds {args.seeds} "
               f"--grad-steps {args.grad_steps}` ({out['seconds'] / 60:.0f} min). Normalised score, IQM [95% CI] over "
               f"{args.seeds} seeds: (return - random) / (dataset's best episode - random). Datasets from a MAPPO run "
               f"of {args.behaviour_steps} steps; per-agent returns.", "",
             "| dataset | mean return | best episode | random | " + " | ".join(args.algos) + " |",
             "|---|---|---|---|" + "---|" * len(args.algos)]
    for quality in QUALITIES:
        d = out["datasets"][quality]
        cells = []
        for algo in args.algos:
            r = next(r for r in out["rows"] if r["quality"] == quality and r["algo"] == algo)
            cells.append(f"{r['iqm']:.2f} [{r['low']:.2f}, {r['high']:.2f}] ({r['return_iqm']:.2f})")
        lines.append(f"| {quality} | {d['return_mean']:.2f} | {d['return_max']:.2f} | {d['random']:.2f} | "
                     + " | ".join(cells) + " |")
    lines += ["", "In brackets after each interval: the return's IQM over seeds."]
    write_section(f"offline_{name}", "\n".join(lines))


if __name__ == "__main__":
    main()
