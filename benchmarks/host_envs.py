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
Python loop in one process (the in-process host path cannot beat it). `train`: MAPPO with coplay's
defaults on both paths, the same seeds and budget: env-steps/s and the final
evaluation return (IQM over seeds with 95% bootstrap CI, per-agent), beside a
uniformly random policy's return. The two environments are the same game step
for step (tests/test_spread.py, tests/test_pettingzoo_import.py), so the
returns are directly comparable. Results go to
benchmarks/results/host_envs.json and BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

import coplay
from coplay.eval.stats import summarize
from coplay.experiment.runner import uniform_policy_return
from coplay.wrappers import AutoReset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, cores, cpu_model, write_section  # noqa: E402

HOST = "pettingzoo:mpe2.simple_spread_v3"
ENVS = 64


def _best_rate(fn, steps_per_call: int, min_seconds: float = 2.0, repeats: int = 3) -> float:
    best = 0.0
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < min_seconds:
            fn()
            n += 1
        best = max(best, n * steps_per_call / (time.perf_counter() - t0))
    return best


def coplay_rate(name: str, **kwargs) -> float:
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
    rate = _best_rate(call, ENVS * length)
    env.close()
    return rate


def mpe2_loop_rate() -> float:
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

    return _best_rate(call, ENVS)


def steps_table() -> dict:
    rows = {
        "coplay spread (JAX)": coplay_rate("spread"),
        "from_pettingzoo, copies in-process": coplay_rate(HOST),
        "from_pettingzoo, 2 worker processes": coplay_rate(HOST, workers=2),
        "from_pettingzoo, 2 Ray actors": coplay_rate(HOST, workers=2, worker_backend="ray"),
        "mpe2, plain Python loop": mpe2_loop_rate(),
    }
    for k, v in rows.items():
        print(f"{k}: {v:,.0f} env-steps/s", flush=True)
    return rows


def train_table(total_steps: int, seeds: int, out_dir: Path) -> dict:
    rows = {}
    for label, env in (("coplay spread (JAX)", ["env=spread"]),
                       ("mpe2 simple_spread via from_pettingzoo (2 workers)", [f"env={HOST}", "env.workers=2"])):
        overrides = ["algo=mappo", *env, f"seeds={seeds}", f"total_steps={total_steps}", "chunk_steps=50000",
                     "eval_every=0", "eval_episodes=64"]
        t0 = time.perf_counter()
        result = coplay.train(overrides + ["progress=false", "tensorboard=false", f"out_dir={out_dir}"])
        wall = time.perf_counter() - t0
        steps = result.summary["env_steps_per_seed"] * seeds
        per_seed = np.array(result.final_return["per_seed"])
        rows[label] = {
            "env_steps": steps, "wall_s": wall, "env_steps_per_s": steps / wall,
            "return": summarize(per_seed).as_dict(), "per_seed": per_seed.tolist(),
            "random_return": uniform_policy_return(overrides + ["progress=false", "tensorboard=false"], episodes=256),
        }
        print(label, rows[label], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("steps", "train"))
    ap.add_argument("--total-steps", type=int, default=300_000)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", default="/tmp/coplay-host-bench")
    args = ap.parse_args()
    out_json = ROOT / "benchmarks" / "results" / "host_envs.json"
    results = json.loads(out_json.read_text()) if out_json.exists() else {}
    machine = (f"Machine: {cores()} cores, {cpu_model()}; JAX {jax.__version__}, Python {platform.python_version()}.")
    if args.only in (None, "steps"):
        rows = steps_table()
        results["steps"] = rows
        base = rows["mpe2, plain Python loop"]
        lines = [
            "## Native JAX vs host-stepped environments: simple spread",
            "",
            f"{machine} Command: `python benchmarks/host_envs.py --only steps`. {ENVS} environments, random "
            "actions, auto-reset; env-steps/s (one step of one environment, all 3 agents), best of 3 timings "
            "of >= 2 s each, compile time apart.",
            "",
            "| path | env-steps/s | vs mpe2's own Python loop |",
            "|---|---|---|",
        ]
        lines += [f"| {k} | {v:,.0f} | {v / base:.2f}x |" for k, v in rows.items()]
        write_section("host_steps", "\n".join(lines))
    if args.only in (None, "train"):
        rows = train_table(args.total_steps, args.seeds, Path(args.out))
        results["train"] = rows
        per_seed_steps = next(iter(rows.values()))["env_steps"] // args.seeds
        lines = [
            f"{machine} Command: `python benchmarks/host_envs.py --only train` ({per_seed_steps:,} env steps "
            f"per seed: {args.total_steps:,} asked, rounded up to whole chunks; {args.seeds} seeds in one "
            "compiled run). MAPPO with coplay's defaults on both paths; wall time includes compilation and "
            "evaluation. Return: per-agent episode return of the final policy, 64 evaluation episodes per "
            "seed, IQM over seeds [95% bootstrap CI]; random policy: 256 episodes.",
            "",
            "| environment | env-steps/s (training) | wall s | final return | per seed | random policy |",
            "|---|---|---|---|---|---|",
        ]
        for k, r in rows.items():
            ret = r["return"]
            lines.append(f"| {k} | {r['env_steps_per_s']:,.0f} | {r['wall_s']:.0f} | {ret['iqm']:.2f} "
                         f"[{ret['ci_low']:.2f}, {ret['ci_high']:.2f}] | "
                         f"{', '.join(f'{v:.2f}' for v in r['per_seed'])} | {r['random_return']:.2f} |")
        write_section("host_train", "\n".join(lines))
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
