"""Known dynamics of the social dilemmas, shown by scripted populations: Schelling
diagrams and the society's outcomes at every mix of cooperators and defectors.

    python benchmarks/social_dynamics.py               # 32 episodes per mix, every case (about 10 minutes on 2 cores)
    python benchmarks/social_dynamics.py --quick       # 4 episodes, 200-step episodes, nothing written

For each case, a cooperative and a selfish scripted player (`coplay.algos.common.social_bots`)
fill the N seats in every mix, c = 0..N cooperators (`coplay.eval.schelling`): the
payoff to a cooperator and to a defector against the number of other cooperators,
with 95% intervals over episodes, and at each c the collective return and the social
metrics (Perolat et al., 2017). The cases:

- commons_harvest: the sustainable harvester (eats only where its patch stays dense)
  beside the greedy harvester: the tragedy of the commons;
- clean_up: the cleaner (cleans, never eats) beside the harvester (eats, never cleans):
  a public good;
- coins, coop_mining, pd_arena: the cooperator and the defector of each;
- population_dilemma under each of its mechanisms: none (partners drawn at random, no
  punishment, no reputations), partner selection with reputations (cooperators name
  the partner of best reputation), direct punishment, third-party punishment, and all
  of them (punishers, who cooperate and punish every defection they may, beside
  defectors where punishment is on).

Writes benchmarks/results/social_dynamics.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "social_dynamics.json"
COMMAND = "python benchmarks/social_dynamics.py"

NO_MECHANISM = {"partner_selection": False, "direct_punishment": False, "third_party_punishment": False,
                "reputation": False}
# name -> (environment, its fields, cooperator, defector, what the cooperator is)
CASES: dict[str, tuple[str, dict, str, str, str]] = {
    "commons_harvest": ("commons_harvest", {}, "sustainable_harvester", "harvester", "sustainable harvester"),
    "clean_up": ("clean_up", {}, "cleaner", "harvester", "cleaner (never eats)"),
    "coins": ("coins", {}, "cooperator", "defector", "takes own coins only"),
    "coop_mining": ("coop_mining", {}, "cooperator", "defector", "mines gold"),
    "pd_arena": ("pd_arena", {}, "cooperator", "defector", "collects cooperation"),
    "population_dilemma/none": ("population_dilemma", NO_MECHANISM, "cooperator", "defector", "cooperates"),
    "population_dilemma/selection+reputation": (
        "population_dilemma", {**NO_MECHANISM, "partner_selection": True, "reputation": True}, "cooperator",
        "defector", "cooperates, names the best reputation"),
    "population_dilemma/direct": ("population_dilemma", {**NO_MECHANISM, "direct_punishment": True}, "punisher",
                                  "defector", "cooperates, punishes"),
    "population_dilemma/third_party": ("population_dilemma", {**NO_MECHANISM, "third_party_punishment": True},
                                       "punisher", "defector", "cooperates, punishes"),
    "population_dilemma/all": ("population_dilemma", {}, "punisher", "defector", "cooperates, punishes"),
}


def run_case(name: str, episodes: int, max_steps: int | None) -> dict:
    import jax

    import coplay
    from coplay.algos.common.bots import make_bot
    from coplay.eval.schelling import schelling_diagram

    env_name, fields, coop, defect, _ = CASES[name]
    if max_steps is not None and env_name != "population_dilemma":
        fields = {**fields, "max_steps": max_steps}
    env = coplay.make(env_name, **fields)
    t = time.perf_counter()
    s = schelling_diagram(env, make_bot(coop, env), None, make_bot(defect, env), None, episodes=episodes,
                          key=jax.random.PRNGKey(0))
    seconds = time.perf_counter() - t
    print(f"{name}: {seconds:.0f} s, dilemma {s.is_dilemma}", flush=True)
    print(s.table(), flush=True)
    return {"env": env_name, "fields": fields, "cooperator": coop, "defector": defect, "seconds": seconds,
            "agents": env.spec.num_agents, "max_steps": env.spec.max_steps, "is_dilemma": s.is_dilemma,
            "cooperator_return": s.cooperator.tolist(), "cooperator_ci": s.cooperator_ci.tolist(),
            "defector_return": s.defector.tolist(), "defector_ci": s.defector_ci.tolist(),
            "collective": s.collective.tolist(), "collective_ci": s.collective_ci.tolist(),
            "metrics": {k: np.asarray(v).tolist() for k, v in s.metrics.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=32, help="episodes per mix (default 32)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated; default every case")
    ap.add_argument("--quick", action="store_true", help="4 episodes of 200 steps; nothing written")
    args = ap.parse_args()
    names = [c for c in args.cases.split(",") if c]
    if set(names) - set(CASES):
        ap.error(f"--cases: any of {', '.join(CASES)}; got {args.cases}")
    episodes, max_steps = (4, 200) if args.quick else (args.episodes, None)
    results = {name: run_case(name, episodes, max_steps) for name in names}
    if args.quick:
        return
    write_results("social_dynamics", {**stamp(), "episodes": episodes, "results": results})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def _ci(x: float, ci: list[float]) -> str:
    return f"{x:.3g} [{ci[0]:.3g}, {ci[1]:.3g}]"


def section(data: dict) -> str:
    lines = ["## Social dilemmas: known dynamics of scripted populations", "",
             f"`{COMMAND}` on {data['machine']} ({data['date']}, coplay {data['commit']}): a cooperative and a "
             "selfish scripted player fill the seats in every mix of c cooperators (`coplay.eval.schelling`), "
             f"{data['episodes']} episodes per mix, 95% intervals over episodes. *All cooperate* and *all defect* "
             "are the collective returns (the sum of the agents' returns) at c = N and c = 0; *best mix* is the c "
             "with the highest collective return; sustainability is the mean step at which rewards arrive "
             "(Perolat et al., 2017), at c = N and c = 0. *Dilemma* is the Schelling diagram's test: defecting pays "
             "more than cooperating at every number of other cooperators, and all cooperating pays more than all "
             "defecting; where it fails, the row says where.", ""]
    rows = []
    for name, r in data["results"].items():
        n = r["agents"]
        coll, ci = r["collective"], r["collective_ci"]
        best = int(np.argmax(coll))
        sus = r["metrics"].get("social/sustainability")
        coop, defect = np.asarray(r["cooperator_return"]), np.asarray(r["defector_return"])
        if r["is_dilemma"]:
            verdict = "yes"
        else:
            where = [str(k) for k in range(n) if defect[k] <= coop[k]]
            why = []
            if where:
                why.append(f"cooperating pays as much or more at k = {', '.join(where)}")
            if coop[-1] <= defect[0]:
                why.append("all cooperating pays no more than all defecting")
            verdict = "no: " + "; ".join(why)
        rows.append([f"`{name}`", f"{r['cooperator']} / {r['defector']}", n, _ci(coll[-1], ci[-1]),
                     _ci(coll[0], ci[0]), f"c = {best}: {coll[best]:.3g}",
                     "" if sus is None else f"{sus[-1]:.0f} / {sus[0]:.0f}", verdict])
    lines += table(["case", "cooperator / defector", "N", "all cooperate", "all defect", "best mix",
                    "sustainability (all coop / all defect)", "dilemma"], rows)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
