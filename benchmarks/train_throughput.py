"""IPPO training throughput and the return reached on `spread` for a fixed budget,
and the multi-seed scaling table (seeds=1, 4, 16 on the same per-seed budget).

    python benchmarks/train_throughput.py                 # both tables
    python benchmarks/train_throughput.py --only budget   # 1M-step IPPO run(s)
    python benchmarks/train_throughput.py --only seeds    # seeds scaling

Compile time is measured apart from the steady-state training time: the
compiled chunk function is called once on a throw-away state first. Returns are
per-agent episode returns (JaxMARL's logged figure is N times this).
Results go to benchmarks/results/train_throughput.json and BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

from coplay.experiment.config import parse_overrides
from coplay.experiment.runner import chunk_function, evaluation_function, eval_keys, init_state, plan
from coplay.eval.stats import summarize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, cores, cpu_model, write_section  # noqa: E402


# JaxMARL reference figures measured on this 2-core machine (issue #2), for the ratio column.
JAXMARL_IPPO_1M_SECONDS = 20.0
JAXMARL_RETURN_1M_PER_AGENT = -75.0 / 3
JAXMARL_RETURN_10M_PER_AGENT = -61.0 / 3
JAXMARL_10M_SECONDS = 210.0


def timed_run(overrides: list[str]) -> dict:
    """Train like `coplay train` would, but time compile and steady state apart."""
    exp = parse_overrides(overrides + ["progress=false", "tensorboard=false"])
    p = plan(exp)
    t0 = time.perf_counter()
    state = init_state(p)
    jax.block_until_ready(state)
    t_init = time.perf_counter() - t0
    chunk = chunk_function(p)
    t0 = time.perf_counter()
    compiled = chunk.lower(state).compile()
    t_compile = time.perf_counter() - t0
    curve = []
    t0 = time.perf_counter()
    for i in range(p.num_chunks):
        state, metrics = compiled(state)
        ret = np.asarray(jax.device_get(metrics["return"]))    # [seeds, updates]: training episodes
        curve.append(((i + 1) * p.steps_per_chunk, time.perf_counter() - t0, float(np.nanmean(ret))))
    t_train = time.perf_counter() - t0
    # first time the chunk's mean training return (per agent) reaches JaxMARL's 10M-step return
    hit = next(((steps, secs) for steps, secs, r in curve if r >= JAXMARL_RETURN_10M_PER_AGENT), None)
    evaluate = evaluation_function(p)
    results = jax.device_get(evaluate(p.trainer.policy_params(state), eval_keys(exp, p.num_chunks)))
    per_seed = np.asarray(results["return"]).mean(-1)
    steps = p.num_chunks * p.steps_per_chunk
    return {
        "overrides": overrides, "seeds": exp.run.seeds, "env_steps_per_seed": steps,
        "init_s": t_init, "compile_s": t_compile, "train_s": t_train,
        "env_steps_per_s_total": steps * exp.run.seeds / t_train,
        "env_steps_per_s_per_seed": steps / t_train,
        "final_return_iqm": summarize(per_seed).as_dict(), "curve": curve,
        "time_to_jaxmarl_10m_return_s": None if hit is None else hit[1] + t_compile,
        "steps_to_jaxmarl_10m_return": None if hit is None else hit[0],
    }


def machine() -> str:
    return f"{cores()} cores, {cpu_model()}, JAX {jax.__version__}, Python {platform.python_version()}"


BUDGET_CONFIGS = {
    # JaxMARL's IPPO script's sizes: 16 envs x 3 agents = 48 actors, 128 steps, 4 epochs, 4 minibatches, 64 units
    "jaxmarl-sizes": ["algo=ippo", "algo.num_envs=16", "algo.rollout_len=128", "algo.epochs=4",
                      "algo.minibatches=4", "algo.hidden_size=64", "algo.lr=2.5e-3"],
    # coplay's defaults for ippo
    "coplay-default": ["algo=ippo"],
}


def run_budget(args) -> dict:
    out = {}
    for name, cfg in BUDGET_CONFIGS.items():
        r = timed_run(cfg + ["env=spread", f"total_steps={args.budget}", "seeds=1", f"seed={args.seed}",
                             "chunk_steps=50000"])
        out[name] = r
        print(f"{name}: {r['env_steps_per_s_per_seed']:,.0f} env-steps/s, train {r['train_s']:.1f}s "
              f"(+compile {r['compile_s']:.1f}s), return {r['final_return_iqm']['iqm']:.2f}", flush=True)
    return out


def run_seeds(args) -> dict:
    out = {}
    for seeds in (1, 4, 16):
        r = timed_run(BUDGET_CONFIGS["coplay-default"] + ["env=spread", f"total_steps={args.seed_budget}",
                                                           f"seeds={seeds}", "chunk_steps=50000"])
        out[str(seeds)] = r
        print(f"seeds={seeds}: {r['env_steps_per_s_total']:,.0f} env-steps/s total "
              f"(compile {r['compile_s']:.1f}s)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("budget", "seeds"))
    ap.add_argument("--budget", type=int, default=1_000_000)
    ap.add_argument("--seed-budget", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    results_path = ROOT / "benchmarks" / "results" / "train_throughput.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    results["machine"] = machine()
    cmd = "python benchmarks/train_throughput.py" + (f" --only {args.only}" if args.only else "")
    if args.only in (None, "budget"):
        budget = run_budget(args)
        results["budget"] = budget
        lines = [f"Machine: {machine()}. Command: `{cmd}`.", "",
                 f"IPPO on `spread` (3 agents), {args.budget:,} env steps, one seed. Returns are per-agent "
                 "episode returns (JaxMARL logs 3x this). JaxMARL figures are the reference measurements on "
                 "this machine quoted in issue #2 (not re-run here).", "",
                 "| config | env-steps/s | vs JaxMARL IPPO (50k/s) | train s | compile s | final return (per agent) "
                 "| time to -20.3 (JaxMARL's 10M-step return), compile included | vs JaxMARL's 210 s |",
                 "|---|---|---|---|---|---|---|---|"]
        for name, r in budget.items():
            sps = r["env_steps_per_s_per_seed"]
            ttr = r["time_to_jaxmarl_10m_return_s"]
            ttr_txt = "not reached" if ttr is None else f"{ttr:.1f} s ({r['steps_to_jaxmarl_10m_return']:,} steps)"
            ttr_ratio = "–" if ttr is None else f"{JAXMARL_10M_SECONDS / ttr:.1f}x faster"
            lines.append(f"| {name} | {sps:,.0f} | {sps / (1e6 / JAXMARL_IPPO_1M_SECONDS):.2f}x | "
                         f"{r['train_s']:.1f} | {r['compile_s']:.1f} | {r['final_return_iqm']['iqm']:.2f} | "
                         f"{ttr_txt} | {ttr_ratio} |")
        lines += ["", f"JaxMARL IPPO reference: 1M steps in ~{JAXMARL_IPPO_1M_SECONDS:.0f} s reaching "
                  f"{JAXMARL_RETURN_1M_PER_AGENT:.1f} per agent; {JAXMARL_RETURN_10M_PER_AGENT:.1f} after 10M "
                  f"steps ({JAXMARL_10M_SECONDS:.0f} s). Random policy: about -27.7 per agent."]
        write_section("train_budget", "\n".join(lines))
    if args.only in (None, "seeds"):
        seeds = run_seeds(args)
        results["seeds"] = seeds
        base = seeds["1"]["env_steps_per_s_total"]
        lines = [f"Machine: {machine()}. Command: `{cmd}`.", "",
                 f"IPPO on `spread`, {args.seed_budget:,} env steps per seed, seeds vmapped in one compiled run.",
                 "", "| seeds | total env-steps/s | vs 1 seed | compile s |", "|---|---|---|---|"]
        for s, r in seeds.items():
            lines.append(f"| {s} | {r['env_steps_per_s_total']:,.0f} | {r['env_steps_per_s_total'] / base:.2f}x | "
                         f"{r['compile_s']:.1f} |")
        write_section("train_seeds", "\n".join(lines))
    results_path.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
