"""MOMAland's beach domain, natively in coplay (`env=beach`) beside MOMAland's own
(`pettingzoo:momaland.envs.beach.mobeach_v0`, through the bridge), the same task
with MOMAland's defaults (100 agents, 6 sections of capacity 7, one step per
episode, individual rewards), in the same run.

    python benchmarks/beach_native.py
    python benchmarks/beach_native.py --seeds 2 --steps 512 --repeats 1

1. Stepping: random actions, environment steps per second. MOMAland's beach in
   its own Python loop (one environment); coplay's compiled, 1,024 environments
   vmapped under auto-reset inside `lax.scan` (compilation excluded, stated).
   Both are set up first, then timed in turn, `--rounds` rounds of one timing
   each; the ratio is the median of the per-round ratios.
2. Training: `coplay train algo=mo_ppo algo.weights=8 ...` on each for the same
   environment steps per weight and seeds, the two runs in turn (`--repeats`
   times); wall time (compilation and host stepping included), and the final
   hypervolume and expected utility against the reference point (0, 0), IQM over
   seeds.

Needs MOMAland (`pip install momaland`) for MOMAland's rows; without it they are
skipped, saying so. Results go to benchmarks/results/beach_native.json, then
BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
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

RESULTS = "beach_native.json"
MOMALAND = "pettingzoo:momaland.envs.beach.mobeach_v0"
SETTINGS = ["algo=mo_ppo", "algo.weights=8", "algo.num_envs=8", "algo.rollout_len=16", "algo.greedy_eval=true",
            "eval_episodes=4", "progress=false", "logger=csv", "reference_point=0:0"]
NATIVE_ENVS = 1024
COMMAND = "python benchmarks/beach_native.py --seeds 2 --steps 512"


def momaland_stepper(steps: int):
    """One timing of MOMAland's loop (`steps` steps) -> steps/s; None without MOMAland."""
    try:
        from momaland.envs.beach import mobeach_v0
    except ImportError as e:
        print(f"MOMAland is not importable ({e}); its rows are skipped", file=sys.stderr)
        return None
    env = mobeach_v0.parallel_env()
    rng = np.random.default_rng(0)
    env.reset(seed=0)

    def timing() -> float:
        t = time.perf_counter()
        for i in range(steps):
            if not env.agents:
                env.reset(seed=i)
            env.step({a: int(rng.integers(3)) for a in env.agents})
        return steps / (time.perf_counter() - t)

    timing()
    return timing


def native_stepper(steps_per_env: int):
    """(one timing -> steps/s, compilation seconds) of the compiled loop."""
    import jax

    import coplay
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
    keys = iter(range(1, 1_000_000))

    def timing() -> float:
        t = time.perf_counter()
        jax.block_until_ready(compiled(jax.random.PRNGKey(next(keys))))
        return steps_per_env * NATIVE_ENVS / (time.perf_counter() - t)

    return timing, compile_s


def train(env: str, seeds: int, steps: int, out: Path) -> dict:
    import coplay

    t = time.perf_counter()
    run = coplay.train(SETTINGS + [f"env={env}", f"seeds={seeds}", f"total_steps={steps}", f"chunk_steps={steps}",
                                   f"out_dir={out}"])
    final = run.summary["final"]
    return {"wall_s": time.perf_counter() - t, "env_steps_per_seed": run.summary["env_steps_per_seed"],
            "hypervolume": final["hypervolume"], "expected_utility": final["expected_utility"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=512, help="environment steps per weight")
    ap.add_argument("--momaland-steps", type=int, default=500, help="steps of MOMAland's loop per timing")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the two stepping timings, in turn")
    ap.add_argument("--repeats", type=int, default=1, help="rounds of the two training runs, in turn")
    a = ap.parse_args()
    r: dict = {**stamp(), "seeds": a.seeds, "steps": a.steps, "rounds": a.rounds, "repeats": a.repeats}
    native, r["native_compile_s"] = native_stepper(200)
    moma = momaland_stepper(a.momaland_steps)
    sides = {"native": native, **({"momaland": moma} if moma else {})}
    rates = alternate(sides, a.rounds)
    r["native_steps_per_s"] = float(np.median(rates["native"]))
    if moma:
        r["momaland_steps_per_s"] = float(np.median(rates["momaland"]))
        r["stepping_ratio"] = paired(rates["native"], rates["momaland"])
    with tempfile.TemporaryDirectory() as tmp:
        runs: dict[str, list[dict]] = {"native": [], "momaland": []}
        for i in range(a.repeats):
            runs["native"].append(train("beach", a.seeds, a.steps, Path(tmp) / f"native{i}"))
            if moma:
                runs["momaland"].append(train(MOMALAND, a.seeds, a.steps, Path(tmp) / f"momaland{i}"))
                same_budget("coplay env=beach", runs["native"][-1]["env_steps_per_seed"], "MOMAland's beach",
                            runs["momaland"][-1]["env_steps_per_seed"])
    r["native_train"] = runs["native"][0]
    if moma:
        r["momaland_train"] = runs["momaland"][0]
        r["training_ratio"] = paired([x["wall_s"] for x in runs["momaland"]], [x["wall_s"] for x in runs["native"]])
    write_results("beach_native", r)
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------

TITLE = "MOMAland's beach, natively in coplay beside MOMAland's own"


def _iqm(x: dict) -> str:
    return f"{x['iqm']:.4g} [{x['ci_low']:.4g}, {x['ci_high']:.4g}]"


def section(r: dict) -> str:
    alternated = "stepping_ratio" in r
    out = [f"## {TITLE}", "",
           f"Machine: {r['machine']}. Command: `python benchmarks/beach_native.py --seeds {r['seeds']} --steps "
           f"{r['steps']}`. The same task both ways: MOMAland's defaults (100 agents, 6 sections of capacity 7, one "
           "step per episode, individual rewards); `env=beach` replays episodes recorded from MOMAland's "
           "`mobeach_v0` exactly (`tests/test_beach.py`)."
           + (f" Stepping: the two timed in turn, {r['rounds']} rounds; the ratio is the median of the per-round "
              "ratios (range in brackets)." if alternated else
              " Stepping: each timed once, one after the other, not in alternation, so no ratio is given."), ""]
    native, moma = r["native_steps_per_s"], r.get("momaland_steps_per_s")
    rows = [[f"coplay `env=beach`, {NATIVE_ENVS:,} environments vmapped, compiled (compilation "
             f"{r['native_compile_s']:.1f} s, excluded)", f"{native:,.0f}",
             f"**{fmt_ratio(r['stepping_ratio'])}**" if alternated else "–"]]
    if moma:
        rows.append(["MOMAland `mobeach_v0`, its Python loop", f"{moma:,.0f}", "1 (the reference)" if alternated
                     else "–"])
    out += table(["", "environment steps per second", "ratio"], rows, "|---|---:|---:|")
    out += ["", f"Training, `coplay train {' '.join(SETTINGS)} seeds={r['seeds']} total_steps={r['steps']}` (8 "
            "weights x the seeds in one run; wall time with compilation and, for MOMAland's, host stepping); "
            "hypervolume and expected utility: IQM over seeds [95% bootstrap CI].", ""]
    nt = r["native_train"]
    rows = [["coplay `env=beach`", f"{nt['wall_s']:.1f}", _iqm(nt["hypervolume"]), _iqm(nt["expected_utility"])]]
    if "momaland_train" in r:
        mt = r["momaland_train"]
        rows.append([f"`{MOMALAND}` (bridge)", f"{mt['wall_s']:.1f}", _iqm(mt["hypervolume"]),
                     _iqm(mt["expected_utility"])])
    out += table(["environment", "wall s", "hypervolume", "expected utility"], rows, "|---|---:|---|---|")
    if "training_ratio" in r:
        out += ["", f"Training wall-clock ratio, the runs in turn: **{fmt_ratio(r['training_ratio'], 'repeats')}**."]
    elif "momaland_train" in r:
        out += ["", "The two training runs ran one after the other, once, in one invocation; no ratio is given."]
    if not alternated and moma:
        out += ["", needs_rerun("stepping timed in alternation", COMMAND)]
    return "\n".join(out)


def claims(r: dict) -> list[dict]:
    if "momaland_steps_per_s" not in r:
        return []
    return [{"claim": "MOMAland's beach stepped natively beside MOMAland's own Python loop",
             "workload": f"100 agents, random actions, {NATIVE_ENVS:,} envs vmapped against one",
             "ratio": fmt_ratio(r["stepping_ratio"]) if "stepping_ratio" in r else
             "not timed in alternation: needs a rerun", "machine": r["machine"]}]


if __name__ == "__main__":
    main()
