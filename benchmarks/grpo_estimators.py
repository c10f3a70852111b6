"""Advantage estimators compared on the same budget and seeds: self-play on Kuhn poker in words.

    python benchmarks/grpo_estimators.py                  # 5 seeds, 400 updates each; writes BENCHMARKS.md
    python benchmarks/grpo_estimators.py --quick          # 2 seeds, 40 updates, nothing written

Each estimator trains `algo=grpo` on `text:kuhn_poker` through `coplay.train`
(every seed in one compiled run, the same seeds for every estimator, defaults
otherwise), evaluated every tenth of the run. Reported per estimator, as IQM
and 95% stratified-bootstrap CI over seeds (the run's own summary.json): the
text policy's exact exploitability at the end, the lowest it reached on the way
(each seed's minimum over the evaluations), and the invalid-utterance mass at
the end. Results go to benchmarks/results/grpo_estimators.json, then BENCHMARKS.md
(benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.eval.stats import summarize  # noqa: E402

RESULTS = "grpo_estimators.json"
ESTIMATORS = ("grpo", "rae", "dr_grpo", "rloo")
EPISODES, STEPS = 64, 3          # episodes per update (defaults), steps reserved per Kuhn episode


def run(estimator: str, seeds: int, updates: int, out: Path) -> dict:
    per_update = EPISODES * STEPS
    args = ["algo=grpo", "env=text:kuhn_poker", f"algo.estimator={estimator}", f"seeds={seeds}",
            f"total_steps={updates * per_update}", f"chunk_steps={updates * per_update // 10}",
            "eval_every=1", "eval_episodes=16", "progress=false", "logger=csv", f"out_dir={out}",
            f"name={estimator}"]
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    rows = list(csv.DictReader((result.run_dir / "metrics.csv").open()))
    lowest = [min(float(r["eval/exploitability"]) for r in rows if int(r["seed"]) == s) for s in range(seeds)]
    final = result.summary["final"]
    return {"estimator": estimator, "seconds": round(seconds, 1),
            "final": final["exploitability"], "lowest": summarize(np.asarray(lowest)).as_dict(),
            "invalid_mass": final["invalid_mass"]}


def section(data: dict) -> str:
    results, info, seeds, updates = data["results"], data["machine"], data["seeds"], data["updates"]
    fmt = lambda s: f"{s['iqm']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"  # noqa: E731
    lines = [
        "## Advantage estimators on Kuhn poker in words: same budget, same seeds",
        "",
        f"`python benchmarks/grpo_estimators.py --seeds {seeds} --updates {updates}` on {info}. `algo=grpo` "
        f"self-play on `text:kuhn_poker`, defaults but the estimator, {updates} updates of {EPISODES} episodes, "
        f"seeds 0..{seeds - 1} for every estimator. IQM and 95% CI over seeds of the text policy's exact "
        "exploitability.",
        "",
        "| estimator | final exploitability | lowest on the way | invalid mass at the end | wall time (s) |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['estimator']} | {fmt(r['final'])} | {fmt(r['lowest'])} | {fmt(r['invalid_mass'])} "
                     f"| {r['seconds']:g} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="2 seeds, 40 updates, nothing written")
    args = parser.parse_args()
    seeds, updates = (2, 40) if args.quick else (args.seeds, args.updates)
    results = []
    with tempfile.TemporaryDirectory() as out:
        for name in ESTIMATORS:
            results.append(r := run(name, seeds, updates, Path(out)))
            print(json.dumps(r), flush=True)
    if args.quick:
        return
    write_results("grpo_estimators", {**stamp(), "seeds": seeds, "updates": updates, "results": results})
    regenerate_page()


def claims(data: dict) -> list[dict]:
    return []


if __name__ == "__main__":
    main()
