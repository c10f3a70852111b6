"""MOMAland's environments through the PettingZoo bridge, trained by coplay's weight
sweep: hypervolume and expected utility over seeds, the table no one publishes.

    python benchmarks/momaland_envs.py                  # every row that comes through
    python benchmarks/momaland_envs.py --seeds 2 --steps 1000
    python benchmarks/momaland_envs.py --modules momaland.envs.crazyrl.catch.catch_v0   # some rows; others kept

Each row is `coplay train algo=mo_ppo env=pettingzoo:<MOMAland module>` with the
environment's defaults, 8 weights (10 for three objectives) x `--seeds` seeds in one run, the reference
point stated in the row (MOMAland names none; the run gives it with
`reference_point=`). The table gives the IQM over seeds with a 95% bootstrap CI
of each seed's final hypervolume and expected utility (the mean best linear
utility over 100 evenly spread weights). MOMAland environments that the bridge
cannot take yet are listed with the reason it gives.

Needs MOMAland (`pip install momaland`); results go to
benchmarks/results/momaland_envs.json, then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS as RESULTS_DIR  # noqa: E402
from _common import regenerate_page, stamp, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.core.errors import CoplayError  # noqa: E402

RESULTS = "momaland_envs.json"
WEIGHTS = 8
# module -> reference point (weakly worse than every return: each objective's least possible return)
ROWS = {
    "momaland.envs.item_gathering.moitem_gathering_v0": "0:0:0",   # three objectives: 10 weights (an even grid)
    "momaland.envs.gem_mining.mogem_mining_v0": "0:0",
    "momaland.envs.route_choice.moroute_choice_v0": "-1000:-1000",
    "momaland.envs.beach.mobeach_v0": "0:0",                       # rewards are non-negative
    # CrazyRL's drones (MOMAland's shared reward): (closer to the target, farther from the others), per step the
    # change in distance (at most 0.2 a step over at most 200 steps) and the mean distance (>= 0), -10 on a crash
    "momaland.envs.crazyrl.catch.catch_v0": "-50:-10",
    "momaland.envs.crazyrl.surround.surround_v0": "-50:-10",
    "momaland.envs.crazyrl.escort.escort_v0": "-50:-10",
    "momaland.envs.multiwalker_stability.momultiwalker_stability_v0": "-300:-300",
}
# Why a row fails where it is MOMAland's own code, not the bridge (found by reading its traceback).
CAUSES = {
    "momaland.envs.gem_mining.mogem_mining_v0":
        "MOMAland stores each agent's worker count as a one-element list (`random.choices`) and adds it into a "
        "NumPy array element, which NumPy 2 refuses: MOMAland's bug under NumPy 2, not the bridge's",
    "momaland.envs.route_choice.moroute_choice_v0":
        "MOMAland reads its road networks with networkx's `node_link_graph`, whose default key for the edges changed "
        "from 'links' to 'edges' in networkx 3.4: MOMAland's files need an older networkx",
}
SETTINGS = ["algo=mo_ppo", f"algo.weights={WEIGHTS}", "algo.num_envs=8", "algo.rollout_len=16",
            "algo.greedy_eval=true", "eval_episodes=4", "progress=false", "logger=csv"]


def row(module: str, ref: str, seeds: int, steps: int, out: Path) -> dict:
    t = time.perf_counter()
    weights = WEIGHTS if ref.count(":") == 1 else 10     # more than two objectives: an even grid of them
    settings = [x if not x.startswith("algo.weights=") else f"algo.weights={weights}" for x in SETTINGS]
    try:
        run = coplay.train(settings + [f"env=pettingzoo:{module}", f"reference_point={ref}", f"seeds={seeds}",
                                       f"total_steps={steps}", f"chunk_steps={steps}", f"out_dir={out}"])
    except Exception as e:   # noqa: BLE001 - a foreign environment may fail with its own error when built
        return {"module": module, "refused": f"{'' if isinstance(e, CoplayError) else type(e).__name__ + ': '}"
                                             f"{str(e).splitlines()[0][:300]}"}
    final = run.summary["final"]
    return {**stamp(), "module": module, "reference_point": ref, "seeds": seeds, "steps_per_weight": steps,
            "weights": len(run.summary["front"]["weights"]),
            "wall_s": time.perf_counter() - t,
            "hypervolume": final["hypervolume"], "expected_utility": final["expected_utility"]}


def section(r: dict) -> str:
    out = ["## MOMAland's environments through the bridge: the weight sweep's fronts", "",
           f"Machine: {r['machine']}. Command: `python benchmarks/momaland_envs.py --seeds <seeds> --steps "
           f"<steps>`, each row `coplay train {' '.join(SETTINGS)} env=pettingzoo:<module> reference_point=<ref> "
           "seeds=<seeds> total_steps=<steps>`, each environment with its defaults. IQM over seeds "
           "[95% bootstrap CI]. The wall time includes each seed's evaluation episodes, stepped on the host.", "",
           "| MOMAland environment | reference point | weights | seeds | env steps per weight | wall s | "
           "hypervolume | expected utility |", "|---|---|---:|---:|---:|---:|---|---|"]
    refused = []
    for x in r["rows"]:
        if "refused" in x:
            cause = f" ({CAUSES[x['module']]})" if x["module"] in CAUSES else ""
            refused.append(f"- `{x['module']}`: {x['refused']}{cause}")
            continue
        hv, eu = x["hypervolume"], x["expected_utility"]
        out.append(f"| `{x['module']}` | ({x['reference_point'].replace(':', ', ')}) | {x.get('weights', WEIGHTS)} | "
                   f"{x['seeds']} | "
                   f"{x['steps_per_weight']:,} | {x['wall_s']:.0f} | {hv['iqm']:.4g} [{hv['ci_low']:.4g}, "
                   f"{hv['ci_high']:.4g}] | {eu['iqm']:.4g} [{eu['ci_low']:.4g}, {eu['ci_high']:.4g}] |")
    if refused:
        out += ["", "Not through the bridge yet, with the reason it gives:", "", *refused]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2048, help="environment steps per weight")
    ap.add_argument("--modules", nargs="*", choices=list(ROWS), help="run these rows only, keeping the others' "
                                                                      "last results")
    a = ap.parse_args()
    path = RESULTS_DIR / RESULTS
    kept = json.loads(path.read_text())["rows"] if a.modules and path.exists() else []
    rows = {x["module"]: x for x in kept}
    results = {**stamp(), "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        for m, ref in ROWS.items():      # written after every row: a long row's result is kept
            if not a.modules or m in a.modules:
                rows[m] = row(m, ref, a.seeds, a.steps, Path(tmp))
            results["rows"] = [rows[k] for k in ROWS if k in rows]
            write_results("momaland_envs", results)
    regenerate_page()


def claims(data: dict) -> list[dict]:
    return []


if __name__ == "__main__":
    main()
