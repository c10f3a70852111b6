"""Independent learners in the sequential social dilemmas: the tragedy of the commons in
Commons Harvest, and Clean Up with and without a social preference (Perolat et al., 2017;
Hughes et al., 2018).

    python benchmarks/social_learning.py                                  # every condition
    python benchmarks/social_learning.py --conditions commons_harvest     # one; the others' results are kept
    python benchmarks/social_learning.py --steps 8192 --quick             # smoke run, nothing written

IPPO (`coplay.train`, the MLP torso, 32 environments x 128 steps per update, defaults
otherwise) with the seeds of a condition trained together in one compiled run, evaluated
after each of `--chunks` equal parts of the budget (16 episodes per seed, greedy off:
the policy samples). The conditions:

- `commons_harvest`: selfish learners on the open map (7 agents, 1,000 steps);
- `clean_up`: selfish learners (7 agents, 1,000 steps);
- `clean_up+inequity_aversion`: each learner trains on Hughes et al.'s utility,
  advantageous inequity aversion (`social=inequity_aversion:alpha=0:beta=0.05`);
- `clean_up+reward_exchange`: each learner trains on the mean of every agent's reward
  (`social=reward_exchange:share=1`, the collective reward).

Every figure is of the environment's own rewards (a preference changes only what the
learner trains on): the collective return per episode (efficiency x steps), the social
metrics of `coplay.envs.social.metrics`, and the river cells cleaned. The references are
the scripted populations of `benchmarks/social_dynamics.py` (the same environments): every
seat a sustainable harvester or a greedy one; in Clean Up, no cleaner and the best mix of
cleaners and harvesters. Interquartile mean over seeds with 95% bootstrap intervals.

Writes benchmarks/results/social_learning.json (a condition run again replaces its entry),
then BENCHMARKS.md (benchmarks/page.py).
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
from _common import load, regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "social_learning.json"
COMMAND = "python benchmarks/social_learning.py"

# name -> (environment, extra run fields)
CONDITIONS: dict[str, tuple[str, list[str]]] = {
    "commons_harvest": ("commons_harvest", []),
    "clean_up": ("clean_up", []),
    "clean_up+inequity_aversion": ("clean_up", ["social=inequity_aversion:alpha=0:beta=0.05",
                                                "algo.shaped_reward=shaping/inequity_aversion"]),
    "clean_up+reward_exchange": ("clean_up", ["social=reward_exchange:share=1",
                                              "algo.shaped_reward=shaping/reward_exchange"]),
}
METRICS = ("efficiency", "equality", "sustainability", "peace")


def train(condition: str, steps: int, seeds: int, chunks: int, out: Path) -> dict:
    import coplay

    env, fields = CONDITIONS[condition]
    args = ["algo=ippo", f"env={env}", "algo.torso=mlp", "algo.num_envs=32", "algo.rollout_len=128", *fields,
            f"seeds={seeds}", f"total_steps={steps}", f"chunk_steps={steps // chunks}", "eval_episodes=16",
            "progress=false", "logger=csv", f"out_dir={out}", f"name={condition.replace('+', '_')}"]
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    rows = list(csv.DictReader((result.run_dir / "metrics.csv").open()))
    n = coplay.make(env).spec.num_agents
    curve: dict[int, dict[str, list[float]]] = {}
    for r in rows:
        if r.get("eval/social/efficiency", "") in ("", "nan"):
            continue
        point = curve.setdefault(int(float(r["env_steps"])), {"collective": [], "cleaned": [],
                                                              **{m: [] for m in METRICS}})
        point["collective"].append(float(r["eval/return"]) * n)
        point["cleaned"].append(float(r.get("eval/cleaned") or 0.0))
        for m in METRICS:
            point[m].append(float(r[f"eval/social/{m}"]))
    last = curve[max(curve)]
    print(f"{condition}: {seconds:.0f} s, collective return {np.round(last['collective'], 1).tolist()}, "
          f"sustainability {np.round(last['sustainability'], 1).tolist()}", flush=True)
    return {"env": env, "fields": fields, "seconds": seconds, "steps": steps, "seeds": seeds, "agents": n,
            "curve": {str(k): v for k, v in sorted(curve.items())}, **stamp()}


def random_play(env_name: str, episodes: int = 32) -> dict:
    """The uniformly random team in the environment: the same figures, over episodes."""
    import jax

    import coplay
    from coplay.algos.common.matches import make_match, random_policy

    env = coplay.make(env_name)
    n = env.spec.num_agents
    out = jax.jit(make_match(env, [random_policy(env)] * n, episodes))([None] * n, jax.random.PRNGKey(0))
    return {"collective": np.asarray(out["return"]).sum(1).tolist(),
            **{m: np.asarray(out["final"][f"social/{m}"]).tolist() for m in METRICS}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=786_432,
                    help="environment steps per seed (default 786,432: 192 updates)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per condition (default 3)")
    ap.add_argument("--chunks", type=int, default=8, help="evaluations over the run (default 8)")
    ap.add_argument("--conditions", default=",".join(CONDITIONS),
                    help="comma-separated; default all; empty: only the references again")
    ap.add_argument("--quick", action="store_true", help="nothing written")
    args = ap.parse_args()
    names = [c for c in args.conditions.split(",") if c]
    if set(names) - set(CONDITIONS):
        ap.error(f"--conditions: any of {', '.join(CONDITIONS)}; got {args.conditions}")
    if args.steps % (args.chunks * 32 * 128):
        ap.error(f"--steps {args.steps} must be a multiple of --chunks x 4096 (one update: 32 envs x 128 steps)")
    previous = (load(RESULTS) or {}).get("results", {})
    with tempfile.TemporaryDirectory() as tmp:
        results = {c: train(c, args.steps, args.seeds, args.chunks, Path(tmp)) for c in names}
    if args.quick:
        return
    merged = {**previous, **results}
    randoms = {env: random_play(env) for env in sorted({r["env"] for r in merged.values()})}
    write_results("social_learning", {**stamp(), "results": merged, "random": randoms})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def _references() -> dict[str, dict[str, tuple[float, float]]]:
    """Scripted populations from social_dynamics.json: name -> {collective, sustainability}."""
    cases = (load("social_dynamics.json") or {}).get("results", {})
    out: dict[str, dict[str, tuple[float, float]]] = {}
    if "commons_harvest" in cases:
        c = cases["commons_harvest"]
        out["every seat a sustainable harvester"] = {"collective": c["collective"][-1],
                                                     "sustainability": c["metrics"]["social/sustainability"][-1]}
        out["every seat a greedy harvester"] = {"collective": c["collective"][0],
                                                "sustainability": c["metrics"]["social/sustainability"][0]}
    if "clean_up" in cases:
        c = cases["clean_up"]
        best = int(np.argmax(c["collective"]))
        out["Clean Up, no cleaner"] = {"collective": c["collective"][0],
                                       "sustainability": c["metrics"]["social/sustainability"][0]}
        out[f"Clean Up, {best} cleaners, the rest harvesters (best mix)"] = {
            "collective": c["collective"][best], "sustainability": c["metrics"]["social/sustainability"][best]}
    return out


def section(data: dict) -> str:
    from coplay.eval.stats import summarize

    lines = ["## Social dilemmas: independent learners in Commons Harvest and Clean Up", "",
             f"`{COMMAND}` on {data['machine']}: IPPO (MLP torso, 32 environments x 128 steps per update, "
             "defaults otherwise) in 1,000-step episodes with 7 agents; each row its own run (date and commit "
             "given). Collective return: the sum of every agent's own reward per episode (a preference changes "
             "only what the learners train on); sustainability: the mean step at which rewards came; cleaned: "
             "river cells cleaned per episode. At the first evaluation and at the end; interquartile mean over "
             "seeds of 16 episodes each, 95% bootstrap interval.", ""]
    rows = []
    for name, r in data["results"].items():
        steps = sorted(r["curve"], key=int)
        first, last = r["curve"][steps[0]], r["curve"][steps[-1]]
        s = {k: summarize(np.asarray(v)) for k, v in last.items()}
        rows.append([f"`{name}`", f"{r['seeds']} x {r['steps']:,}", str(summarize(np.asarray(first["collective"]))),
                     str(s["collective"]), str(s["sustainability"]), str(s["equality"]), str(s["cleaned"]),
                     f"{r['seconds'] / 60:.0f} min, {r['date']}, {r['commit']}"])
    lines += table(["condition", "seeds x steps", "collective return, first evaluation", "collective return, end",
                    "sustainability, end", "equality, end", "cleaned, end", "time, date, commit"], rows)
    refs = {f"{env}, uniformly random": {"collective": float(np.mean(r["collective"])),
                                          "sustainability": float(np.mean(r["sustainability"]))}
            for env, r in data.get("random", {}).items()}
    envs = {r["env"] for r in data["results"].values()}
    refs.update({k: v for k, v in _references().items()
                 if ("clean_up" in envs if k.startswith("Clean Up") else "commons_harvest" in envs)})
    if refs:
        lines += ["", "References in the same environments: the uniformly random team (32 episodes) and scripted "
                  "populations (`benchmarks/social_dynamics.py`, 32 episodes):", ""]
        lines += table(["population", "collective return", "sustainability"],
                       [[k, f"{v['collective']:.1f}", f"{v['sustainability']:.1f}"] for k, v in refs.items()])
    return "\n".join(lines)


if __name__ == "__main__":
    main()
