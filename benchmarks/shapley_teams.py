"""Shapley values of the agents of trained cooperative teams, under two stand-ins.

    python benchmarks/shapley_teams.py            # about 5 minutes on 2 cores
    python benchmarks/shapley_teams.py --quick    # smoke run, nothing written

IPPO (`coplay.train`, defaults) trains a team on each task, then `coplay.eval.shapley`
values each agent of seed 0's team exactly (every coalition, 512 episodes each on common
keys), once with the absent agents playing the no-op (action 0) and once playing uniformly
random legal actions. The tasks:

- `spread`: cooperative navigation, 3 agents (99,200 steps, the learning test's budget);
- `foraging`: level-based foraging, 3 agents on a 6 x 6 grid with 3 foods (200,000 steps).

The values come with normal 95% intervals over episodes; they add up to v(all) - v(none).

Writes benchmarks/results/shapley_teams.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "shapley_teams.json"
COMMAND = "python benchmarks/shapley_teams.py"

TASKS: dict[str, tuple[list[str], int]] = {
    "spread": (["env=spread"], 99_200),
    "foraging": (["env=foraging", "env.n_agents=3", "env.grid_size=6", "env.n_food=3"], 200_000),
}
STAND_INS = ("noop", "random")


def run_task(name: str, steps: int, episodes: int, out: Path) -> dict:
    import jax

    import coplay
    from coplay.eval.shapley import shapley
    from coplay.experiment.playback import load_run

    fields, _ = TASKS[name]
    t = time.perf_counter()
    result = coplay.train(["algo=ippo", *fields, f"total_steps={steps}", "seeds=1", "progress=false",
                           "logger=csv", "eval_episodes=64", f"out_dir={out}", f"name={name}"])
    trained = time.perf_counter() - t
    run = load_run(result.run_dir)
    env = coplay.make(run.exp.env, **run.exp.env_config)
    params = jax.tree.map(lambda x: x[0], run.params)
    values = {}
    for stand_in in STAND_INS:
        s = shapley(env, run.policy, params, replacement=stand_in, episodes=episodes, key=jax.random.PRNGKey(1))
        print(f"{name}, {stand_in}:\n{s.table()}", flush=True)
        values[stand_in] = s.as_dict()
    return {"fields": fields, "steps": steps, "train_seconds": trained,
            "final_return": result.final_return["per_seed"], "values": values}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=512, help="episodes per coalition (default 512)")
    ap.add_argument("--quick", action="store_true", help="a short training, 32 episodes; nothing written")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: run_task(name, 6400 if args.quick else steps, 32 if args.quick else args.episodes,
                                  Path(tmp)) for name, (_, steps) in TASKS.items()}
    if args.quick:
        return
    write_results("shapley_teams", {**stamp(), "episodes": args.episodes, "results": results})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def section(data: dict) -> str:
    lines = ["## Shapley values of trained teams' agents, under two stand-ins", "",
             f"`{COMMAND}` on {data['machine']} ({data['date']}, coplay {data['commit']}): an IPPO team per task "
             "(seed 0), each agent's Shapley value computed exactly over every coalition, "
             f"{data['episodes']} episodes per coalition on common keys (`coplay explain`). The agents outside a "
             "coalition play the no-op (action 0) or uniformly random legal actions. A value is what the agent "
             "adds to the team's return (mean over agents of the episode return) over that stand-in; the values "
             "add up to v(all) - v(none). Normal 95% intervals over episodes.", ""]
    rows = []
    for name, r in data["results"].items():
        for stand_in, s in r["values"].items():
            cells = [f"{v:.2f} [{lo:.2f}, {hi:.2f}]" for v, lo, hi in zip(s["values"], s["low"], s["high"])]
            rows.append([f"`{name}`", f"{r['steps']:,}", stand_in, f"{s['grand']:.2f}", f"{s['empty']:.2f}",
                         "; ".join(cells)])
    lines += table(["task", "training steps", "stand-in", "v(team)", "v(no agent)",
                    "Shapley value of agent 0; 1; 2"], rows)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
