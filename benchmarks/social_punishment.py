"""Cooperation in a population of independent learners, with and without each mechanism
of the population dilemma: partner selection with reputations, direct punishment,
third-party punishment (Dasgupta & Musolesi, 2023, the comparison of their Figure 2).

    python benchmarks/social_punishment.py                      # 5 conditions x 4 seeds, 2M steps each
    python benchmarks/social_punishment.py --punishment rewarded --conditions direct,third_party,all
    python benchmarks/social_punishment.py --steps 60000 --quick  # smoke run, nothing written

Two punishment settings. `costly` (the environment's defaults): a punishment costs the
punisher 1 and the punished 3, the second-order dilemma of costly sanctions. `rewarded`:
the rewards of the code released with the paper (its `Mechanisms/Punishment.py`):
punishing a defector pays the punisher +2, punishing a cooperator costs it 10, the
punished loses 3, and the payoff is the paper's 3/0/4/1.

IPPO (`coplay.train`, defaults otherwise) on `population_dilemma` (6 agents, 10 rounds)
under each condition, the seeds of a condition trained together in one compiled run.
Each trained population is then scored among strangers (`coplay scenario`: resident,
visitor and half scenarios beside scripted cooperators, defectors and punishers).
After each chunk every seed is evaluated; the cooperation rate is the share of
cooperative moves in the evaluation's play steps (`info["cooperation"]` summed over an
episode, over the rounds). The final figures are the interquartile mean over seeds
with its 95% bootstrap interval (`coplay.eval.stats`).

Writes benchmarks/results/social_punishment.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = ("social_punishment.json", "social_punishment_rewarded.json")
COMMAND = "python benchmarks/social_punishment.py"
# the environment's fields for each punishment setting, and the results file of each
PUNISHMENT: dict[str, dict[str, float | str]] = {
    "costly": {},
    "rewarded": {"punish_cost": -2.0, "unjust_punish_cost": 10.0, "payoff": "[[3,0],[4,1]]"},
}
RESULTS_OF = {"costly": "social_punishment", "rewarded": "social_punishment_rewarded"}

OFF = {"partner_selection": False, "direct_punishment": False, "third_party_punishment": False,
       "reputation": False}
CONDITIONS: dict[str, dict[str, bool]] = {
    "none": OFF,
    "selection+reputation": {**OFF, "partner_selection": True, "reputation": True},
    "direct": {**OFF, "direct_punishment": True},
    "third_party": {**OFF, "third_party_punishment": True},
    "all": {k: True for k in OFF},
}
ROUNDS = 10


def train(condition: str, punishment: str, steps: int, seeds: int, chunks: int, out: Path) -> dict:
    import coplay

    fields = [f"env.{k}={str(v).lower()}" for k, v in {**CONDITIONS[condition], **PUNISHMENT[punishment]}.items()]
    args = ["algo=ippo", "env=population_dilemma", f"env.rounds={ROUNDS}", *fields, f"seeds={seeds}",
            f"total_steps={steps}", f"chunk_steps={steps // chunks}", "eval_episodes=32", "progress=false",
            "logger=csv", f"out_dir={out}", f"name={condition.replace('+', '_')}"]
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    rows = list(csv.DictReader((result.run_dir / "metrics.csv").open()))
    curve: dict[int, dict[str, list[float]]] = {}
    for r in rows:
        if r.get("eval/cooperation", "nan") in ("", "nan"):
            continue
        point = curve.setdefault(int(float(r["env_steps"])), {"cooperation": [], "return": [], "direct": [],
                                                              "third_party": []})
        point["cooperation"].append(float(r["eval/cooperation"]) / ROUNDS)
        point["return"].append(float(r["eval/return"]))
        for k in ("direct", "third_party"):
            point[k].append(float(r.get(f"eval/{k}") or 0.0))
    print(f"{condition}: {seconds:.0f} s, final cooperation "
          f"{np.round(curve[max(curve)]['cooperation'], 3).tolist()}", flush=True)
    # the trained populations among strangers: every scenario of the substrate (coplay scenario)
    from coplay.experiment.scenario import run_scenarios

    scen = run_scenarios([str(result.run_dir)], episodes=32, out_dir=out / f"scenarios-{result.run_dir.name}",
                         bootstrap=1000)
    print(scen["text"], flush=True)
    return {"fields": CONDITIONS[condition], "seconds": seconds, "steps": steps, "seeds": seeds,
            "curve": {str(k): v for k, v in sorted(curve.items())},
            "scenarios": {"summary": scen["summary"], "rows": [r.as_dict() for r in scen["evaluation"].rows]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2_000_000, help="environment steps per seed (default 2M)")
    ap.add_argument("--seeds", type=int, default=4, help="seeds per condition (default 4)")
    ap.add_argument("--chunks", type=int, default=10, help="evaluations over the run (default 10)")
    ap.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated; default all")
    ap.add_argument("--punishment", choices=sorted(PUNISHMENT), default="costly",
                    help="costly (the environment's defaults) or rewarded (the paper's code); default costly")
    ap.add_argument("--quick", action="store_true", help="nothing written")
    args = ap.parse_args()
    names = [c for c in args.conditions.split(",") if c]
    if set(names) - set(CONDITIONS):
        ap.error(f"--conditions: any of {', '.join(CONDITIONS)}; got {args.conditions}")
    with tempfile.TemporaryDirectory() as tmp:
        results = {c: train(c, args.punishment, args.steps, args.seeds, args.chunks, Path(tmp)) for c in names}
    if args.quick:
        return
    write_results(RESULTS_OF[args.punishment], {**stamp(), "rounds": ROUNDS, "punishment": args.punishment,
                                                "results": results})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def section(data: dict) -> str:
    from coplay.eval.stats import summarize

    runs = [(stem, data[stem]) for stem in (Path(n).stem for n in RESULTS) if stem in data]
    some = next(iter(runs[0][1]["results"].values()))
    lines = ["## Social dilemmas: cooperation of independent learners under punishment and reputation", "",
             f"`{COMMAND}` and `{COMMAND} --punishment rewarded --conditions direct,third_party,all`: "
             "IPPO on `population_dilemma` (6 agents, "
             f"{runs[0][1]['rounds']} rounds), "
             f"{some['seeds']} seeds per condition, {some['steps']:,} environment steps each, under two punishment "
             "settings: *costly* (the environment's defaults: the prisoner's dilemma 3/0/5/1; a punishment costs the "
             "punisher 1 and the punished 3) "
             "and *rewarded* (the payoff and rewards in the code released with the paper: the prisoner's dilemma "
             "3/0/4/1; punishing a defector pays the punisher +2, punishing a cooperator costs it 10, the punished "
             "loses 3; run for the conditions with punishment). Cooperation: the "
             "share of cooperative moves in 32 evaluation episodes per seed, at the first evaluation (after a "
             "tenth of the budget) and at the end; return: the mean agent's episode return at the end; "
             "punishments: dealt per episode at the end. Interquartile mean over seeds, 95% bootstrap interval.",
             ""]
    lines += [f"- *{run.get('punishment', 'costly')}*: {run['machine']} ({run['date']}, coplay {run['commit']})"
              for _, run in runs]
    lines += [""]
    rows = []
    for setting, name, r in ((run.get("punishment", "costly"), n, r) for _, run in runs
                             for n, r in run["results"].items()):
        steps = sorted(r["curve"], key=int)
        first, last = r["curve"][steps[0]], r["curve"][steps[-1]]
        punish = np.asarray(last["direct"]) + np.asarray(last["third_party"])
        scen = next(iter(r["scenarios"]["summary"].values()), float("nan"))
        rows.append([setting, f"`{name}`", str(summarize(np.asarray(first["cooperation"]))),
                     str(summarize(np.asarray(last["cooperation"]))), str(summarize(np.asarray(last["return"]))),
                     f"{np.mean(punish):.2f}", f"{scen:.2f}", f"{r['seconds'] / 60:.0f} min"])
    lines += table(["punishment", "mechanisms", "cooperation, a tenth in", "cooperation, end", "return, end",
                    "punishments per episode, end", "scenarios: mean normalised score", "time"], rows)
    lines += ["", "*Scenarios*: the trained population's per-capita return in each scenario of its substrate "
              "(`coplay scenario`: 4 of 6 seats (resident), 2 (visitor) and 3 (half), beside scripted "
              "cooperators, defectors, punishers or a mix of them), normalised between the worst (0) and best (1) "
              "scripted or random population in that scenario, then averaged over the scenarios."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
