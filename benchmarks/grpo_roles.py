"""Three roles trained together by GRPO: proposer, solver and verifier on arithmetic in words.

    python benchmarks/grpo_roles.py                 # 3 seeds; writes BENCHMARKS.md
    python benchmarks/grpo_roles.py --quick         # 1 seed, a few updates, nothing written
    python benchmarks/grpo_roles.py --only "dr_mas, repeat_penalty 4 on the proposer"
                                                    # one setting's curve, printed; nothing written
    python benchmarks/grpo_roles.py --only "..." --updates 600 --name moves
                                                    # the same, written to the study grpo_roles_runs/

Learning. `algo=grpo` (one model for the three roles, conditioned on the role)
trains on `text:arithmetic_roles` through `coplay.train`, with sums of operands
0..4 (25 problems, answers 0..8), two solver attempts (so that the proposer is
paid the learnability term 4 p (1 - p) of its problem) and `invalid=random`
(an utterance that is not a move of its role costs its speaker -1 and a random
move is played, so that the solver and the verifier get problems to work on
before the proposer can write one). Every chunk is checkpointed, and each
checkpoint is scored exactly from the policy's log-probabilities (nothing
sampled): the solver's probability p_x of writing the true value of each
problem x, averaged over all problems and over the problems the proposer poses
(weighted by its probability of posing each), the proposer's probability of
writing a well-formed problem, of a right claim, the number of distinct
problems it poses (exp of the entropy of its problem distribution), and the
learnability 4 p (1 - p) of its problems beside that of all problems; the
verifier's rate of right verdicts and the solver's rate of right answers are
read from the run's own evaluations (`eval/verified`, `eval/solved`, sampled).

Settings. The same with other estimators and regularisers (one line each).

Tracking. Whether the proposer follows the solver: at each checkpoint, the
learnability for the present solver of the problems the present proposer poses,
against those posed by the proposer of an earlier checkpoint and against all
problems alike, and whether it poses more of the problems that have become more
learnable (`tracking`; printed and written for `--only` runs).

Dr. MAS. With `reward_scale=1,100,1` (the solver's rewards x100), GRPO's
pooled z-score (all roles of a group together) against Dr. MAS's per-role one,
same seeds and budget: per-role success rates (unaffected by the scale), the
gradient norm, IQM and 95% CI over seeds (`coplay.eval.stats.summarize`).
Results go to benchmarks/results/grpo_roles.json (an `--only` run's with `--name` to the
study benchmarks/results/grpo_roles_runs/), then BENCHMARKS.md (benchmarks/page.py).
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
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, regenerate_page, stamp, table, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.algos.grpo import GRPO, Config  # noqa: E402
from coplay.envs.text.roles import PROPOSER, SOLVER  # noqa: E402
from coplay.eval.stats import iqm as stats_iqm  # noqa: E402
from coplay.eval.stats import summarize  # noqa: E402
from coplay.experiment import checkpoint  # noqa: E402

RESULTS = "grpo_roles.json"
ENV = {"operators": "plus", "max_operand": 4, "attempts": 2, "invalid": "random"}
MODEL = {"width": 32, "layers": 1, "heads": 2}
BASE = {"estimator": "dr_mas", "ent_coef": 0.01}
EPISODES, CHUNKS = 64, 15
# name -> algo fields beyond MODEL (the first is the main run)
SETTINGS = {
    "dr_mas, ent_coef 0.01": BASE,
    "grpo (pooled), ent_coef 0.01": {**BASE, "estimator": "grpo"},
    "mars, ent_coef 0.01": {**BASE, "estimator": "mars"},
    "dr_mas, ent_coef 0.05, 128 episodes per update": {**BASE, "ent_coef": 0.05, "episodes": 128},
}
# settings run by name with --only (not part of the written tables); `env`: environment
# settings beyond ENV
EXTRA = {
    "dr_mas, repeat_penalty 1 on the proposer": {**BASE, "repeat_penalty": 1.0, "repeat_agents": "0"},
    "dr_mas, repeat_penalty 4 on the proposer": {**BASE, "repeat_penalty": 4.0, "repeat_agents": "0"},
    "dr_mas, repeat_penalty 4 on the proposer, claim_reward 0.25": {
        **BASE, "repeat_penalty": 4.0, "repeat_agents": "0", "env": {"claim_reward": 0.25}},
    "dr_mas, claim_reward 0.25": {**BASE, "env": {"claim_reward": 0.25}},
    "dr_mas, repeat_penalty 4 on the proposer, claim_reward 0.25, 4 attempts": {
        **BASE, "repeat_penalty": 4.0, "repeat_agents": "0", "env": {"claim_reward": 0.25, "attempts": 4}},
    "dr_mas, decoding moves, repeat_penalty 4 on the proposer, claim_reward 0.25, 4 attempts": {
        **BASE, "decoding": "moves", "repeat_penalty": 4.0, "repeat_agents": "0",
        "env": {"claim_reward": 0.25, "attempts": 4}},
    "dr_mas, ent_coef 0.05, decoding moves, repeat_penalty 4 on the proposer, claim_reward 0.25, 4 attempts": {
        **BASE, "ent_coef": 0.05, "decoding": "moves", "repeat_penalty": 4.0, "repeat_agents": "0",
        "env": {"claim_reward": 0.25, "attempts": 4}},
    "dr_mas, ent_coef 0.05, decoding moves, repeat_penalty 4 on the proposer, claim_reward 0, 4 attempts": {
        **BASE, "ent_coef": 0.05, "decoding": "moves", "repeat_penalty": 4.0, "repeat_agents": "0",
        "env": {"claim_reward": 0.0, "attempts": 4}},
    "dr_mas, ent_coef 0.05, decoding moves, repeat_penalty 1 on the proposer, claim_reward 0, 4 attempts": {
        **BASE, "ent_coef": 0.05, "decoding": "moves", "repeat_penalty": 1.0, "repeat_agents": "0",
        "env": {"claim_reward": 0.0, "attempts": 4}},
    "dr_mas, ent_coef 0.1, decoding moves, repeat_penalty 4 on the proposer, claim_reward 0, 4 attempts": {
        **BASE, "ent_coef": 0.1, "decoding": "moves", "repeat_penalty": 4.0, "repeat_agents": "0",
        "env": {"claim_reward": 0.0, "attempts": 4}},
}
SCALE = "1,100,1"


def train(algo: dict, env: dict, seeds: int, updates: int, out: Path, name: str):
    algo = {"episodes": EPISODES, **MODEL, **algo}
    per_update = algo["episodes"] * (env.get("attempts", 1) + 2)
    args = (["algo=grpo", "env=text:arithmetic_roles", f"seeds={seeds}",
             f"total_steps={updates * per_update}", f"chunk_steps={updates * per_update // CHUNKS}",
             "eval_every=1", "eval_episodes=128", "keep_checkpoints=1000", "progress=false", "logger=csv",
             f"out_dir={out}", f"name={name}"]
            + [f"env.{k}={v}" for k, v in env.items()] + [f"algo.{k}={v}" for k, v in algo.items()])
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    rows = list(csv.DictReader((result.run_dir / "metrics.csv").open()))
    return result, rows, seconds


def exact_scores(env, model, params, shared: bool) -> dict:
    """Per seed: what the policy's log-probabilities say of the solver and the proposer."""
    views = env.solver_views()
    values = np.asarray(env.values)
    right = env.role_moves(SOLVER)[jnp.asarray(values)]          # each problem's true value, as the solver says it
    proposals = env.role_moves(PROPOSER)                          # problem-major, then claim 0..M
    _, ts = env.reset(jax.random.PRNGKey(0))
    proposer_view = ts.obs[PROPOSER]

    def one(p):
        of = (lambda r: p) if shared else (lambda r: jax.tree.map(lambda x: x[r], p))  # noqa: E731
        prob = lambda role, v, u: jnp.exp(model.log_prob(of(role), v, role, u)[0])  # noqa: E731
        solve = jax.vmap(lambda v, u: prob(SOLVER, v, u))(views, right)
        pose = jax.vmap(lambda u: prob(PROPOSER, proposer_view, u))(proposals)
        return solve, pose.reshape(len(values), -1)

    solve, pose = (np.asarray(x, np.float64) for x in jax.jit(jax.vmap(one))(params))
    posed = pose.sum(-1)                                          # [S, P] each problem, any claim
    valid = posed.sum(-1)
    share = posed / np.maximum(valid[:, None], 1e-12)
    claim = pose[:, np.arange(len(values)), values].sum(-1) / np.maximum(valid, 1e-12)
    learn = 4 * solve * (1 - solve)
    entropy = -(share * np.log(np.maximum(share, 1e-12))).sum(-1)
    return {"solver_all": solve.mean(-1), "solver_posed": (share * solve).sum(-1), "valid": valid,
            "claim": claim, "problems": np.exp(entropy), "learn_posed": (share * learn).sum(-1),
            "learn_all": learn.mean(-1), "share": share, "solve": solve}


def tracking(points: list[dict], lag: int) -> dict:
    """Does the proposer follow the solver? At each checkpoint t (from `lag` on), per seed:
    the learnability, for the solver of t, of the problems posed by the proposer of t
    (`now`), of those posed by the proposer of `lag` checkpoints earlier (`stale`), and of
    all problems alike (`uniform`); and the correlation, over the problems, between how
    much more the proposer poses each and how much more learnable it has become since then
    (`follow`). A proposer that tracks the solver's changing ability fits the present
    solver better than its own earlier self did (now > stale) and moves towards the
    problems that became learnable (follow > 0); one that only prefers problems of lasting
    difficulty scores now = stale and follow = 0. Means over t, per seed."""
    rows = []
    for before, at in zip(points, points[lag:]):
        share, old, solve, was = (np.asarray(x) for x in (at["share"], before["share"], at["solve"], before["solve"]))
        learn, learned = 4 * solve * (1 - solve), 4 * was * (1 - was)
        follow = [np.corrcoef(share[s] - old[s], learn[s] - learned[s])[0, 1] for s in range(len(share))]
        rows.append(((share * learn).sum(-1), (old * learn).sum(-1), learn.mean(-1), np.asarray(follow)))
    now, stale, uniform, follow = (np.nanmean([r[i] for r in rows], axis=0) for i in range(4))
    return {"now": now.tolist(), "stale": stale.tolist(), "uniform": uniform.tolist(), "follow": follow.tolist(),
            "lag": lag}


def curve(result, rows: list[dict], algo: dict, seeds: int, updates: int, env_settings: dict = ENV) -> list[dict]:
    """Exact scores of every checkpoint and the run's evaluations, per chunk: values per seed."""
    env = coplay.make("text:arithmetic_roles", **env_settings)
    config = Config(**{**MODEL, **algo})          # (the model does not depend on episodes)
    model = GRPO(config, env, 1).model
    points = []
    for i, path in enumerate(checkpoint.list_checkpoints(result.run_dir / "checkpoints")):
        state, _ = checkpoint.load(path, result.state)
        point = {k: v.tolist() for k, v in exact_scores(env, model, state.params, config.share_params).items()}
        chunk = sorted((r for r in rows if int(r["chunk"]) == i), key=lambda r: int(r["seed"]))
        for key in ("eval/verified", "eval/solved", "eval/proposed"):
            point[key.split("/")[1] + "_eval"] = [float(r[key]) for r in chunk]
        point["updates"] = (i + 1) * updates // CHUNKS
        points.append(point)
    return points


def dr_mas_comparison(seeds: int, updates: int, out: Path) -> list[dict]:
    results = []
    scale = [float(s) for s in SCALE.split(",")]
    for estimator in ("grpo", "dr_mas"):
        algo = {**BASE, "estimator": estimator}
        result, rows, seconds = train(algo, {**ENV, "reward_scale": SCALE}, seeds, updates, out, f"scaled-{estimator}")
        last = max(int(r["chunk"]) for r in rows)
        final = sorted((r for r in rows if int(r["chunk"]) == last), key=lambda r: int(r["seed"]))

        def per_seed(key: str, final: list = final) -> np.ndarray:
            return np.asarray([float(r[key]) for r in final])

        grad = np.asarray([np.mean([float(r["grad_norm"]) for r in rows if int(r["seed"]) == s])
                           for s in range(seeds)])
        entry = {"estimator": estimator, "seconds": round(seconds, 1),
                 "grad_norm": summarize(grad).as_dict(),
                 "grad_norm_last": summarize(per_seed("grad_norm")).as_dict()}
        for i, role in enumerate(("proposer", "solver", "verifier")):
            entry[f"return_{role}"] = summarize(per_seed(f"return/{i}") / scale[i]).as_dict()
        for key in ("proposed", "claim_correct", "solved", "verified"):
            entry[key] = summarize(per_seed(f"eval/{key}")).as_dict()
        results.append(entry)
        print(json.dumps(entry), flush=True)
    return results


def fmt(s: dict) -> str:
    return f"{s['iqm']:.2f} [{s['ci_low']:.2f}, {s['ci_high']:.2f}]"


def iqm(values) -> float:
    """The interquartile mean over seeds (the point `summarize` gives, without its bootstrap interval)."""
    return float(stats_iqm(np.asarray(values, np.float64)))


def posed(point: dict, key: str, spec: str = ".2f") -> str:
    """A figure about the problems the proposer poses: "-" where it writes well-formed
    problems less than 5% of the time (the figure would describe almost nothing it says)."""
    return "-" if iqm(point["valid"]) < 0.05 else format(iqm(point[key]), spec)


def curve_table(points: list[dict]) -> list[str]:
    """The exact scores per checkpoint, IQM over seeds, as table lines."""
    lines = ["| updates | solver, all problems | solver, posed problems | proposer well-formed | right claim "
             "| problems posed | learnability posed / all | verifier right |",
             "|---|---|---|---|---|---|---|---|"]
    for p in points:
        lines.append(f"| {p['updates']} | {iqm(p['solver_all']):.2f} | {posed(p, 'solver_posed')} "
                     f"| {iqm(p['valid']):.2f} | {posed(p, 'claim')} | {posed(p, 'problems', '.1f')} "
                     f"| {posed(p, 'learn_posed')} / {iqm(p['learn_all']):.2f} | {iqm(p['verified_eval']):.2f} |")
    return lines


def tables(learning: dict, settings: list[dict], scaled: list[dict], info: str, seeds: int, updates: int,
           scaled_updates: int, env_settings: dict = ENV, model_settings: dict = MODEL) -> str:
    env = ", ".join(f"{k}={v}" for k, v in env_settings.items())
    model = ", ".join(f"{k}={v}" for k, v in model_settings.items())
    lines = [
        "## Three roles trained together: proposer, solver and verifier on arithmetic in words",
        "",
        f"`python benchmarks/grpo_roles.py` on {info}. `algo=grpo` on `text:arithmetic_roles` ({env}), "
        f"one model for the three roles ({model}), {EPISODES} episodes per update in groups of 8, {updates} "
        f"updates, seeds 0..{seeds - 1}. Scored exactly {CHUNKS} times in the run from the policy's "
        "log-probabilities: the solver's probability of the true value averaged over all 25 problems and over the "
        "problems the proposer poses; the proposer's probability of writing a well-formed problem, of a right "
        "claim, the number of problems it poses (exp of its entropy) and the learnability 4p(1-p) of its problems "
        "beside that of all problems (\"-\" while it writes well-formed problems less than 5% of the time); the "
        "verifier's right verdicts are sampled (`eval/verified`). IQM over seeds.",
        "",
        f"Main run: {', '.join(f'{k}={v}' for k, v in BASE.items())} ({learning['seconds']:g} s).",
        "",
        *curve_table(learning["points"]),
    ]
    lines += [
        "",
        "Per seed at the end (solver on all problems; proposer well-formed; problems posed):",
        "",
    ]
    end = learning["points"][-1]
    for s in range(seeds):
        lines.append(f"- seed {s}: solver {end['solver_all'][s]:.2f} (best on the way "
                     f"{max(p['solver_all'][s] for p in learning['points']):.2f}), proposer well-formed "
                     f"{end['valid'][s]:.2f}, {end['problems'][s]:.1f} problems, solver on them "
                     f"{end['solver_posed'][s]:.2f}")
    lines += [
        "",
        "Other settings, same budget and seeds (at the end; best solver accuracy on all problems on the way):",
        "",
        "| setting | solver, all problems | best on the way | solver, posed problems | proposer well-formed "
        "| problems posed | verifier right | wall time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in settings:
        end = r["points"][-1]
        best = [max(p["solver_all"][s] for p in r["points"]) for s in range(seeds)]
        lines.append(f"| {r['name']} | {iqm(end['solver_all']):.2f} | {iqm(best):.2f} | {posed(end, 'solver_posed')} "
                     f"| {iqm(end['valid']):.2f} | {posed(end, 'problems', '.1f')} | {iqm(end['verified_eval']):.2f} "
                     f"| {r['seconds']:g} |")
    lines += ["", "Over the run (IQM over seeds, by update): solver on all problems / proposer well-formed:", ""]
    for r in [learning, *settings]:
        points = ", ".join(f"{p['updates']}: {iqm(p['solver_all']):.2f} / {iqm(p['valid']):.2f}"
                           for p in r["points"][1::2])
        lines.append(f"- {r['name']}: {points}")
    lines += [
        "",
        f"Dr. MAS against GRPO with the solver's rewards x100 (`env.reward_scale={SCALE}`), {scaled_updates} "
        f"updates, seeds 0..{seeds - 1}, otherwise the main run's settings. Success rates from the run's last "
        "evaluation (sampled; not scaled), returns from the last chunk's training episodes divided by the "
        "role's scale, gradient norm (before clipping at 1) averaged over the run and in the last chunk. "
        "IQM [95% CI] over seeds.",
        "",
        "| estimator | proposer well-formed | right claim | solver right | verifier right | return: proposer "
        "| solver | verifier | grad norm (run) | grad norm (last) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in scaled:
        lines.append(f"| {r['estimator']} | {fmt(r['proposed'])} | {fmt(r['claim_correct'])} | {fmt(r['solved'])} "
                     f"| {fmt(r['verified'])} | {fmt(r['return_proposer'])} | {fmt(r['return_solver'])} "
                     f"| {fmt(r['return_verifier'])} | {fmt(r['grad_norm'])} | {fmt(r['grad_norm_last'])} |")
    lines += ["", "Findings, computed from the tables: " + findings(learning, scaled, seeds)]
    return "\n".join(lines)


def findings(learning: dict, scaled: list[dict], seeds: int) -> str:
    points = learning["points"]
    solver = [iqm(p["solver_all"]) for p in points]
    formed = [next((p["updates"] for p in points if p["valid"][s] >= 0.5), None) for s in range(seeds)]
    end = points[-1]
    text = (f"main run: the solver's accuracy on all problems goes from {solver[0]:.2f} to at most "
            f"{max(solver):.2f} and ends at {solver[-1]:.2f}, on the problems posed it ends at "
            f"{iqm(end['solver_posed']):.2f}; the proposer writes well-formed problems half the time or more "
            f"from update {', '.join('never' if u is None else str(u) for u in formed)} (seed by seed) and "
            f"ends posing {iqm(end['problems']):.1f} problem(s) of learnability {iqm(end['learn_posed']):.2f} "
            f"(all problems: {iqm(end['learn_all']):.2f}); the verifier ends right {iqm(end['verified_eval']):.2f} "
            "of the time.")
    by = {r["estimator"]: r for r in scaled}
    if {"grpo", "dr_mas"} <= set(by):
        parts = []
        for key, what in (("proposed", "proposer well-formed"), ("solved", "solver right"),
                          ("verified", "verifier right")):
            a, b = by["dr_mas"][key], by["grpo"][key]
            apart = a["ci_low"] > b["ci_high"] or b["ci_low"] > a["ci_high"]
            parts.append(f"{what} {a['iqm']:.2f} against {b['iqm']:.2f} (CIs {'apart' if apart else 'overlap'})")
        text += " Rewards x100 for the solver, dr_mas against grpo: " + "; ".join(parts) + "."
    return text


LAGS = (1, 3)      # checkpoints between the proposer compared and the present one (1 = one chunk)


def only(name: str, algo: dict, seeds: int, updates: int, section: str | None) -> None:
    """One setting's run, printed; with `section` (--name), written to the study grpo_roles_runs/<section>.json."""
    with tempfile.TemporaryDirectory() as tmp:
        algo = dict(algo)
        env = {**ENV, **algo.pop("env", {})}
        result, rows, seconds = train(algo, env, seeds, updates, Path(tmp), "only")
        points = curve(result, rows, algo, seeds, updates, env)
    r = {"name": name, "algo": algo, "env": env, "seeds": seeds, "updates": updates, "seconds": seconds,
         "points": points, "machine": machine()}
    text = only_table(r, section)
    print(text)
    if section:
        write_results(f"grpo_roles_runs/{section}", {**stamp(), **r})
        regenerate_page()


def only_table(r: dict, section: str | None) -> str:
    """One setting's curve (IQM over seeds of the exact scores per chunk) and whether its
    proposer tracks the solver (`tracking`)."""
    per_chunk = r["updates"] // CHUNKS
    command = f"python benchmarks/grpo_roles.py --only \"{r['name']}\" --seeds {r['seeds']} --updates {r['updates']}"
    lines = [
        f"## Three roles: {r['name']}",
        "",
        f"`{command}{f' --name {section}' if section else ''}` on {r['machine']} "
        f"({r['seconds']:.0f} s). `text:arithmetic_roles` with "
        f"{', '.join(f'{k}={v}' for k, v in r['env'].items())}; `algo=grpo` with "
        f"{', '.join(f'{k}={v}' for k, v in {**MODEL, **r['algo']}.items())}, {EPISODES} episodes per update. "
        "Exact scores as in the main table, IQM over seeds.",
        "",
        *curve_table(r["points"]),
    ]
    lines += [
        "",
        "Does the proposer track the solver? At each checkpoint, the learnability 4p(1-p) for the present "
        "solver of the problems the present proposer poses (now), of those the proposer of an earlier "
        "checkpoint posed (stale), and of all problems alike (uniform); and the correlation over the 25 "
        "problems between how much more the proposer poses each since that checkpoint and how much more "
        "learnable it has become (follow); means over checkpoints, per seed. A proposer that follows the "
        "solver's changing ability has now > stale and follow > 0.",
        "",
        "| lag | seed | now | stale | uniform | follow |",
        "|---|---|---|---|---|---|",
    ]
    tracks = [tracking(r["points"], lag) for lag in LAGS]
    for t in tracks:
        for s in range(r["seeds"]):
            lines.append(f"| {t['lag'] * per_chunk} updates | {s} | {t['now'][s]:.3f} | {t['stale'][s]:.3f} "
                         f"| {t['uniform'][s]:.3f} | {t['follow'][s]:.2f} |")
    lines += ["", "Over the seeds, IQM [95% CI] of each seed's mean over checkpoints, and the seeds on the side "
              "of tracking:", "", "| lag | now - stale | seeds now > stale | follow | seeds follow > 0 |",
              "|---|---|---|---|---|"]
    for t in tracks:
        s = tracking_summary(t)
        lines.append(f"| {t['lag'] * per_chunk} updates | {s['gain']} | {s['gain_seeds']} | {s['follow']} "
                     f"| {s['follow_seeds']} |")
    return "\n".join(lines)


def tracking_summary(t: dict) -> dict[str, str]:
    """One lag's `tracking` pooled over the seeds: the IQM and 95% CI over seeds of now - stale
    and of follow, and how many seeds have each above 0."""
    gain, follow = np.asarray(t["now"]) - np.asarray(t["stale"]), np.asarray(t["follow"])
    g, f = summarize(gain), summarize(follow)
    return {"gain": f"{g.value:+.3f} [{g.low:+.3f}, {g.high:+.3f}]",
            "gain_seeds": f"{int((gain > 0).sum())} of {len(gain)}",
            "follow": f"{f.value:+.2f} [{f.low:+.2f}, {f.high:+.2f}]",
            "follow_seeds": f"{int((follow > 0).sum())} of {len(follow)}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--scaled-updates", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="1 seed, 20 updates, nothing written")
    parser.add_argument("--only", choices=[*SETTINGS, *EXTRA], help="run this setting alone and print its curve "
                        "(IQM over seeds of the exact scores per chunk); nothing written without --section")
    parser.add_argument("--name", help="with --only: write its results to "
                        "benchmarks/results/grpo_roles_runs/<name>.json")
    args = parser.parse_args()
    if args.only:
        only(args.only, {**SETTINGS, **EXTRA}[args.only], args.seeds, args.updates, args.name)
        return
    seeds, updates, scaled_updates = (1, 20, 20) if args.quick else (args.seeds, args.updates, args.scaled_updates)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name, algo in (SETTINGS.items() if not args.quick else list(SETTINGS.items())[:1]):
            result, rows, seconds = train(algo, ENV, seeds, updates, out, name.split(",")[0])
            runs.append({"name": name, "algo": algo, "seconds": round(seconds, 1),
                         "points": curve(result, rows, algo, seeds, updates)})
            end = runs[-1]["points"][-1]
            print(json.dumps({"name": name, "seconds": runs[-1]["seconds"],
                              **{k: v for k, v in end.items() if k != "updates"}}), flush=True)
        scaled = dr_mas_comparison(seeds, scaled_updates, out)
    if args.quick:
        return
    write_results("grpo_roles", {**stamp(), "seeds": seeds, "updates": updates, "env": ENV, "model": MODEL,
                                 "runs": runs, "scaled": scaled, "scaled_updates": scaled_updates})
    regenerate_page()



def section(data: dict) -> str:
    runs = data["runs"]
    return tables(runs[0], runs[1:], data["scaled"], data["machine"], data["seeds"], data["updates"],
                  data["scaled_updates"], data.get("env", ENV), data.get("model", MODEL))


def claims(data: dict) -> list[dict]:
    return []


STUDY = "grpo_roles_runs/"


def study_section(data: dict) -> str:
    rows = []
    for _, r in sorted(data.items(), key=lambda kv: kv[1]["name"]):
        end = r["points"][-1]
        track = tracking_summary(tracking(r["points"], LAGS[0]))
        rows.append([r["name"], r["seeds"], r["updates"], f"{iqm(end['solver_all']):.2f}", posed(end, "solver_posed"),
                     f"{iqm(end['valid']):.2f}", posed(end, "problems", ".1f"),
                     f"{posed(end, 'learn_posed')} / {iqm(end['learn_all']):.2f}",
                     f"{track['gain']}, {track['gain_seeds']}", f"{track['follow']}, {track['follow_seeds']}",
                     f"{r['seconds']:.0f}"])
    lag = LAGS[0] * next(iter(data.values()))["updates"] // CHUNKS
    return "\n".join([
        "## Three roles: settings that keep the proposer writing, and whether it tracks the solver", "",
        f"A study of {len(data)} runs (`benchmarks/results/grpo_roles_runs/`; its README gives the question and the "
        "commands): the main run's task with the settings named (`python benchmarks/grpo_roles.py --only "
        "\"<setting>\" --seeds S --updates U --name NAME`), exact scores at the end as in the main table, IQM over "
        f"seeds. Tracking, over every checkpoint against the one {lag} updates earlier: now - stale, the learnability "
        "for the present solver of the problems the present proposer poses minus that of the problems the earlier "
        "proposer posed, and follow, the correlation over the 25 problems between how much more the proposer poses "
        "each and how much more learnable it has become; IQM [95% CI] over seeds of each seed's mean, and the seeds "
        "above 0. A proposer that follows the solver's changing ability has both above 0. Machines: "
        + "; ".join(sorted({r["machine"] for r in data.values()})) + ".", "",
        *table(["setting", "seeds", "updates", "solver, all problems", "solver, posed problems", "proposer well-formed",
                "problems posed", "learnability posed / all", "now - stale, seeds > 0", "follow, seeds > 0",
                "wall s"], rows)])


if __name__ == "__main__":
    main()
