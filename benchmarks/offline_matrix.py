"""Offline coordination on matrix-game data: which offline trainers recover the
optimal joint action of the climbing and penalty games from data in which each
agent's average payoff per action favours a safe action.

    python benchmarks/offline_matrix.py
    python benchmarks/offline_matrix.py --seeds 10 --steps 1000 --epsilon 0.6

The data, per game: `--episodes` one-shot plays of the optimal joint action
(climbing (0, 0) worth 11; penalty (0, 2) worth 10), each agent's action
replaced by a uniform one with probability `--epsilon`, recorded with
`coplay.offline.record`. Each trainer learns `--steps` gradient steps on it,
`--seeds` seeds vmapped; a seed recovers the optimum when its greedy joint
action earns the optimal payoff. Results go to benchmarks/results/offline_matrix.json,
then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.offline import epsilon_mixture, record, save  # noqa: E402

RESULTS = "offline_matrix.json"
OPTIMUM = {"climbing": ([0, 0], 11.0), "penalty": ([0, 2], 10.0)}
TRAINERS = [("offline IQL", "iql_cql", ["algo.cql_alpha=0"]), ("iql_cql", "iql_cql", []),
            ("QMIX, no penalty", "qmix_cql", ["algo.cql_alpha=0"]), ("qmix_cql", "qmix_cql", []),
            ("vdn + cfcql", "cfcql", ["algo.mixer=vdn"]), ("cfcql", "cfcql", []),
            ("vdn + maicq", "maicq", ["algo.mixer=vdn"]), ("maicq", "maicq", []), ("bc", "bc", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--epsilon", type=float, default=0.6)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for game, (joint, best) in OPTIMUM.items():
            env = coplay.make("matrix", game=game, rounds=1)
            act = lambda key, obs, mask, j=jnp.array(joint): jnp.broadcast_to(j, obs.shape[:2])  # noqa: E731
            data = record(env, epsilon_mixture(act, env, args.epsilon), args.episodes, jax.random.PRNGKey(0), "medium")
            path = save(data, Path(tmp) / f"{game}.vlt" / "medium")
            for label, algo, extra in TRAINERS:
                run = coplay.train([f"algo={algo}", "env=matrix", f"env.game={game}", "env.rounds=1",
                                    f"algo.dataset={path}", f"seeds={args.seeds}", f"total_steps={args.steps}",
                                    f"chunk_steps={args.steps}", "eval_episodes=2", f"out_dir={tmp}/runs",
                                    "progress=false", "logger=csv", *extra])
                per_seed = [float(v) for v in run.final_return["per_seed"]]
                rows.append({"game": game, "trainer": label, "algo": algo, "overrides": extra, "per_seed": per_seed,
                             "found": int(np.sum(np.asarray(per_seed) == best)), "seeds": args.seeds})
                print(game, label, per_seed, flush=True)
    write_results("offline_matrix", {**stamp(), "settings": vars(args), "rows": rows})
    regenerate_page()


def section(data: dict) -> str:
    a = data["settings"]
    lines = ["## Offline coordination on matrix-game data", "",
             f"`python benchmarks/offline_matrix.py --seeds {a['seeds']} --steps {a['steps']} --episodes "
             f"{a['episodes']} --epsilon {a['epsilon']}`: seeds (of {a['seeds']}) whose greedy joint action earns the "
             f"optimum, after {a['steps']} gradient steps on {a['episodes']} plays of the optimal joint action with "
             f"each agent's action made uniform with probability {a['epsilon']}; in brackets, the payoffs the seeds "
             "reached.", ""]
    games = list(dict.fromkeys(r["game"] for r in data["rows"]))
    trainers = list(dict.fromkeys(r["trainer"] for r in data["rows"]))
    rows = []
    for label in trainers:
        cells = []
        for game in games:
            r = next(r for r in data["rows"] if r["game"] == game and r["trainer"] == label)
            cells.append(f"{r['found']}/{r['seeds']} ({', '.join(f'{v:g}' for v in sorted(set(r['per_seed'])))})")
        rows.append([label, *cells])
    lines += table(["trainer", *[f"{g} (optimum {OPTIMUM[g][1]:g})" for g in games]], rows)
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return []

if __name__ == "__main__":
    main()
