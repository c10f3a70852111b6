"""MOMAland's beach domain, natively in coplay (`env=beach`) beside MOMAland's own
(`pettingzoo:momaland.envs.beach.mobeach_v0`, through the bridge), the same task
with MOMAland's defaults (100 agents, 6 sections of capacity 7, one step per
episode, individual rewards), in the same run.

    python benchmarks/beach_native.py
    python benchmarks/beach_native.py --seeds 2 --steps 512

1. Stepping: random actions, environment steps per second. MOMAland's beach in
   its own Python loop (one environment); coplay's compiled, 1,024 environments
   vmapped under auto-reset inside `lax.scan` (compilation excluded, stated).
2. Training: `coplay train algo=mo_ppo algo.weights=8 ...` on each for the same
   environment steps per weight and seeds; wall time (compilation and host
   stepping included), and the final hypervolume and expected utility against
   the reference point (0, 0), IQM over seeds.

Needs MOMAland (`pip install momaland`) for MOMAland's rows; without it they are
skipped, saying so. Results go to benchmarks/results/beach_native.json and
BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, cores, cpu_model, write_section  # noqa: E402

import coplay  # noqa: E402

MOMALAND = "pettingzoo:momaland.envs.beach.mobeach_v0"
SETTINGS = ["algo=mo_ppo", "algo.weights=8", "algo.num_envs=8", "algo.rollout_len=16", "algo.greedy_eval=true",
            "eval_episodes=4", "progress=false", "tensorboard=false", "reference_point=0:0"]
NATIVE_ENVS = 1024


def momaland_steps_per_s(steps: int) -> float | None:
    try:
        from momaland.envs.beach import mobeach_v0
    except ImportError as e:
        print(f"MOMAland is not importable ({e}); its rows are skipped", file=sys.stderr)
        return None
    env = mobeach_v0.parallel_env()
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t = time.perf_counter()
    for i in range(steps):
        if not env.agents:
            env.reset(seed=i)
        env.step({a: int(rng.integers(3)) for a in env.agents})
    return steps / (time.perf_counter() - t)


def native_steps_per_s(steps_per_env: int) -> tuple[float, float]:
    """Steps per second of the compiled loop, and its compilation time."""
    import jax

    from coplay.wrappers import AutoReset

    env = AutoReset(coplay.make("beach"))
    n = env.spec.num_agents

    def run(key):
        state, _ = jax.vmap(env.reset)(jax.random.split(key, NATIVE_ENVS))

        def body(state, k):
            ka, ks = jax.random.split(k)
            actions = jax.random.randint(ka, (NATIVE_ENVS, n), 0, 3)
            state, ts = jax.vmap(env.step)(state, actions, jax.random.split(ks, NATIVE_ENVS))
            return state, ts.reward.sum()
        return jax.lax.scan(body, state, jax.random.split(key, steps_per_env))[1].sum()

    compiled = jax.jit(run)
    t = time.perf_counter()
    compiled.lower(jax.random.PRNGKey(0)).compile()
    compile_s = time.perf_counter() - t
    jax.block_until_ready(compiled(jax.random.PRNGKey(0)))
    t = time.perf_counter()
    jax.block_until_ready(compiled(jax.random.PRNGKey(1)))
    return steps_per_env * NATIVE_ENVS / (time.perf_counter() - t), compile_s


def train(env: str, seeds: int, steps: int, out: Path) -> dict:
    t = time.perf_counter()
    run = coplay.train(SETTINGS + [f"env={env}", f"seeds={seeds}", f"total_steps={steps}", f"chunk_steps={steps}",
                                   f"out_dir={out}"])
    final = run.summary["final"]
    return {"wall_s": time.perf_counter() - t, "hypervolume": final["hypervolume"],
            "expected_utility": final["expected_utility"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=512, help="environment steps per weight")
    ap.add_argument("--momaland-steps", type=int, default=2_000, help="steps of MOMAland's loop to time")
    a = ap.parse_args()
    r: dict = {"machine": f"{cpu_model()}, {cores()} cores", "seeds": a.seeds, "steps": a.steps}
    r["native_steps_per_s"], r["native_compile_s"] = native_steps_per_s(200)
    r["momaland_steps_per_s"] = momaland_steps_per_s(a.momaland_steps)
    with tempfile.TemporaryDirectory() as tmp:
        r["native_train"] = train("beach", a.seeds, a.steps, Path(tmp) / "native")
        if r["momaland_steps_per_s"] is not None:
            r["momaland_train"] = train(MOMALAND, a.seeds, a.steps, Path(tmp) / "momaland")
    path = ROOT / "benchmarks" / "results" / "beach_native.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(r, indent=1))
    write_section("beach_native", report(r))


def _iqm(x: dict) -> str:
    return f"{x['iqm']:.4g} [{x['ci_low']:.4g}, {x['ci_high']:.4g}]"


def report(r: dict) -> str:
    out = ["## MOMAland's beach, natively in coplay beside MOMAland's own", "",
           f"Machine: {r['machine']}. Command: `python benchmarks/beach_native.py --seeds {r['seeds']} --steps "
           f"{r['steps']}`. The same task both ways: MOMAland's defaults (100 agents, 6 sections of capacity 7, one "
           "step per episode, individual rewards); `env=beach` replays episodes recorded from MOMAland's "
           "`mobeach_v0` exactly (`tests/test_beach.py`).", "",
           "| | environment steps per second | ratio |", "|---|---:|---:|"]
    native, moma = r["native_steps_per_s"], r.get("momaland_steps_per_s")
    out.append(f"| coplay `env=beach`, {NATIVE_ENVS:,} environments vmapped, compiled (compilation "
               f"{r['native_compile_s']:.1f} s, excluded) | {native:,.0f} | "
               + (f"**{native / moma:,.0f}x** |" if moma else "|"))
    if moma:
        out.append(f"| MOMAland `mobeach_v0`, its Python loop | {moma:,.0f} | 1x |")
    out += ["", f"Training, `coplay train {' '.join(SETTINGS)} seeds={r['seeds']} total_steps={r['steps']}` (8 "
            "weights x the seeds in one run; wall time with compilation and, for MOMAland's, host stepping); "
            "hypervolume and expected utility: IQM over seeds [95% bootstrap CI].", "",
            "| environment | wall s | hypervolume | expected utility |", "|---|---:|---|---|"]
    nt = r["native_train"]
    out.append(f"| coplay `env=beach` | {nt['wall_s']:.1f} | {_iqm(nt['hypervolume'])} | "
               f"{_iqm(nt['expected_utility'])} |")
    if "momaland_train" in r:
        mt = r["momaland_train"]
        out.append(f"| `{MOMALAND}` (bridge) | {mt['wall_s']:.1f} | {_iqm(mt['hypervolume'])} | "
                   f"{_iqm(mt['expected_utility'])} |")
        out += ["", f"Training wall-clock ratio: **{mt['wall_s'] / nt['wall_s']:.1f}x**."]
    return "\n".join(out)


if __name__ == "__main__":
    main()
