"""Do coplay's own `spread` and `foraging` learn as the libraries' versions of them do? IPPO's learning curves
on each beside JaxMARL's `MPE_simple_spread_v3` and Jumanji's `LevelBasedForaging` (through coplay's
adapters), at matched settings, the same trainer and settings on both, several seeds in one run each.

    python benchmarks/fidelity_curves.py                      # every pair, 5 seeds
    python benchmarks/fidelity_curves.py --pairs spread --steps 100000 --seeds 2 --no-write   # a smoke run

A pair is two environments that play the same game (tests/test_fidelity.py checks it: spread's random returns
are distributed as JaxMARL's; foraging steps as Jumanji's from the same start). Where they differ by design
(foraging's start states; docs/benchmark-environments.md), the pair is run where they agree (`force_coop`, every
food needing both agents) and, as a second pair, at the defaults where they do not. The observations are each
environment's own (the same facts laid out differently), so the networks see different inputs.

Each side is `coplay train algo=ippo` with the same settings and seeds, evaluated (sampled policy, `--episodes`
episodes per seed) at the end of each of `--points` chunks. At each point, the IQM of the per-seed evaluation
returns with its 95% bootstrap CI over seeds (`coplay.eval.stats.summarize`); a point agrees when the two CIs
overlap. Writes benchmarks/results/fidelity_curves.json, then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import eval_returns, regenerate_page, stamp, table, version, write_results  # noqa: E402

RESULTS = "fidelity_curves.json"
COMMAND = "python benchmarks/fidelity_curves.py"
# label: (coplay's env and settings, the library's env and the same settings, what is matched)
PAIRS = {
    "spread": (["env=spread"], ["env=jaxmarl:MPE_simple_spread_v3", "env.max_steps=24"],
               "3 agents, 3 landmarks, 25 steps (JaxMARL's `max_steps=24`: its MPE plays one step more)"),
    "foraging-coop": (["env=foraging", "env.force_coop=true", "env.max_steps=50"],
                      ["env=jumanji:LevelBasedForaging", "env.force_coop=true", "env.time_limit=50"],
                      "8 x 8, 2 agents, 2 food each needing both, 50 steps: the setting where the two start alike"),
    "foraging": (["env=foraging", "env.max_steps=50"],
                 ["env=jumanji:LevelBasedForaging", "env.force_coop=false", "env.time_limit=50"],
                 "8 x 8, 2 agents, 2 food, 50 steps: the defaults, where the food levels differ by design"),
}
LIBRARY = {"spread": "JaxMARL `MPE_simple_spread_v3`", "foraging-coop": "Jumanji `LevelBasedForaging`",
           "foraging": "Jumanji `LevelBasedForaging`"}
ALGO = ["algo=ippo", "progress=false", "logger=csv"]


def curve(overrides: list[str], steps: int, seeds: int, points: int, episodes: int) -> dict:
    """Train, evaluating at the end of each chunk: {"steps": [P], "returns": [P][S], "seconds": s}."""
    import coplay

    out = tempfile.mkdtemp(prefix="coplay-fidelity-")
    t0 = time.perf_counter()
    result = coplay.train([*ALGO, *overrides, f"total_steps={steps}", f"chunk_steps={steps // points}",
                           f"seeds={seeds}", f"eval_episodes={episodes}", f"out_dir={out}"])
    seconds = time.perf_counter() - t0
    evals = eval_returns(result.run_dir)
    return {"steps": list(evals), "returns": list(evals.values()), "seconds": seconds}


def compare(ours: dict, theirs: dict) -> list[dict]:
    from coplay.eval.stats import summarize

    if ours["steps"] != theirs["steps"]:
        raise SystemExit(f"the two sides evaluated at different steps: {ours['steps']} and {theirs['steps']}")
    points = []
    for i, step in enumerate(ours["steps"]):
        a, b = summarize(ours["returns"][i]), summarize(theirs["returns"][i])
        points.append({"env_steps": step, "coplay": [a.value, a.low, a.high], "library": [b.value, b.low, b.high],
                       "overlap": bool(a.low <= b.high and b.low <= a.high)})
    return points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default=",".join(PAIRS), help="comma-separated: " + ", ".join(PAIRS))
    ap.add_argument("--steps", type=int, default=400_000, help="env steps per seed")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--points", type=int, default=8, help="evaluations along the run (chunks)")
    ap.add_argument("--episodes", type=int, default=64, help="evaluation episodes per seed and point")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    names = [p for p in args.pairs.split(",") if p]
    if set(names) - set(PAIRS):
        ap.error(f"--pairs: any of {', '.join(PAIRS)}")
    if args.seeds < 2 or args.points < 1 or args.steps < args.points:
        ap.error("--seeds >= 2 (a CI over seeds), --points >= 1, --steps >= --points")
    rows = []
    for name in names:
        ours_env, theirs_env, matched = PAIRS[name]
        ours = curve(ours_env, args.steps, args.seeds, args.points, args.episodes)
        theirs = curve(theirs_env, args.steps, args.seeds, args.points, args.episodes)
        points = compare(ours, theirs)
        rows.append({"pair": name, "coplay": ours_env, "library": theirs_env, "matched": matched,
                     "curves": {"coplay": ours, "library": theirs}, "points": points})
        for p in points:
            print(f"[{name}] {p['env_steps']:>9,}  coplay {p['coplay'][0]:.3f} [{p['coplay'][1]:.3f}, "
                  f"{p['coplay'][2]:.3f}]  library {p['library'][0]:.3f} [{p['library'][1]:.3f}, "
                  f"{p['library'][2]:.3f}]  {'overlap' if p['overlap'] else 'APART'}", flush=True)
    data = {**stamp(), "jaxmarl_version": version("jaxmarl"), "jumanji_version": version("jumanji"),
            "steps": args.steps, "seeds": args.seeds, "points": args.points, "episodes": args.episodes,
            "rows": rows}
    if args.no_write:
        print(section(data))
        return
    write_results("fidelity_curves", data)
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------

TITLE = "coplay's own environments learn as the libraries' versions do"


def _ci(x: list[float]) -> str:
    return f"{x[0]:.3f} [{x[1]:.3f}, {x[2]:.3f}]"


def section(data: dict) -> str:
    lines = [f"## {TITLE}", "",
             f"`{COMMAND} --steps {data['steps']} --seeds {data['seeds']}` on {data['machine']}; JaxMARL "
             f"{data.get('jaxmarl_version') or '?'}, Jumanji {data.get('jumanji_version') or '?'}. The same IPPO "
             f"(coplay's defaults) on coplay's environment and on the library's (through coplay's adapter), "
             f"{data['steps']:,} env steps per seed, {data['seeds']} seeds; the sampled policy evaluated over "
             f"{data['episodes']} episodes per seed at {data['points']} points. Per-agent return, IQM over seeds "
             "with its 95% bootstrap CI; a point agrees when the two CIs overlap. Each side sees its own "
             "observations (the same facts, laid out differently).", ""]
    body = []
    for r in data["rows"]:
        last = r["points"][-1]
        agree = sum(p["overlap"] for p in r["points"])
        body.append([f"`{' '.join(r['coplay'])}`", f"`{' '.join(r['library'])}`", r["matched"],
                     f"{agree} of {len(r['points'])}", _ci(last["coplay"]), _ci(last["library"])])
    lines += table(["coplay", "library", "matched", "points whose CIs overlap", "coplay, final", "library, final"],
                   body)
    for r in data["rows"]:
        lines += ["", f"`{r['pair']}`, the curves:", ""]
        lines += table(["env steps", "coplay", LIBRARY[r["pair"]], "CIs overlap"],
                       [[f"{p['env_steps']:,}", _ci(p["coplay"]), _ci(p["library"]), "yes" if p["overlap"] else
                         "**no**"] for p in r["points"]])
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return [{"claim": f"IPPO learns on coplay's `{r['coplay'][0][4:]}` as on {LIBRARY[r['pair']]}: CIs overlap at "
                      f"{sum(p['overlap'] for p in r['points'])} of {len(r['points'])} points",
             "workload": f"{r['matched']}; {data['steps']:,} steps, {data['seeds']} seeds",
             "ratio": f"final IQM {r['points'][-1]['coplay'][0]:.3f} / {r['points'][-1]['library'][0]:.3f}",
             "machine": data["machine"]} for r in data["rows"]]


if __name__ == "__main__":
    main()
