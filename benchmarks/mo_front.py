"""A whole Pareto front from one compiled run: coplay's weight sweep on the salvage
task, alone and beside MOMAland's MOMAPPO on the same task.

    python benchmarks/mo_front.py                            # every part
    python benchmarks/mo_front.py --only coplay              # coplay's time to the target (no MOMAland needed)
    python benchmarks/mo_front.py --only compare --compare-seeds 2   # beside MOMAPPO, seed for seed
    python benchmarks/mo_front.py --only conditioned         # one conditioned policy beside the sweep
    python benchmarks/mo_front.py --only known               # every environment whose front is known
    python benchmarks/mo_front.py --only ols                 # weights chosen by OLS against an even spread
    python benchmarks/mo_front.py --only chebyshev           # the sweep on Chebyshev's utility, known fronts

The task is `treasure` (two submarines, objectives treasure and time, crew
alone, convex values), whose true front the environment computes: (2, -2),
(10, -3), (14, -5), (15, -7), hypervolume 95 against the reference point
(0, -10).

1. `to_target`: `algo=mo_ppo`, 16 weights x 4 seeds in one compiled run,
   evaluated (greedy, 4 episodes per weight) every 5,120 environment steps per
   weight. The table gives, per evaluation, the wall time
   since the start (compilation included) and each seed's hypervolume as a
   share of the true one.
2. `compare`: MOMAland's MOMAPPO (`momaland.learning.cooperative_momappo.
   discrete_momappo.train`, its own defaults: 128 steps per update, 2 epochs,
   256x256 networks, rewards normalised per objective), given the same task
   through `coplay.interop.to_pettingzoo` and the same 16 evenly spread weights,
   one weight after another, beside coplay's sweep of the same 16 weights, seed
   for seed and in turn (coplay seed 0, MOMAPPO seed 0, coplay seed 1, ...), the
   same environment steps per weight on both sides (refused otherwise); each
   trained policy is then played greedily, as coplay's are. The wall-clock ratio
   is MOMAPPO's time for a seed over coplay's for the same seed, median over
   seeds.
   MOMAland needs `pip install momaland mo-gymnasium pycddlib==2.1.6 cvxpy
   torch==2.13.0 distrax chex supersuit` and `morl-baselines --no-deps` (its
   MOMAPPO imports them); without them this part is skipped, saying so.
3. `conditioned`: `algo=pc_mappo`, one preference-conditioned policy per seed
   (4 seeds), played greedily at the same 16 weights, beside the sweep, both
   evaluated every 8,192 environment steps counted over all policies (the sweep's
   16 policies then take 512 steps each): hypervolume per environment step.
4. `known`: every environment (and variant) whose true front is computed in
   code, `pc_mappo` as in part 3 for 131,072 steps per seed: the first
   evaluation with every seed at 99% of the true hypervolume, and the final
   share. A linear utility reaches only the front's convex hull, so a concave
   front (treasure `values=concave`) or a linear one (every point ties for the
   weight that reaches the middle: the imbalancing-act games) caps what any
   linear method can find.
5. `ols`: the sweep with fewer weights than the front has points (3 and 4;
   the front has 4), weights spread evenly (`algo.select=even`) or moved by
   optimistic linear support after every evaluation (`algo.select=ols`), 4
   seeds, 61,440 steps per weight, evaluated every 6,144.
6. `chebyshev`: every environment of part 4, `algo=mo_ppo algo.utility=chebyshev`
   (16 weights x 4 seeds, as in part 1), 81,920 steps per weight, evaluated every
   5,120. The matrix games are played one-shot (`env.rounds=1`, the normal-form
   games of Radulescu et al., 2020): over 25 rounds the imbalancing-act front has
   101 points on a line, and 16 points of it make at most 0.942 of its
   hypervolume whatever finds them (computed here, `cap_16`).

Results go to benchmarks/results/mo_front.json (each part replaces its own
entry), then BENCHMARKS.md (benchmarks/page.py)."""

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
from _common import (  # noqa: E402
    RESULTS as RESULTS_DIR,
)
from _common import (
    fmt_ratio,
    needs_rerun,
    paired,
    regenerate_page,
    same_budget,
    stamp,
    table,
    write_results,
)

import coplay  # noqa: E402
from coplay.algos.common.preferences import spread_weights  # noqa: E402
from coplay.eval.multi_objective import expected_utility, hypervolume, pareto_front  # noqa: E402
from coplay.eval.stats import iqm  # noqa: E402
from coplay.experiment.fronts import utility_weights  # noqa: E402

RESULTS = "mo_front.json"
COMPARE = "python benchmarks/mo_front.py --only compare"
WEIGHTS, SEEDS = 16, 4
CHUNK = 5_120             # environment steps per weight between evaluations (10 updates)
TARGET = 0.99
# 8 environments x 16 steps: 128 steps per update, MOMAPPO's batch
CONDITIONED = ["algo=pc_mappo", "env=treasure", f"algo.weights={WEIGHTS}", f"seeds={SEEDS}", "algo.num_envs=32",
               "algo.rollout_len=16", "algo.ent_coef=0.05", "algo.greedy_eval=true", "eval_episodes=4",
               "progress=false", "logger=csv"]
KNOWN = {   # environment settings whose true front is computed in code
    "treasure (alone, convex)": ["env=treasure"],
    "treasure (alone, concave)": ["env=treasure", "env.values=concave"],
    "treasure (together, convex)": ["env=treasure", "env.crew=together"],
    "matrix imbalancing_act": ["env=matrix", "env.game=imbalancing_act"],
    "matrix imbalancing_act_without_m": ["env=matrix", "env.game=imbalancing_act_without_m"],
}
CHEBYSHEV = ["algo=mo_ppo", "algo.utility=chebyshev", f"algo.weights={WEIGHTS}", f"seeds={SEEDS}", "algo.num_envs=8",
             "algo.rollout_len=16", "algo.ent_coef=0.05", "algo.greedy_eval=true", "eval_episodes=4",
             "progress=false", "logger=csv"]
ONE_SHOT = {name: env + ["env.rounds=1"] if name.startswith("matrix") else env for name, env in KNOWN.items()}
CHEBYSHEV_STEPS = 81_920
OLS_RUN = ["algo=mo_ppo", "env=treasure", f"seeds={SEEDS}", "algo.num_envs=32", "algo.rollout_len=16",
           "algo.ent_coef=0.05", "algo.greedy_eval=true", "eval_episodes=4", "progress=false", "logger=csv"]
SHARED_CHUNK = 8_192      # environment steps over all of a seed's policies between evaluations
SWEEP = ["algo=mo_ppo", "env=treasure", f"algo.weights={WEIGHTS}", f"seeds={SEEDS}", "algo.num_envs=8",
         "algo.rollout_len=16", "algo.ent_coef=0.05", "algo.greedy_eval=true", "eval_episodes=4",
         "progress=false", "logger=csv"]


def coplay_sweep(steps_per_weight: int, chunk: int, out: Path, args: list[str] = SWEEP) -> dict:
    """A run of 4 seeds (by default the 16-weight sweep): per evaluation, steps per
    seed (per weight, for the sweep), wall s and each seed's hypervolume."""
    t = time.perf_counter()
    result = coplay.train(args + [f"total_steps={steps_per_weight}", f"chunk_steps={chunk}", f"out_dir={out}"])
    wall = time.perf_counter() - t
    rows = list(csv.DictReader((result.run_dir / "metrics.csv").open()))
    evals: dict[int, dict] = {}
    for r in rows:
        e = evals.setdefault(int(r["env_steps"]), {"wall_s": float(r["wall_time"]), "hv": []})
        e["hv"].append(float(r["eval/hypervolume"]))
    front = result.summary["front"]
    return {"wall_s": wall, "true_hypervolume": front["true_hypervolume"],
            "evaluations": [{"steps_per_weight": k, **v} for k, v in sorted(evals.items())],
            "final_fronts": front["per_seed"], "final_hypervolume": result.summary["final"]["hypervolume"]["per_seed"],
            "final_expected_utility": result.summary["final"]["expected_utility"]["per_seed"],
            "final_weights": front.get("final_weights")}


def momappo_seed(steps_per_weight: int, seed: int) -> dict | None:
    """MOMAland's MOMAPPO on the exported task, every weight in turn, one seed; None when
    MOMAland's MOMAPPO cannot be imported."""
    try:
        import jax
        import momaland.learning.cooperative_momappo.discrete_momappo as momappo
        from supersuit import agent_indicator_v0
    except ImportError as e:
        print(f"MOMAland's MOMAPPO is not importable ({e}); its part is skipped", file=sys.stderr)
        return None
    from coplay.interop.pettingzoo import to_pettingzoo

    defaults = dict(num_steps_per_epoch=128, update_epochs=2, num_minibatches=2, gamma=0.99, lr=2.5e-4,
                    gae_lambda=0.99, clip_eps=0.2, ent_coef=0.01, vf_coef=0.8, max_grad_norm=0.5,
                    actor_net_arch=[256, 256], critic_net_arch=[256, 256], activation="tanh", anneal_lr=True,
                    track=False, debug=False)
    weights = spread_weights(2, WEIGHTS)
    ref = coplay.make("treasure").reference_point
    args = argparse.Namespace(**defaults, seed=seed + 1, timesteps_per_weight=steps_per_weight)
    env = to_pettingzoo(coplay.make("treasure"), api="parallel")
    env.reset(seed=seed)
    # MOMAPPO reads these as module globals, which its own __main__ sets
    momappo.args, momappo.env, momappo.current_timestep = args, env, 0
    momappo.actor = momappo.Actor(env.action_space(env.possible_agents[0]).n, net_arch=args.actor_net_arch,
                                  activation=args.activation)
    momappo.critic = momappo.Critic(net_arch=args.critic_net_arch, activation=args.activation)
    momappo.vmapped_get_value = jax.vmap(momappo.critic.apply, in_axes=(None, 0))
    momappo.critic.apply = jax.jit(momappo.critic.apply)
    eval_env = agent_indicator_v0(to_pettingzoo(coplay.make("treasure"), api="parallel"))
    key = jax.random.PRNGKey(seed + 1)
    t = time.perf_counter()
    points = []
    for w in weights:
        trained = momappo.train(args, env, w, key)
        points.append(_greedy_return(momappo, trained["runner_state"][0].params, eval_env))
    wall = time.perf_counter() - t
    points = np.array(points)
    return {"seed": seed, "steps_per_weight": steps_per_weight, "weights": WEIGHTS, "wall_s": wall,
            "front": pareto_front(points).tolist(), "hypervolume": hypervolume(points, ref),
            "expected_utility": expected_utility(points, utility_weights(2))}


def compare(steps_per_weight: int, seeds: int, out: Path) -> dict | None:
    """coplay's sweep and MOMAPPO, seed for seed, in turn, the same steps per weight."""
    pairs = []
    for seed in range(seeds):
        args = [x if x != f"seeds={SEEDS}" else "seeds=1" for x in SWEEP] + [f"seed={seed}"]
        c = coplay_sweep(steps_per_weight, steps_per_weight, out / f"compare{seed}", args)
        c["seed"], c["steps_per_weight"] = seed, c["evaluations"][-1]["steps_per_weight"]
        m = momappo_seed(steps_per_weight, seed)
        if m is None:
            return None
        same_budget(f"coplay seed {seed}", c["steps_per_weight"] * WEIGHTS, f"MOMAPPO seed {seed}",
                    m["steps_per_weight"] * m["weights"])
        pairs.append({"coplay": c, "momappo": m})
        print(f"seed {seed}: coplay {c['wall_s']:.1f} s, MOMAPPO {m['wall_s']:.1f} s", flush=True)
    return {**stamp(), "steps_per_weight": steps_per_weight, "weights": WEIGHTS, "pairs": pairs,
            "ratio": paired([p["momappo"]["wall_s"] for p in pairs], [p["coplay"]["wall_s"] for p in pairs])}


def _greedy_return(momappo, params, env, episodes: int = 4) -> np.ndarray:
    """The mean vector return, per agent as coplay counts it, of a MOMAPPO actor that
    takes its most likely action."""
    import jax.numpy as jnp

    total = np.zeros(2)
    for e in range(episodes):
        obs, _ = env.reset(seed=e)
        done = False
        while not done:
            stacked = jnp.array(np.stack([obs[a] for a in env.possible_agents]))
            pi = momappo._ma_get_pi(params, stacked)
            actions = {a: int(np.argmax(pi[i].logits)) for i, a in enumerate(env.possible_agents)}
            obs, rewards, term, trunc, _ = env.step(actions)
            total += np.mean([rewards[a] for a in env.possible_agents], axis=0)
            done = any(term.values()) or any(trunc.values())
    return total / episodes


def _table(sweep: dict) -> str:
    true = sweep["true_hypervolume"]
    lines = ["| env steps per weight | wall s (compile included) | hypervolume / true, per seed | seeds at 99% |",
             "|---:|---:|---|---:|"]
    for e in sweep["evaluations"]:
        shares = [h / true for h in e["hv"]]
        lines.append(f"| {e['steps_per_weight']:,} | {e['wall_s']:.1f} | {', '.join(f'{s:.3f}' for s in shares)} | "
                     f"{sum(s >= TARGET for s in shares)}/{len(shares)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("coplay", "compare", "conditioned", "known", "ols", "chebyshev"))
    ap.add_argument("--steps", type=int, default=40_960, help="environment steps per weight of the coplay run")
    ap.add_argument("--compare-steps", type=int, default=10_240,
                    help="environment steps per weight of the side-by-side runs")
    ap.add_argument("--compare-seeds", type=int, default=2, help="seeds of the side-by-side runs (each side)")
    ap.add_argument("--conditioned-steps", type=int, default=131_072,
                    help="environment steps per seed, over all policies, of the conditioned-vs-sweep runs")
    a = ap.parse_args()
    path = RESULTS_DIR / RESULTS
    results = json.loads(path.read_text()) if path.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        if a.only in (None, "conditioned"):
            results["conditioned"] = coplay_sweep(a.conditioned_steps, SHARED_CHUNK, Path(tmp) / "pc", CONDITIONED)
            results["sweep_shared"] = coplay_sweep(a.conditioned_steps // WEIGHTS, SHARED_CHUNK // WEIGHTS,
                                                   Path(tmp) / "sweep", SWEEP)
        if a.only in (None, "known"):
            base = [x for x in CONDITIONED if not x.startswith("env=")]
            results["known"] = {name: coplay_sweep(a.conditioned_steps, SHARED_CHUNK, Path(tmp) / f"known{i}",
                                                   base + env)
                                for i, (name, env) in enumerate(KNOWN.items())}
        if a.only in (None, "chebyshev"):
            results["chebyshev"] = {name: coplay_sweep(CHEBYSHEV_STEPS, CHUNK, Path(tmp) / f"cheb{i}", CHEBYSHEV + env)
                                    for i, (name, env) in enumerate(ONE_SHOT.items())}
            results["cap_16"] = cap_on_a_line(WEIGHTS, 25)
        if a.only in (None, "ols"):
            results["ols"] = {f"{w} {sel}": coplay_sweep(61_440, 6_144, Path(tmp) / f"ols{w}{sel}",
                                                         OLS_RUN + [f"algo.weights={w}", f"algo.select={sel}"])
                              for w in (3, 4) for sel in ("even", "ols")}
        if a.only in (None, "coplay"):
            results["to_target"] = coplay_sweep(a.steps, CHUNK, Path(tmp) / "target")
        if a.only in (None, "compare"):
            found = compare(a.compare_steps, a.compare_seeds, Path(tmp))
            if found is not None:
                results["compare"] = found
                for old in ("coplay_compare", "momappo", "momappo_steps"):    # a comparison of separate runs
                    results.pop(old, None)
    if a.only is None or "machine" not in results:
        results.update(stamp())            # the whole file's; a part run alone keeps the others' stamp
    if a.only:
        results.setdefault("parts", {})[a.only] = stamp()
    write_results("mo_front", results)
    regenerate_page()


TITLE = "A Pareto front from one compiled run: the weight sweep on `treasure`, and beside MOMAland's MOMAPPO"


def section(r: dict) -> str:
    out = [f"## {TITLE}", "",
           f"Machine: {r['machine']}. Command: `python benchmarks/mo_front.py`. Task: `env=treasure` (crew alone, "
           "convex values), whose true front the environment computes"
           + (f" (hypervolume {r['to_target']['true_hypervolume']:g})" if "to_target" in r else "")
           + f". coplay: `{' '.join(SWEEP)}`, {WEIGHTS} weights x {SEEDS} seeds in one compiled run, "
           "evaluated greedily every chunk.", ""]
    if "compare" in r:
        out += ["", *_compare(r["compare"]), ""]
    elif "coplay_compare" in r and "momappo" in r:
        out += ["", *_legacy_compare(r), ""]
    if "to_target" in r:
        t = r["to_target"]
        goal = TARGET * t["true_hypervolume"]
        hit = next((e for e in t["evaluations"] if all(h >= goal for h in e["hv"])), None)
        firsts = [next((e for e in t["evaluations"] if e["hv"][s] >= goal), None) for s in range(SEEDS)]
        each = ", ".join(f"seed {s}: {f['steps_per_weight']:,} steps, {f['wall_s']:.1f} s" if f else f"seed {s}: never"
                         for s, f in enumerate(firsts))
        out += ["### Time to 99% of the true hypervolume", "",
                (f"Every seed at 99% of the true hypervolume in one evaluation: after {hit['steps_per_weight']:,} "
                 f"environment steps per weight, {hit['wall_s']:.1f} s into the run (compilation included; target: "
                 "within 180 s)." if hit else "No evaluation had every seed at 99% of the true hypervolume at once.")
                + f" Each seed's first evaluation at 99%: {each}.", "",
                _table(t), "",
                f"Final hypervolume per seed: {t['final_hypervolume']} of {t['true_hypervolume']}; final fronts: "
                f"{t['final_fronts']}.", ""]
    if "conditioned" in r and "sweep_shared" in r:
        out += ["", *_conditioned(r["conditioned"], r["sweep_shared"])]
    if "known" in r:
        out += ["", *_known(r["known"])]
    if "chebyshev" in r:
        out += ["", *_chebyshev(r["chebyshev"], r["cap_16"], r.get("known"))]
    if "ols" in r:
        out += ["", *_ols(r["ols"])]
    return "\n".join(x for i, x in enumerate(out) if not (x == "" and i and out[i - 1] == ""))


def _compare(c: dict) -> list[str]:
    rows = []
    for p in c["pairs"]:
        a, m = p["coplay"], p["momappo"]
        rows.append([p["coplay"].get("seed", m["seed"]), f"{m['steps_per_weight']:,}", f"{a['wall_s']:.1f}",
                     f"{m['wall_s']:.1f}", f"{m['wall_s'] / a['wall_s']:.1f}x", f"{a['final_hypervolume'][0]:g}",
                     f"{m['hypervolume']:g}", f"{a['final_expected_utility'][0]:.3f}", f"{m['expected_utility']:.3f}"])
    return ["### Beside MOMAland's MOMAPPO, seed for seed, in turn", "",
            f"The same task, the same {c['weights']} evenly spread weights and the same environment steps per weight "
            "on both sides; coplay's sweep (one compiled run per seed, `seeds=1`) and MOMAPPO's weight-after-weight "
            "loop (its environment stepped in Python through `to_pettingzoo`) take turns, seed by seed. Wall s: the "
            "whole training, compilation and evaluation included.", "",
            *table(["seed", "env steps per weight", "coplay wall s", "MOMAPPO wall s", "MOMAPPO / coplay",
                    "coplay hypervolume", "MOMAPPO hypervolume", "coplay expected utility",
                    "MOMAPPO expected utility"], rows), "",
            f"Wall-clock ratio, MOMAPPO's time over coplay's for the same seed: **{fmt_ratio(c['ratio'], 'seeds')}**."]


def _legacy_compare(r: dict) -> list[str]:
    c, m = r["coplay_compare"], r["momappo"]
    steps = c["evaluations"][-1]["steps_per_weight"]
    return ["### Beside MOMAland's MOMAPPO, same task, same steps per weight", "",
            *table(["", "seeds", "weights", "env steps per weight", "wall s", "hypervolume per seed"],
                   [["coplay mo_ppo, one compiled run", len(c["final_hypervolume"]), WEIGHTS, f"{steps:,}",
                     f"{c['wall_s']:.1f}", ", ".join(f"{h:g}" for h in c["final_hypervolume"])],
                    ["MOMAland MOMAPPO, weight after weight", len(m["wall_s"]), WEIGHTS, f"{r['momappo_steps']:,}",
                     f"{sum(m['wall_s']):.1f}", ", ".join(f"{h:g}" for h in m["hypervolume"])]]), "",
            f"These two rows are not compared: coplay ran {len(c['final_hypervolume'])} seeds in one run and MOMAPPO "
            f"{len(m['wall_s'])}, and the results file does not record that they ran in one invocation, in turn.", "",
            needs_rerun("seed for seed, in turn", COMPARE)]


def claims(r: dict) -> list[dict]:
    if "compare" in r:
        c = r["compare"]
        return [{"claim": "multi-objective weight sweep (16 weights) beside MOMAland's MOMAPPO, wall clock",
                 "workload": f"`treasure`, {c['steps_per_weight']:,} env steps per weight, seed for seed",
                 "ratio": fmt_ratio(c["ratio"], "seeds"), "machine": c["machine"]}]
    if "momappo" in r:
        return [{"claim": "multi-objective weight sweep (16 weights) beside MOMAland's MOMAPPO, wall clock",
                 "workload": f"`treasure`, {r['momappo_steps']:,} env steps per weight",
                 "ratio": "not measured seed for seed: needs a rerun", "machine": r["machine"]}]
    return []


def _ols(runs: dict) -> list[str]:
    rows = ["### Weights chosen by optimistic linear support, against an even spread", "",
            f"`{' '.join(OLS_RUN)} algo.weights=W algo.select=even|ols total_steps=61440 chunk_steps=6144`: fewer "
            "weights than the front has points. Final hypervolume per "
            "seed, its IQM, and the weights each seed ended with (weight on treasure).", "",
            "| weights | select | final hypervolume per seed | IQM | final weights on treasure, per seed | wall s |",
            "|---:|---|---|---:|---|---:|"]
    for name, run in runs.items():
        w, sel = name.split()
        hv = run["final_hypervolume"]
        ends = "; ".join(", ".join(f"{x[0]:.2f}" for x in seed) for seed in run["final_weights"])
        rows.append(f"| {w} | {sel} | {', '.join(f'{h:g}' for h in hv)} | {iqm(np.array(hv)):.1f} | {ends} | "
                    f"{run['wall_s']:.1f} |")
    return rows


def cap_on_a_line(points: int, rounds: int) -> float:
    """The largest share of the 25-round imbalancing-act front's hypervolume that
    `points` of its points can have (every return lies on x + y = 4 rounds; the best
    `points` are spread evenly along it)."""
    env = coplay.make("matrix", game="imbalancing_act", rounds=rounds)
    truth = env.true_front()
    ref = env.reference_point
    total = 4.0 * rounds
    xs = np.round(np.linspace(0, total, points))
    best = hypervolume(np.stack([xs, total - xs], 1), ref)
    return float(best / hypervolume(truth, ref))


def _first_at_target(run: dict | None) -> dict | None:
    """The first evaluation with every seed at 99% of the true hypervolume within 180 s."""
    if run is None:
        return None
    true = run["true_hypervolume"]
    return next((e for e in run["evaluations"] if all(h >= TARGET * true for h in e["hv"]) and e["wall_s"] <= 180),
                None)


def _at_target(run: dict) -> str:
    """A table's cells: the true hypervolume, the first evaluation at the target, the final shares."""
    true = run["true_hypervolume"]
    hit = _first_at_target(run)
    when = f"{hit['steps_per_weight']:,} steps, {hit['wall_s']:.1f} s" if hit else "none"
    return f"{true:g} | {when} | " + ", ".join(f"{h / true:.3f}" for h in run["final_hypervolume"])


def _chebyshev(runs: dict, cap: float, known: dict | None) -> list[str]:
    rows = ["### The sweep on Chebyshev's utility, every environment whose true front is known", "",
            f"`{' '.join(CHEBYSHEV)} env=... total_steps={CHEBYSHEV_STEPS} chunk_steps={CHUNK}` (the matrix games "
            "one-shot, `env.rounds=1`), evaluated every 5,120 environment steps per weight (wall s since the training "
            "loop began, compilation included). Target: every seed at 99% of the true hypervolume within 180 s.", "",
            "| environment | true hypervolume | first evaluation with every seed at 99% | final hypervolume / true, "
            "per seed | wall s |", "|---|---:|---|---|---:|"]
    for name, run in runs.items():
        rows.append(f"| {name}{' (one-shot)' if name.startswith('matrix') else ''} | {_at_target(run)} | "
                    f"{run['wall_s']:.1f} |")
    if known:
        met = [name + (" one-shot" if name.startswith("matrix") else "") for name in runs
               if any(_first_at_target(r.get(name)) for r in (runs, known))]
        rows += ["", f"Every seed at 99% within 180 s, by this sweep or by `pc_mappo` (the table above): "
                     f"{len(met)} of {len(runs)} environments ({', '.join(met)})."]
    rows += ["", f"Over the matrix games' default 25 rounds the imbalancing-act front lies on a line, and {WEIGHTS} "
                 f"of its points, evenly spread, make at most {cap:.3f} of its hypervolume (`cap_16`, computed by the "
                 "script), whatever method finds them."]
    return rows


def _known(known: dict) -> list[str]:
    """Each environment with a known front: pc_mappo's time to 99% and final share."""
    base = " ".join(x for x in CONDITIONED if not x.startswith("env="))
    rows = ["### Every environment whose true front is known", "",
            f"`{base} env=...`, evaluated every {SHARED_CHUNK:,} environment steps per seed (wall s since the training "
            "loop began, compilation included). Target: every seed at 99% of the true hypervolume within 180 s.", "",
            "| environment | true hypervolume | first evaluation with every seed at 99% | final hypervolume / true, "
            "per seed |", "|---|---:|---|---|"]
    for name, run in known.items():
        rows.append(f"| {name} | {_at_target(run)} |")
    return rows


def _conditioned(pc: dict, sweep: dict) -> list[str]:
    """The conditioned policy beside the sweep, per evaluation at the same environment steps."""
    true = pc["true_hypervolume"]
    rows = ["### One preference-conditioned policy beside the weight sweep, same environment steps", "",
            f"`{' '.join(CONDITIONED)}` (`algo=pc_mappo`: one policy takes the weight as input, a critic with a head "
            "per objective, a weight drawn per episode) and the sweep above, both evaluated every "
            f"{SHARED_CHUNK:,} environment steps per seed counted over all policies ({SHARED_CHUNK // WEIGHTS} per "
            f"weight for the sweep's {WEIGHTS}); both played greedily at the same {WEIGHTS} weights. Hypervolume as a "
            "share of the true one, IQM over the 4 seeds (each seed's share). Wall s: since the training loop "
            "began, the first chunk's compilation included; each whole call, planning and initialisation included, "
            f"took {pc['wall_s']:.1f} s (pc_mappo) and {sweep['wall_s']:.1f} s (mo_ppo).", "",
            "| env steps per seed (all policies) | pc_mappo: hypervolume / true | wall s | mo_ppo sweep: "
            "hypervolume / true | wall s |", "|---:|---|---:|---|---:|"]
    by_steps = {e["steps_per_weight"] * WEIGHTS: e for e in sweep["evaluations"]}
    for e in pc["evaluations"]:
        s = by_steps.get(e["steps_per_weight"])
        cells = [f"{iqm(np.array(e['hv']) / true):.3f} ({', '.join(f'{h / true:.2f}' for h in e['hv'])})",
                 f"{e['wall_s']:.1f}"]
        cells += ([f"{iqm(np.array(s['hv']) / true):.3f} ({', '.join(f'{h / true:.2f}' for h in s['hv'])})",
                   f"{s['wall_s']:.1f}"] if s else ["", ""])
        rows.append(f"| {e['steps_per_weight']:,} | " + " | ".join(cells) + " |")
    goal = TARGET * true
    first = {name: next((e for e in run["evaluations"] if all(h >= goal for h in e["hv"])), None)
             for name, run in (("pc_mappo", pc), ("mo_ppo", sweep))}
    said = []
    for name, e in first.items():
        steps = e and e["steps_per_weight"] * (WEIGHTS if name == "mo_ppo" else 1)
        said.append(f"{name}: every seed at 99% after {steps:,} steps, {e['wall_s']:.1f} s" if e else
                    f"{name}: no evaluation with every seed at 99%")
    rows += ["", "; ".join(said) + "."]
    return rows


if __name__ == "__main__":
    main()
