"""What a native JAX environment buys: simple spread as coplay's `spread` (pure
JAX) beside mpe2's `simple_spread_v3` trained through `from_pettingzoo`
(stepped on the host), in the same run on the same machine.

    python benchmarks/host_envs.py                  # both tables
    python benchmarks/host_envs.py --only steps     # random-action env-steps/s
    python benchmarks/host_envs.py --only train     # MAPPO on both paths, same config

`steps`: env-steps/s with random actions and auto-reset, 64 environments, for
coplay's `spread` (jit + vmap), `pettingzoo:mpe2.simple_spread_v3` with its
copies in this process, in 2 worker processes and in 2 Ray actors (a local Ray
instance; on a cluster the actors may be on other machines), and mpe2 stepped by a plain
Python loop in one process (the in-process host path cannot beat it). Every path
is set up first, then timed in rounds, one timing of each in turn per round, so
that the machine's drift reaches all alike; a rate is the median over rounds, a
ratio the median of the per-round ratios. `train`: MAPPO with coplay's defaults
on both paths, the same seeds and budget, the two runs in turn (`--repeats`
times): env-steps/s and the final evaluation return (IQM over seeds with 95%
bootstrap CI, per-agent), beside a uniformly random policy's return. The two
environments are the same game step for step (tests/test_spread.py,
tests/test_pettingzoo_import.py), so the returns are directly comparable.
Results go to benchmarks/results/host_envs.json, then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS as RESULTS_DIR,
)
from _common import (
    alternate,
    fmt_ratio,
    needs_rerun,
    paired,
    regenerate_page,
    same_budget,
    stamp,
    table,
    write_results,
)

RESULTS = "host_envs.json"
HOST = "pettingzoo:mpe2.simple_spread_v3"
ENVS = 64
LOOP = "mpe2, plain Python loop"
NATIVE = "coplay spread (JAX)"
BRIDGED = "mpe2 simple_spread via from_pettingzoo (2 workers)"
COMMAND = "python benchmarks/host_envs.py"


def _rate(fn, steps_per_call: int, min_seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_seconds:
        fn()
        n += 1
    return n * steps_per_call / (time.perf_counter() - t0)


def coplay_path(name: str, **kwargs):
    """(one call, env steps per call, close) of `ENVS` copies stepped 25 times with random actions."""
    import jax

    import coplay
    from coplay.wrappers import AutoReset

    env = AutoReset(coplay.make(name, **kwargs))
    length = 25
    state, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), ENVS))

    @jax.jit
    def roll(state, key):
        def body(s, k):
            a = jax.random.randint(k, (ENVS, env.num_agents), 0, env.spec.num_actions)
            s, ts = jax.vmap(env.step)(s, a, jax.random.split(k, ENVS))
            return s, ts.reward.sum()
        return jax.lax.scan(body, state, jax.random.split(key, length))

    box = {"state": state, "key": jax.random.PRNGKey(1)}

    def call():
        box["key"], k = jax.random.split(box["key"])
        box["state"], r = roll(box["state"], k)
        jax.block_until_ready(r)

    call()  # compile
    return call, ENVS * length, env.close


def mpe2_loop():
    from mpe2 import simple_spread_v3

    envs = [simple_spread_v3.parallel_env() for _ in range(ENVS)]
    rng = np.random.default_rng(0)
    for i, e in enumerate(envs):
        e.reset(seed=i)

    def call():
        for e in envs:
            e.step({a: int(rng.integers(5)) for a in e.agents})
            if not e.agents:
                e.reset()

    call()
    return call, ENVS, lambda: None


def steps_table(rounds: int, seconds: float) -> dict:
    paths = {
        NATIVE: lambda: coplay_path("spread"),
        "from_pettingzoo, copies in-process": lambda: coplay_path(HOST),
        "from_pettingzoo, 2 worker processes": lambda: coplay_path(HOST, workers=2),
        "from_pettingzoo, 2 Ray actors": lambda: coplay_path(HOST, workers=2, worker_backend="ray"),
        LOOP: mpe2_loop,
    }
    made = {name: make() for name, make in paths.items()}
    try:
        rates = alternate({name: (lambda c=call, n=n: _rate(c, n, seconds)) for name, (call, n, _) in made.items()},
                          rounds)
    finally:
        for _, _, close in made.values():
            close()
    out = {name: {"steps_per_s": float(np.median(r)), "rates": r, "over_loop": paired(r, rates[LOOP])}
           for name, r in rates.items()}
    for k, v in out.items():
        print(f"{k}: {v['steps_per_s']:,.0f} env-steps/s, {fmt_ratio(v['over_loop'])} the loop", flush=True)
    return {**stamp(), "rounds": rounds, "seconds_per_timing": seconds, "envs": ENVS, "rows": out}


def train_table(total_steps: int, seeds: int, repeats: int, out_dir: Path) -> dict:
    import coplay
    from coplay.eval.stats import summarize
    from coplay.experiment.runner import uniform_policy_return

    paths = {NATIVE: ["env=spread"], BRIDGED: [f"env={HOST}", "env.workers=2"]}
    runs: dict[str, list[dict]] = {k: [] for k in paths}
    for _ in range(repeats):
        for label, env in paths.items():        # in turn, so that drift reaches both
            overrides = ["algo=mappo", *env, f"seeds={seeds}", f"total_steps={total_steps}", "chunk_steps=50000",
                         "eval_every=0", "eval_episodes=64"]
            t0 = time.perf_counter()
            result = coplay.train(overrides + ["progress=false", "logger=csv", f"out_dir={out_dir}"])
            wall = time.perf_counter() - t0
            steps = result.summary["env_steps_per_seed"] * seeds
            per_seed = np.array(result.final_return["per_seed"])
            runs[label].append({"env_steps": steps, "wall_s": wall, "env_steps_per_s": steps / wall,
                                "return": summarize(per_seed).as_dict(), "per_seed": per_seed.tolist()})
            print(label, runs[label][-1], flush=True)
    a, b = runs[NATIVE], runs[BRIDGED]
    for x, y in zip(a, b):
        same_budget(NATIVE, x["env_steps"], BRIDGED, y["env_steps"])
    rows = {}
    for label, env in paths.items():
        rows[label] = {**runs[label][0], "repeats": runs[label],
                       "random_return": uniform_policy_return(["algo=mappo", *env, "progress=false",
                                                               "logger=csv"], episodes=256)}
    rows[NATIVE]["over_bridged"] = paired([r["env_steps_per_s"] for r in a], [r["env_steps_per_s"] for r in b])
    return {**stamp(), "seeds": seeds, "total_steps": total_steps, "repeats": repeats, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("steps", "train"))
    ap.add_argument("--rounds", type=int, default=5, help="steps: rounds of one timing of each path")
    ap.add_argument("--seconds", type=float, default=1.0, help="steps: length of one timing")
    ap.add_argument("--total-steps", type=int, default=300_000)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="train: rounds of the two training runs, in turn")
    ap.add_argument("--out", default="/tmp/coplay-host-bench")
    args = ap.parse_args()
    path = RESULTS_DIR / RESULTS
    results = json.loads(path.read_text()) if path.exists() else {}
    if args.only in (None, "steps"):
        results["steps"] = steps_table(args.rounds, args.seconds)
    if args.only in (None, "train"):
        results["train"] = train_table(args.total_steps, args.seeds, args.repeats, Path(args.out))
    write_results("host_envs", results)
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def section(data: dict) -> str:
    lines = ["## Native JAX beside host-stepped PettingZoo: simple spread", ""]
    s = data.get("steps")
    if s and "rows" in s:
        lines += [f"`{COMMAND} --only steps` on {s['machine']}. {s['envs']} environments, random actions, "
                  "auto-reset; env-steps/s (one step of one environment, all 3 agents), compile time apart. Every "
                  f"path timed in turn, {s['rounds']} rounds of one timing of >= {s['seconds_per_timing']:g} s each: "
                  "the median over rounds, and the median of the per-round ratios to mpe2's own loop (their range).",
                  "", *table(["path", "env-steps/s", "vs mpe2's own Python loop"],
                             [[k, f"{v['steps_per_s']:,.0f}", "1 (the reference)" if k == LOOP else
                               fmt_ratio(v["over_loop"])] for k, v in s["rows"].items()])]
    elif s:
        lines += [f"`{COMMAND} --only steps` (machine not recorded). 64 environments, random actions, auto-reset; "
                  "env-steps/s, best of 3 timings of >= 2 s each, each path timed after the other, not in "
                  "alternation, so no ratio is given.", "",
                  *table(["path", "env-steps/s"], [[k, f"{v:,.0f}"] for k, v in s.items()]), "",
                  needs_rerun("the paths were not timed in alternation", f"{COMMAND} --only steps")]
    t = data.get("train")
    if t:
        rows = t.get("rows", t)
        first = next(iter(rows.values()))
        seeds = t.get("seeds", len(first["per_seed"]))
        where = f"on {t['machine']}" if "machine" in t else "(machine not recorded)"
        lines += ["", f"Training, `{COMMAND} --only train` {where}: MAPPO with coplay's defaults on both paths, "
                  f"{first['env_steps'] // seeds:,} env steps per seed, {seeds} seeds in one compiled run; wall time "
                  "includes compilation and evaluation. Return: per-agent episode return of the final policy, 64 "
                  "evaluation episodes per seed, IQM over seeds [95% bootstrap CI]; random policy: 256 episodes."]
        body = []
        for k, r in rows.items():
            ret = r["return"]
            body.append([k, f"{r['env_steps_per_s']:,.0f}", f"{r['wall_s']:.0f}",
                         f"{ret['iqm']:.2f} [{ret['ci_low']:.2f}, {ret['ci_high']:.2f}]",
                         ", ".join(f"{v:.2f}" for v in r["per_seed"]), f"{r['random_return']:.2f}"])
        lines += ["", *table(["environment", "env-steps/s (training)", "wall s", "final return", "per seed",
                              "random policy"], body)]
        native = rows.get(NATIVE, {})
        if "over_bridged" in native:
            lines += ["", f"Training env-steps/s, native over bridged, the runs in turn: "
                          f"{fmt_ratio(native['over_bridged'])}."]
        else:
            lines += ["", "The two training runs ran one after the other in one invocation, once; no ratio is given."]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    out = []
    s = data.get("steps")
    if s and "rows" in s:
        r = s["rows"]
        out.append({"claim": "native JAX spread beside mpe2 through `from_pettingzoo` (2 workers)",
                    "workload": f"{s['envs']} envs, random actions",
                    "ratio": fmt_ratio(paired(r[NATIVE]["rates"], r["from_pettingzoo, 2 worker processes"]["rates"])),
                    "machine": s["machine"]})
    elif s:
        out.append({"claim": "native JAX spread beside mpe2 through `from_pettingzoo`", "workload": "64 envs, "
                    "random actions", "ratio": "not timed in alternation: needs a rerun", "machine": "not recorded"})
    return out


if __name__ == "__main__":
    main()
