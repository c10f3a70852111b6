"""GiGPO against GRPO on the same budget and seeds: one agent walking a gridworld in words.

    python benchmarks/grpo_gigpo.py                  # 5 seeds, 200 updates each; writes BENCHMARKS.md
    python benchmarks/grpo_gigpo.py --quick          # 2 seeds, 20 updates, nothing written

Each estimator trains `algo=grpo` on `text:gridworld` (its defaults: a 3x3 grid,
1 wall, at most 6 moves, a fresh layout per group) through `coplay.train`, every
seed in one compiled run, the same seeds and settings for every estimator: a
small model (width 32, one block), learning rate 3e-3, 64 episodes per update in
groups of 8 that share their layout and start. GiGPO adds to GRPO's episode-level
advantage a step-level one within anchor states (the turns of a group that saw
the same board); it runs with the discount of its paper (gamma 0.95) and without
one (gamma 1, where a turn's return is its episode's success), so that what the
anchor groups do is told apart from what the discount does.

The policy is evaluated every tenth of the run (256 episodes, sampled as in
training). Reported per estimator, as IQM and 95% stratified-bootstrap CI over
seeds: the success rate (goal reached) and return at the end, the mean success
rate over the evaluations (the area under the curve), the updates until the
success rate first reaches 80% (a seed that never does counts as the whole run),
the episode length at the end beside the shortest paths' mean, and the success
curve. The seeds are the same in every arm (the same initial model, the same
first layouts), so GiGPO's differences from GRPO are also given seed by seed
(paired): IQM and CI of the per-seed differences. Results go to
benchmarks/results/grpo_gigpo.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.eval.stats import summarize  # noqa: E402

RESULTS = "grpo_gigpo.json"
ARMS = (("grpo", "grpo", ()), ("gigpo, gamma 0.95", "gigpo", ("algo.gamma=0.95",)),
        ("gigpo, gamma 1", "gigpo", ("algo.gamma=1.0",)))
EPISODES, GROUP = 64, 8
SETTINGS = ("algo.width=32", "algo.layers=1", "algo.lr=0.003", f"algo.episodes={EPISODES}",
            f"algo.group_size={GROUP}")
EVALS, EVAL_EPISODES, TARGET = 10, 256, 0.8


def run(label: str, estimator: str, extra: tuple[str, ...], seeds: int, updates: int, out: Path) -> dict:
    steps = coplay.make("text:gridworld").spec.max_steps          # steps reserved per episode
    per_update = EPISODES * steps
    args = ["algo=grpo", "env=text:gridworld", f"algo.estimator={estimator}", *SETTINGS, *extra, f"seeds={seeds}",
            f"total_steps={updates * per_update}", f"chunk_steps={updates * per_update // EVALS}", "eval_every=1",
            f"eval_episodes={EVAL_EPISODES}", "progress=false", "logger=csv", f"out_dir={out}",
            f"name={estimator}{len(extra)}"]
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    rows = [r for r in csv.DictReader((result.run_dir / "metrics.csv").open()) if r.get("eval/reached")]
    at = sorted({int(r["env_steps"]) // per_update for r in rows})
    curve = np.zeros((seeds, len(at)))
    for r in rows:
        curve[int(r["seed"]), at.index(int(r["env_steps"]) // per_update)] = float(r["eval/reached"])
    first = [next((u for u, x in zip(at, c) if x >= TARGET), updates) for c in curve]
    final = result.summary["final"]
    return {"arm": label, "estimator": estimator, "options": list(extra), "seconds": round(seconds, 1),
            "updates": at, "success_curve": [summarize(curve[:, i]).as_dict() for i in range(len(at))],
            "final_success": final["reached"], "final_return": final["return"], "final_length": final["length"],
            "mean_success": summarize(curve.mean(1)).as_dict(),
            "updates_to_target": summarize(np.asarray(first, float)).as_dict(),
            "reached_target": int(sum(c.max() >= TARGET for c in curve)),
            "first_per_seed": first, "mean_per_seed": curve.mean(1).tolist()}


def paired(results: list[dict]) -> None:
    """Each arm's per-seed differences from the first arm's (the same seeds), summarised."""
    base = results[0]
    for r in results[1:]:
        r["paired"] = {
            "mean_success": summarize(np.subtract(r["mean_per_seed"], base["mean_per_seed"])).as_dict(),
            "updates_to_target": summarize(np.subtract(r["first_per_seed"], base["first_per_seed"],
                                                       dtype=float)).as_dict()}


def shortest_paths(episodes: int = 2048) -> float:
    """The mean breadth-first shortest path from the start over the layouts drawn."""
    env = coplay.make("text:gridworld")
    states, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), episodes))
    host = jax.device_get(states)
    return float(np.mean([env.shortest_path(jax.tree.map(lambda x, i=i: x[i], host)) for i in range(episodes)]))


def section(data: dict) -> str:
    results, info, seeds, updates = data["results"], data["machine"], data["seeds"], data["updates"]
    optimum = data["optimum_length"]
    fmt = lambda s, d=2: f"{s['iqm']:.{d}f} [{s['ci_low']:.{d}f}, {s['ci_high']:.{d}f}]"  # noqa: E731
    lines = [
        "## GiGPO against GRPO on a gridworld in words: same budget, same seeds",
        "",
        f"`python benchmarks/grpo_gigpo.py --seeds {seeds} --updates {updates}` on {info}. `algo=grpo` on "
        "`text:gridworld` (defaults: 3x3, 1 wall, at most 6 moves, a fresh layout for each group of 8 episodes, "
        "which share it and their start), width 32, one block, lr 3e-3, "
        f"{updates} updates of {EPISODES} episodes, seeds 0..{seeds - 1} for every estimator. Success: the goal "
        f"reached, in {EVAL_EPISODES} evaluation episodes every {updates // EVALS} updates, sampled as in training. "
        "IQM and 95% CI over seeds. Updates to 80%: the first evaluation at or above 80% success (a seed that "
        f"never gets there counts as {updates}). Length: moves per episode (the shortest paths' mean is "
        f"{optimum:.2f}). Forfeits (an utterance naming no move) score -1, so return = success - forfeit rate.",
        "",
        "| estimator | success at the end | return at the end | mean success over the run | updates to 80% "
        "| seeds at 80% | length at the end | mean success - grpo's (paired) | updates to 80% - grpo's (paired) "
        "| wall time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        diff = r.get("paired")
        vs = f"{fmt(diff['mean_success'])} | {fmt(diff['updates_to_target'], 0)}" if diff else "- | -"
        lines.append(f"| {r['arm']} | {fmt(r['final_success'])} | {fmt(r['final_return'])} | "
                     f"{fmt(r['mean_success'])} | {fmt(r['updates_to_target'], 0)} | {r['reached_target']}/{seeds} | "
                     f"{fmt(r['final_length'])} | {vs} | {r['seconds']:g} |")
    lines += ["", "Success over training (IQM over seeds), by update:", "",
              "| estimator | " + " | ".join(str(u) for u in results[0]["updates"]) + " |",
              "|---|" + "---|" * len(results[0]["updates"])]
    for r in results:
        lines.append(f"| {r['arm']} | " + " | ".join(f"{s['iqm']:.2f}" for s in r["success_curve"]) + " |")
    lines += ["", findings(results)]
    return "\n".join(lines)


def findings(results: list[dict]) -> str:
    """What the figures say, from the figures: which arms' CIs of the sample-efficiency
    measures are apart, and which way, and whether the paired differences' CIs hold 0."""
    base, out = results[0], []
    for r in results[1:]:
        said = []
        for key, what in (("updates_to_target", "updates to 80%"), ("mean_success", "mean success")):
            diff = r["paired"][key]
            where = "holds 0" if diff["ci_low"] <= 0 <= diff["ci_high"] else "excludes 0"
            said.append(f"paired difference in {what} {diff['iqm']:+.2f}, CI [{diff['ci_low']:+.2f}, "
                        f"{diff['ci_high']:+.2f}] {where}")
        for key, what, better, d in (("updates_to_target", "updates to 80%", -1, 0),
                                     ("mean_success", "mean success", 1, 2),
                                     ("final_success", "success at the end", 1, 2)):
            a, b = r[key], base[key]
            if a["ci_low"] > b["ci_high"] or a["ci_high"] < b["ci_low"]:
                verdict = "better" if (a["iqm"] - b["iqm"]) * better > 0 else "worse"
                said.append(f"{what} {verdict} than grpo's ({a['iqm']:.{d}f} against {b['iqm']:.{d}f}, CIs apart)")
            else:
                said.append(f"{what} {a['iqm']:.{d}f} against grpo's {b['iqm']:.{d}f} (CIs overlap)")
        out.append(f"{r['arm']}: " + "; ".join(said) + ".")
    return "Findings, computed from the table: " + " ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="2 seeds, 20 updates, nothing written")
    args = parser.parse_args()
    seeds, updates = (2, 20) if args.quick else (args.seeds, args.updates)
    if updates % EVALS:
        parser.error(f"--updates={updates} must be a multiple of {EVALS} (one evaluation every tenth of the run)")
    results = []
    with tempfile.TemporaryDirectory() as out:
        for label, name, extra in ARMS:
            results.append(r := run(label, name, extra, seeds, updates, Path(out)))
            print(json.dumps({k: r[k] for k in ("arm", "seconds", "first_per_seed", "final_success",
                                                "mean_success")}), flush=True)
    paired(results)
    optimum = shortest_paths()
    if args.quick:
        print(section({"results": results, "machine": "this machine", "seeds": seeds, "updates": updates,
                       "optimum_length": optimum}))
        return
    write_results("grpo_gigpo", {**stamp(), "seeds": seeds, "updates": updates, "optimum_length": optimum,
                                 "results": results})
    regenerate_page()


def claims(data: dict) -> list[dict]:
    return []


if __name__ == "__main__":
    main()
