"""CFR+ on Kuhn and Leduc poker: coplay beside OpenSpiel's solvers, in one run.

    python benchmarks/cfr.py                 # needs open_spiel (pip install open_spiel)
    python benchmarks/cfr.py --quick         # fewer iterations, no table written

Solvers, each on the same game:

- coplay `cfr+` and `dcfr` (`coplay.algos.cfr`): every information set at
  once, blocks of iterations compiled as one `lax.scan`, over the tree's
  terminal paths with chance folded into the payoffs (`TreeArrays`: deals
  that differ only in suits share a path, as OpenSpiel's suit-isomorphic
  Leduc deals ranks);
- OpenSpiel's C++ `CFRPlusSolver` through pyspiel;
- OpenSpiel's Python `CFRPlusSolver` (`open_spiel.python.algorithms.cfr`).

Leduc is OpenSpiel's `leduc_poker(suit_isomorphism=True)`, which is the game
coplay's tree encodes (288 information sets, suits merged); the default
`leduc_poker` (936 information sets, suits apart) is timed too for reference.

For each solver: iterations per second (solver time only; for coplay the
whole budget as one compiled call, as `cfr.advance` is used, and also in blocks
of 10 with a check after each), and the solver time and iterations until the average
policy's exploitability first reaches the target (1e-3 Kuhn, 0.01 Leduc), checked every `block` iterations with the
solver's own library (the check is not timed). coplay's compile time is
reported apart. Every solver runs once per round, in turn, `--rounds` times, so
that the machine's drift reaches all of them alike; a ratio against the C++
solver is the median of the per-round ratios, given only where both ran the same
iterations. As a check that both libraries mean the same game and the
same number, coplay's final policy is also scored by OpenSpiel's exploitability.
Results go to benchmarks/results/cfr.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    fmt_ratio,
    median,
    paired,
    regenerate_page,
    stamp,
    table,
    version,
    write_results,
)

from coplay.algos import cfr  # noqa: E402
from coplay.envs.trees import TreeArrays, game_tree  # noqa: E402
from coplay.envs.trees.kuhn import KuhnRules  # noqa: E402
from coplay.envs.trees.leduc import LeducRules  # noqa: E402
from coplay.envs.trees.values import exploitability  # noqa: E402

GAMES = {
    # coplay tree, OpenSpiel game, its parameters, target, check block, max iterations
    "kuhn": ("kuhn_poker", "kuhn_poker", {}, 1e-3, 10, 2000),
    "leduc": ("leduc_holdem", "leduc_poker", {"suit_isomorphism": True}, 1e-2, 10, 1000),
}
RESULTS = "cfr.json"
CPP = "OpenSpiel C++ CFRPlusSolver"
PYTHON = "OpenSpiel Python CFRPlusSolver"
SUITS_APART = "OpenSpiel C++ CFRPlusSolver, suits apart (936 infosets)"


def coplay_solver(tree_name: str, variant: str, target: float, block: int, max_iters: int):
    """`run() -> result` of coplay's `variant` on the tree, its programs compiled here (not timed)."""
    t = TreeArrays.from_tree(game_tree(tree_name))
    config = cfr.Config(variant=variant)
    step = jax.jit(partial(cfr.advance, iterations=block, config=config))
    expl = jax.jit(lambda s: exploitability(t, cfr.average_policy(t, s)))
    whole = jax.jit(partial(cfr.advance, iterations=max_iters, config=config))
    start = time.perf_counter()
    jax.block_until_ready(expl(step(t, cfr.init(t))))
    compile_s = time.perf_counter() - start
    jax.block_until_ready(whole(t, cfr.init(t)))

    def run() -> dict:
        state, solver_s, reached = cfr.init(t), 0.0, None
        for done in range(block, max_iters + 1, block):
            start = time.perf_counter()
            state = jax.block_until_ready(step(t, state))
            solver_s += time.perf_counter() - start
            e = float(expl(state))
            if reached is None and e <= target:
                reached = (done, solver_s)
        # Steady speed: the whole budget as one compiled call, as `cfr.advance` is meant to be used.
        start = time.perf_counter()
        jax.block_until_ready(whole(t, cfr.init(t)))
        whole_s = time.perf_counter() - start
        return {"iterations": max_iters, "solver_s": solver_s, "it_per_s": max_iters / whole_s,
                "it_per_s_blocks": max_iters / solver_s, "final_exploitability": e, "compile_s": compile_s,
                "reached": reached, "policy": np.asarray(cfr.average_policy(t, state))}

    return run


def run_openspiel(game, make_solver, score, target: float, block: int, max_iters: int, time_limit: float) -> dict:
    solver = make_solver(game)
    solver_s, reached, done = 0.0, None, 0
    while done < max_iters and solver_s < time_limit:
        start = time.perf_counter()
        for _ in range(block):
            solver.evaluate_and_update_policy()
        solver_s += time.perf_counter() - start
        done += block
        e = score(game, solver.average_policy())
        if reached is None and e <= target:
            reached = (done, solver_s)
    return {"iterations": done, "solver_s": solver_s, "it_per_s": done / solver_s,
            "it_per_s_blocks": done / solver_s,
            "final_exploitability": e, "compile_s": 0.0, "reached": reached}


def to_openspiel_policy(game, rules, policy: np.ndarray, tree):
    """coplay's `[I, A]` policy as an OpenSpiel TabularPolicy, state by state: each
    OpenSpiel history is replayed through coplay's rules to find its information set."""
    from open_spiel.python import policy as os_policy

    tabular = os_policy.TabularPolicy(game)

    def walk(state, h):
        if state.is_terminal():
            return
        if state.is_chance_node():
            for a, _ in state.chance_outcomes():
                walk(state.child(a), rules.child(h, a))
            return
        key = state.information_state_string()
        row = tabular.state_lookup[key]
        ours = policy[tree.infoset_index(rules.infoset_key(h))]
        tabular.action_probability_array[row] = ours
        for a in state.legal_actions():
            walk(state.child(a), rules.child(h, a))

    walk(game.new_initial_state(), rules.initial())
    return tabular


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run; nothing is written")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every solver, in turn")
    parser.add_argument("--python-limit", type=float, default=120.0,
                        help="seconds of solver time for OpenSpiel's Python CFR+ per game and round")
    args = parser.parse_args()

    import pyspiel
    from open_spiel.python.algorithms import cfr as os_cfr
    from open_spiel.python.algorithms import exploitability as os_exploitability
    from open_spiel.python.policy import python_policy_to_pyspiel_policy

    def cpp_score(game, p):
        return pyspiel.exploitability(game, p)

    def python_score(game, p):
        return pyspiel.exploitability(game, python_policy_to_pyspiel_policy(p))

    rounds = 1 if args.quick else args.rounds
    games, checks = {}, {}
    for name, (tree_name, os_name, params, target, block, max_iters) in GAMES.items():
        if args.quick:
            max_iters //= 5
        game = pyspiel.load_game(os_name, params)
        solvers = {f"coplay {v}": coplay_solver(tree_name, v, target, block, max_iters) for v in ("cfr+", "dcfr")}
        at = dict(target=target, block=block, max_iters=max_iters)
        solvers[CPP] = lambda g=game, at=at: run_openspiel(g, pyspiel.CFRPlusSolver, cpp_score, **at,
                                                           time_limit=float("inf"))
        solvers[PYTHON] = lambda g=game, at=at: run_openspiel(g, os_cfr.CFRPlusSolver, python_score, **at,
                                                              time_limit=args.python_limit)
        if name == "leduc":
            full = pyspiel.load_game("leduc_poker")
            solvers[SUITS_APART] = lambda g=full, at=at: run_openspiel(g, pyspiel.CFRPlusSolver, cpp_score, **at,
                                                                       time_limit=float("inf"))
        runs: dict[str, list[dict]] = {s: [] for s in solvers}
        for r in range(rounds):          # every solver once per round, in turn
            for label, run in solvers.items():
                runs[label].append(run())
                x = runs[label][-1]
                print(f"{name:6s} round {r} {label:55s} {x['it_per_s']:10.0f} it/s  target: "
                      f"{x['reached'] or 'not reached'}  final {x['final_exploitability']:.2e}", flush=True)
        # Same number from both libraries: OpenSpiel scores coplay's final CFR+ policy.
        # Its suit-isomorphic Leduc deals ranks, not cards, so the replay uses the
        # default game, where the same policy (blind to suits) has the same value.
        rules = KuhnRules() if name == "kuhn" else LeducRules()
        check_game = pyspiel.load_game(os_name)
        first = runs["coplay cfr+"][-1]
        mapped = to_openspiel_policy(check_game, rules, first["policy"], game_tree(tree_name))
        checks[name] = {"coplay": first["final_exploitability"],
                        "openspiel_on_coplay_policy": float(os_exploitability.exploitability(check_game, mapped))}
        for rs in runs.values():
            for x in rs:
                x.pop("policy", None)
        games[name] = {"target": target, "block": block, "max_iterations": max_iters,
                       "solvers": {label: {"rounds": rs, **compare(rs, runs[CPP])} for label, rs in runs.items()}}
    if args.quick:
        print(json.dumps(games, indent=1, default=str)[:3000])
        return
    write_results("cfr", {**stamp(), "open_spiel": version("open_spiel"), "rounds": rounds, "games": games,
                          "checks": checks})
    regenerate_page()


def compare(rs: list[dict], cpp: list[dict]) -> dict:
    """A solver's rounds against the C++ solver's of the same rounds: speed and time to target, per round,
    only where both ran the same iterations (a solver stopped by a time limit is not compared)."""
    out: dict = {}
    if all(a["iterations"] == b["iterations"] for a, b in zip(rs, cpp)):
        out["speed_vs_cpp"] = paired([a["it_per_s"] for a in rs], [b["it_per_s"] for b in cpp])
    else:
        out["not_compared"] = ", ".join(f"{a['iterations']} iterations against {b['iterations']}"
                                        for a, b in zip(rs, cpp) if a["iterations"] != b["iterations"])
    if all(a["reached"] and b["reached"] for a, b in zip(rs, cpp)):
        out["time_to_target_vs_cpp"] = paired([b["reached"][1] for b in cpp], [a["reached"][1] for a in rs])
    return out


# ----- the page ----------------------------------------------------------------------------------------------

TITLE = "CFR+ on Kuhn and Leduc poker beside OpenSpiel"


def section(data: dict) -> str:
    lines = [f"## {TITLE}", "",
             f"`python benchmarks/cfr.py` on {data['machine']}, open_spiel {data.get('open_spiel') or '?'}. Solver "
             "time only. Iterations/s: coplay runs the budget as one compiled call (in brackets: in blocks of 10, as "
             "in the time-to-target run); OpenSpiel calls `evaluate_and_update_policy` in a loop. Time to target: "
             "exploitability checked every 10 iterations by each solver's own library (not timed). Leduc is "
             "`leduc_poker(suit_isomorphism=True)`, the game coplay's tree encodes. coplay's compile time is apart. "
             f"Every solver ran once per round, in turn, {data['rounds']} rounds; figures are medians over rounds, "
             "and a ratio against OpenSpiel's C++ CFRPlusSolver on the same game is the median of the per-round "
             "ratios (their range in brackets).", ""]
    rows = []
    for name, g in data["games"].items():
        for label, s in g["solvers"].items():
            rs = s["rounds"]
            it = median([x["it_per_s"] for x in rs])
            blocks = median([x["it_per_s_blocks"] for x in rs])
            speed = f"{it:,.0f} ({blocks:,.0f})" if label.startswith("coplay") else f"{it:,.0f}"
            vs = "1 (the reference)" if label == CPP else (fmt_ratio(s["speed_vs_cpp"]) if "speed_vs_cpp" in s
                                                            else f"not compared: {s['not_compared']}")
            hits = [x["reached"] for x in rs if x["reached"]]
            if len(hits) == len(rs):
                ttt = "1 (the reference)" if label == CPP else fmt_ratio(s.get("time_to_target_vs_cpp"))
                reached = [f"{hits[0][0]}", f"{median([h[1] for h in hits]):.3f}", ttt]
            else:
                reached = [f"reached in {len(hits)} of {len(rs)} rounds", "–", "–"]
            rows.append([name, label, speed, vs, f"{g['target']:g}", *reached,
                         f"{rs[-1]['final_exploitability']:.2e} ({rs[-1]['iterations']})",
                         f"{median([x['compile_s'] for x in rs]):.1f}"])
    lines += table(["game", "solver", "iterations/s", "x C++", "target", "iterations to target", "seconds to target",
                    "x C++ (time to target)", "final exploitability (iterations)", "compile s"], rows)
    lines += ["", "The same policy scored by both libraries (coplay's final CFR+ average policy):", "",
              *table(["game", "coplay exploitability", "OpenSpiel exploitability"],
                     [[n, f"{c['coplay']:.6f}", f"{c['openspiel_on_coplay_policy']:.6f}"]
                      for n, c in data["checks"].items()])]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    out = []
    for name, g in data["games"].items():
        s = g["solvers"].get("coplay cfr+", {})
        if "speed_vs_cpp" in s:
            out.append({"claim": f"CFR+ iterations/s beside OpenSpiel's C++ CFRPlusSolver ({name})",
                        "workload": f"{name} poker, {g['max_iterations']:,} iterations, one compiled call",
                        "ratio": fmt_ratio(s["speed_vs_cpp"]), "machine": data["machine"]})
    return out


if __name__ == "__main__":
    main()
