"""MOMAland's environments through the PettingZoo bridge, trained by coplay's weight
sweep: hypervolume and expected utility over seeds, the table no one publishes.

    python benchmarks/momaland_envs.py                  # every row that comes through
    python benchmarks/momaland_envs.py --seeds 2 --steps 1000

Each row is `coplay train algo=mo_ppo env=pettingzoo:<MOMAland module>` with the
environment's defaults, 8 weights x `--seeds` seeds in one run, the reference
point stated in the row (MOMAland names none; the run gives it with
`reference_point=`). The table gives the IQM over seeds with a 95% bootstrap CI
of each seed's final hypervolume and expected utility (the mean best linear
utility over 100 evenly spread weights). MOMAland environments that the bridge
cannot take yet are listed with the reason it gives.

Needs MOMAland (`pip install momaland`); results go to
benchmarks/results/momaland_envs.json and BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, cores, cpu_model, write_section  # noqa: E402

import coplay  # noqa: E402
from coplay.core.errors import CoplayError  # noqa: E402

WEIGHTS = 8
# module -> reference point (weakly worse than every return: each objective's least possible return)
ROWS = {
    "momaland.envs.item_gathering.moitem_gathering_v0": "0:0:0",
    "momaland.envs.gem_mining.mogem_mining_v0": "0:0",
    "momaland.envs.route_choice.moroute_choice_v0": "-1000:-1000",
    "momaland.envs.beach.mobeach_v0": "0:0",                       # rewards are non-negative
}
SETTINGS = ["algo=mo_ppo", f"algo.weights={WEIGHTS}", "algo.num_envs=8", "algo.rollout_len=16",
            "algo.greedy_eval=true", "eval_episodes=4", "progress=false", "tensorboard=false"]


def row(module: str, ref: str, seeds: int, steps: int, out: Path) -> dict:
    t = time.perf_counter()
    try:
        run = coplay.train(SETTINGS + [f"env=pettingzoo:{module}", f"reference_point={ref}", f"seeds={seeds}",
                                       f"total_steps={steps}", f"chunk_steps={steps}", f"out_dir={out}"])
    except Exception as e:   # noqa: BLE001 - a foreign environment may fail with its own error when built
        return {"module": module, "refused": f"{'' if isinstance(e, CoplayError) else type(e).__name__ + ': '}"
                                             f"{str(e).splitlines()[0][:300]}"}
    final = run.summary["final"]
    return {"module": module, "reference_point": ref, "seeds": seeds, "steps_per_weight": steps,
            "wall_s": time.perf_counter() - t,
            "hypervolume": final["hypervolume"], "expected_utility": final["expected_utility"]}


def report(r: dict) -> str:
    out = ["## MOMAland's environments through the bridge: the weight sweep's fronts", "",
           f"Machine: {r['machine']}. Command: `python benchmarks/momaland_envs.py --seeds {r['seeds']} --steps "
           f"{r['steps']}`. `coplay train {' '.join(SETTINGS)} env=pettingzoo:<module> reference_point=<ref> "
           f"seeds={r['seeds']} total_steps={r['steps']}`, each environment with its defaults. IQM over seeds "
           "[95% bootstrap CI].", "",
           "| MOMAland environment | reference point | seeds | env steps per weight | wall s | hypervolume | "
           "expected utility |", "|---|---|---:|---:|---:|---|---|"]
    refused = []
    for x in r["rows"]:
        if "refused" in x:
            refused.append(f"- `{x['module']}`: {x['refused']}")
            continue
        hv, eu = x["hypervolume"], x["expected_utility"]
        out.append(f"| `{x['module']}` | ({x['reference_point'].replace(':', ', ')}) | {x['seeds']} | "
                   f"{x['steps_per_weight']:,} | {x['wall_s']:.0f} | {hv['iqm']:.4g} [{hv['ci_low']:.4g}, "
                   f"{hv['ci_high']:.4g}] | {eu['iqm']:.4g} [{eu['ci_low']:.4g}, {eu['ci_high']:.4g}] |")
    if refused:
        out += ["", "Not through the bridge yet, with the reason it gives:", "", *refused]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2048, help="environment steps per weight")
    a = ap.parse_args()
    results = {"machine": f"{cpu_model()}, {cores()} cores", "seeds": a.seeds, "steps": a.steps, "rows": []}
    path = ROOT / "benchmarks" / "results" / "momaland_envs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for m, ref in ROWS.items():      # written after every row: a long row's result is kept
            results["rows"].append(row(m, ref, a.seeds, a.steps, Path(tmp)))
            path.write_text(json.dumps(results, indent=1))
            write_section("momaland_envs", report(results))


if __name__ == "__main__":
    main()
