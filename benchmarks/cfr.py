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
of 10 with a check after each), and the solver time and iterations until the average policy's exploitability first reaches
the target (1e-3 Kuhn, 0.01 Leduc), checked every `block` iterations with the
solver's own library (the check is not timed). coplay's compile time is
reported apart. As a check that both libraries mean the same game and the
same number, coplay's final policy is also scored by OpenSpiel's exploitability.
Results go to benchmarks/results/cfr.json and BENCHMARKS.md.
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
from _common import ROOT, write_section  # noqa: E402
from train_throughput import machine  # noqa: E402

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


def run_coplay(tree_name: str, variant: str, target: float, block: int, max_iters: int) -> dict:
    t = TreeArrays.from_tree(game_tree(tree_name))
    config = cfr.Config(variant=variant)
    step = jax.jit(partial(cfr.advance, iterations=block, config=config))
    expl = jax.jit(lambda s: exploitability(t, cfr.average_policy(t, s)))
    start = time.perf_counter()
    jax.block_until_ready(expl(step(t, cfr.init(t))))
    compile_s = time.perf_counter() - start

    state, solver_s, reached = cfr.init(t), 0.0, None
    for done in range(block, max_iters + 1, block):
        start = time.perf_counter()
        state = jax.block_until_ready(step(t, state))
        solver_s += time.perf_counter() - start
        e = float(expl(state))
        if reached is None and e <= target:
            reached = (done, solver_s)
    # Steady speed: the whole budget as one compiled call, as `cfr.advance` is meant to be used.
    whole = jax.jit(partial(cfr.advance, iterations=max_iters, config=config))
    jax.block_until_ready(whole(t, cfr.init(t)))
    start = time.perf_counter()
    jax.block_until_ready(whole(t, cfr.init(t)))
    whole_s = time.perf_counter() - start
    return {"solver": f"coplay {variant}", "iterations": max_iters, "solver_s": solver_s,
            "it_per_s": max_iters / whole_s, "it_per_s_blocks": max_iters / solver_s, "final_exploitability": e, "compile_s": compile_s,
            "reached": reached, "policy": np.asarray(cfr.average_policy(t, state))}


def run_openspiel(game, make_solver, label: str, score, target: float, block: int, max_iters: int,
                  time_limit: float) -> dict:
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
    return {"solver": label, "iterations": done, "solver_s": solver_s, "it_per_s": done / solver_s,
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
    parser.add_argument("--quick", action="store_true", help="a short run; BENCHMARKS.md is not written")
    parser.add_argument("--python-limit", type=float, default=120.0,
                        help="seconds of solver time for OpenSpiel's Python CFR+ per game")
    args = parser.parse_args()

    import pyspiel
    from open_spiel.python.algorithms import cfr as os_cfr
    from open_spiel.python.algorithms import exploitability as os_exploitability
    from open_spiel.python.policy import python_policy_to_pyspiel_policy

    def cpp_score(game, p):
        return pyspiel.exploitability(game, p)

    def python_score(game, p):
        return pyspiel.exploitability(game, python_policy_to_pyspiel_policy(p))

    rows, checks = [], {}
    for name, (tree_name, os_name, params, target, block, max_iters) in GAMES.items():
        if args.quick:
            max_iters //= 5
        game = pyspiel.load_game(os_name, params)
        results = [run_coplay(tree_name, v, target, block, max_iters) for v in ("cfr+", "dcfr")]
        results.append(run_openspiel(game, pyspiel.CFRPlusSolver, "OpenSpiel C++ CFRPlusSolver", cpp_score,
                                     target, block, max_iters, float("inf")))
        results.append(run_openspiel(game, os_cfr.CFRPlusSolver, "OpenSpiel Python CFRPlusSolver", python_score,
                                     target, block, max_iters, args.python_limit))
        if name == "leduc":
            full = pyspiel.load_game("leduc_poker")
            results.append(run_openspiel(full, pyspiel.CFRPlusSolver,
                                         "OpenSpiel C++ CFRPlusSolver, suits apart (936 infosets)", cpp_score,
                                         target, block, max_iters, float("inf")))
        # Same number from both libraries: OpenSpiel scores coplay's final CFR+ policy.
        # Its suit-isomorphic Leduc deals ranks, not cards, so the replay uses the
        # default game, where the same policy (blind to suits) has the same value.
        rules = KuhnRules() if name == "kuhn" else LeducRules()
        check_game = pyspiel.load_game(os_name)
        mapped = to_openspiel_policy(check_game, rules, results[0]["policy"], game_tree(tree_name))
        checks[name] = {"coplay": results[0]["final_exploitability"],
                        "openspiel_on_coplay_policy": float(os_exploitability.exploitability(check_game, mapped))}
        cpp = next(r for r in results if r["solver"] == "OpenSpiel C++ CFRPlusSolver")
        for r in results:
            r.pop("policy", None)
            r["game"], r["target"] = name, target
            r["speed_vs_cpp"] = r["it_per_s"] / cpp["it_per_s"]
            if r["reached"] and cpp["reached"]:
                r["time_ratio_vs_cpp"] = cpp["reached"][1] / r["reached"][1]
            rows.append(r)
            reached = f"{r['reached'][0]} it, {r['reached'][1]:.3f} s" if r["reached"] else "not reached"
            print(f"{name:6s} {r['solver']:55s} {r['it_per_s']:10.0f} it/s  target: {reached:22s} "
                  f"final {r['final_exploitability']:.2e}", flush=True)
        print(f"{name}: exploitability of coplay's CFR+ policy: coplay {checks[name]['coplay']:.6f}, "
              f"OpenSpiel {checks[name]['openspiel_on_coplay_policy']:.6f}", flush=True)

    if args.quick:
        return
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "cfr.json").write_text(json.dumps({"machine": machine(), "rows": rows, "checks": checks}, indent=2))

    lines = [
        "## CFR+ on Kuhn and Leduc poker beside OpenSpiel",
        "",
        f"`python benchmarks/cfr.py` on {machine()}, open_spiel {pyspiel.__version__ if hasattr(pyspiel, '__version__') else ''}."
        " Solver time only. Iterations/s: coplay runs the budget as one compiled call (in brackets: in blocks"
        " of 10, as in the time-to-target run); OpenSpiel calls `evaluate_and_update_policy` in a loop."
        " Time to target: exploitability checked every 10 iterations by each solver's own library (not timed). Leduc is `leduc_poker(suit_isomorphism=True)`, the game coplay's tree encodes."
        " coplay compile time is apart. Ratios are against OpenSpiel's C++ CFRPlusSolver on the same game.",
        "",
        "| game | solver | iterations/s | x C++ | target | iterations to target | seconds to target | x C++ (time to target) | final exploitability (iterations) | compile s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    def speed(r: dict) -> str:
        if r["solver"].startswith("coplay"):
            return f"{r['it_per_s']:,.0f} ({r['it_per_s_blocks']:,.0f})"
        return f"{r['it_per_s']:,.0f}"

    for r in rows:
        it, sec = (r["reached"] if r["reached"] else ("not reached", None))
        ratio = f"{r['time_ratio_vs_cpp']:.2f}x" if "time_ratio_vs_cpp" in r else "–"
        lines.append(
            f"| {r['game']} | {r['solver']} | {speed(r)} | {r['speed_vs_cpp']:.2f}x | {r['target']:g} | "
            f"{it} | {sec:.3f} | {ratio} | {r['final_exploitability']:.2e} ({r['iterations']}) | "
            f"{r['compile_s']:.1f} |" if sec is not None else
            f"| {r['game']} | {r['solver']} | {speed(r)} | {r['speed_vs_cpp']:.2f}x | {r['target']:g} | "
            f"not reached | – | – | {r['final_exploitability']:.2e} ({r['iterations']}) | {r['compile_s']:.1f} |")
    lines += ["", "The same policy scored by both libraries (coplay's final CFR+ average policy):", "",
              "| game | coplay exploitability | OpenSpiel exploitability |", "|---|---|---|"]
    for name, c in checks.items():
        lines.append(f"| {name} | {c['coplay']:.6f} | {c['openspiel_on_coplay_policy']:.6f} |")
    write_section("cfr", "\n".join(lines))


if __name__ == "__main__":
    main()
