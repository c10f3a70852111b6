"""Environment throughput of coplay's `spread` beside its peers, in one run.

    python benchmarks/env_throughput.py                    # all peers, widths 1, 64, 1024, 4096
    python benchmarks/env_throughput.py --quick            # short timings, for a smoke run
    python benchmarks/env_throughput.py --peers coplay,jaxmarl

One env-step is one step of one 3-agent simple-spread environment; actions are
uniformly random and finished episodes (25 steps) are reset. JAX environments
(coplay, JaxMARL) run as `jit(lax.scan(vmap(step)))` with the random actions
drawn inside the compiled loop; compile time (the first call) is reported
apart. VMAS runs batched in torch on the CPU; PettingZoo's mpe2 steps one
environment in a Python loop. Peers are imported only if installed
(`pip install -e ".[bench]"`); a missing one is skipped with a note.
Writes benchmarks/results/env_throughput.json and a section of BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from _common import ROOT, cores, cpu_model, write_section

N_AGENTS = 3


def _best_rate(run, steps_per_call: int, min_seconds: float, reps: int) -> float:
    """Best of `reps` timings; each repeats `run` until it lasts `min_seconds`."""
    rates = []
    for _ in range(reps):
        calls, t0 = 0, time.perf_counter()
        while True:
            run()
            calls += 1
            dt = time.perf_counter() - t0
            if dt >= min_seconds:
                break
        rates.append(calls * steps_per_call / dt)
    return max(rates)


def bench_jax(step_fn, reset_fn, sample_fn, width: int, length: int, min_s: float, reps: int) -> dict:
    import jax

    def run(carry, key):
        def body(c, k):
            state, _ = c
            k_act, k_step = jax.random.split(k)
            return jax.vmap(step_fn)(state, sample_fn(k_act), jax.random.split(k_step, width)), None

        carry, _ = jax.lax.scan(body, carry, jax.random.split(key, length))
        return carry

    run = jax.jit(run)
    carry = jax.vmap(reset_fn)(jax.random.split(jax.random.PRNGKey(0), width))
    key = jax.random.PRNGKey(1)
    t0 = time.perf_counter()
    carry = jax.block_until_ready(run(carry, key))
    compile_s = time.perf_counter() - t0
    holder = {"c": carry, "k": key}

    def once():
        holder["k"], k = jax.random.split(holder["k"])
        holder["c"] = jax.block_until_ready(run(holder["c"], k))

    return {"steps_per_s": _best_rate(once, width * length, min_s, reps), "compile_s": compile_s}


def coplay_case(width: int, length: int, min_s: float, reps: int) -> dict:
    import jax

    import coplay
    from coplay.wrappers import AutoReset

    env = AutoReset(coplay.make("spread", n_agents=N_AGENTS))

    def step(state, actions, key):
        state, ts = env.step(state, actions, key)
        return state, ts.obs

    def reset(key):
        state, ts = env.reset(key)
        return state, ts.obs

    def sample(key):
        return jax.random.randint(key, (width, N_AGENTS), 0, 5)

    return bench_jax(step, reset, sample, width, length, min_s, reps)


def jaxmarl_case(width: int, length: int, min_s: float, reps: int) -> dict:
    import jax
    import jaxmarl

    env = jaxmarl.make("MPE_simple_spread_v3")
    agents = list(env.agents)

    def step(state, actions, key):
        acts = {a: actions[i] for i, a in enumerate(agents)}
        obs, state, reward, done, info = env.step(key, state, acts)
        return state, obs[agents[0]]

    def reset(key):
        obs, state = env.reset(key)
        return state, obs[agents[0]]

    def sample(key):
        return jax.random.randint(key, (width, len(agents)), 0, 5)

    return bench_jax(step, reset, sample, width, length, min_s, reps)


def vmas_case(width: int, length: int, min_s: float, reps: int) -> dict:
    import torch
    import vmas

    env = vmas.make_env("simple_spread", num_envs=width, device="cpu", continuous_actions=False,
                        n_agents=N_AGENTS, max_steps=25, seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)

    def run_steps():
        for _ in range(length):
            actions = [torch.randint(0, 5, (width, 1), generator=gen) for _ in range(N_AGENTS)]
            _, _, dones, _ = env.step(actions)
            if bool(dones.all()):      # episodes start together, so they end together
                env.reset()
            elif bool(dones.any()):
                for i in torch.nonzero(dones).flatten().tolist():
                    env.reset_at(i)

    t0 = time.perf_counter()
    run_steps()
    warm = time.perf_counter() - t0
    return {"steps_per_s": _best_rate(run_steps, width * length, min_s, reps), "compile_s": 0.0,
            "warmup_s": warm, "torch_threads": torch.get_num_threads()}


def pettingzoo_case(width: int, length: int, min_s: float, reps: int) -> dict:
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=N_AGENTS, max_cycles=25, continuous_actions=False)
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def run_steps():
        for _ in range(length):
            if not env.agents:
                env.reset(seed=int(rng.integers(1 << 30)))
            actions = {a: int(rng.integers(5)) for a in env.agents}
            env.step(actions)

    return {"steps_per_s": _best_rate(run_steps, length, min_s, reps), "compile_s": 0.0}


CASES = {"coplay": coplay_case, "jaxmarl": jaxmarl_case, "vmas": vmas_case, "pettingzoo": pettingzoo_case}


def machine() -> dict:
    import platform

    info = {"cores": cores(), "python": platform.python_version(), "cpu": cpu_model()}
    for mod in ("jax", "torch", "jaxmarl", "vmas", "pettingzoo", "mpe2"):
        try:
            from importlib.metadata import version

            info[mod] = version(mod)
        except Exception:  # noqa: BLE001 - not installed
            pass
    return info


def fmt(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x / 1e6:.2f}M" if x >= 1e5 else f"{x / 1e3:.1f}k"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="1,64,1024,4096")
    ap.add_argument("--peers", default="coplay,jaxmarl,vmas,pettingzoo")
    ap.add_argument("--quick", action="store_true", help="short timings (smoke run, not for the table)")
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    min_s, reps = (0.3, 1) if args.quick else (2.0, 3)
    results: dict[str, dict] = {}
    for peer in args.peers.split(","):
        results[peer] = {}
        for width in widths if peer != "pettingzoo" else [1]:
            length = 100 if width >= 64 else 1000
            try:
                r = CASES[peer](width, length, min_s, reps)
            except ImportError as e:
                print(f"{peer}: not installed ({e}); skipped. pip install -e '.[bench]'")
                break
            results[peer][str(width)] = r
            print(f"{peer:>10} width {width:>5}: {fmt(r['steps_per_s']):>8} env-steps/s "
                  f"(compile {r['compile_s']:.2f}s)", flush=True)
    info = machine()
    out = ROOT / "benchmarks" / "results" / "env_throughput.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": info, "quick": args.quick, "results": results}, indent=2))
    if args.quick:
        return

    def get(peer, w):
        return results.get(peer, {}).get(str(w), {}).get("steps_per_s")

    lines = [
        "## Environment throughput: 3-agent simple spread, random actions, auto-reset",
        "",
        f"Machine: {info.get('cores')} cores, {info.get('cpu', '?')}; JAX {info.get('jax', '?')}, "
        f"torch {info.get('torch', '–')}, JaxMARL {info.get('jaxmarl', '–')}, VMAS {info.get('vmas', '–')}, "
        f"mpe2 {info.get('mpe2', '–')}. Command: `python benchmarks/env_throughput.py`. "
        "Env-steps/s (one step of one environment with all 3 agents), best of 3 timings of >= 2 s each; "
        "compile time apart.",
        "",
        "| parallel envs | coplay | JaxMARL | coplay / JaxMARL | VMAS | coplay / VMAS | PettingZoo mpe2 | "
        "coplay / PettingZoo |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for w in widths:
        c, j, v = get("coplay", w), get("jaxmarl", w), get("vmas", w)
        p = get("pettingzoo", w) if w == 1 else None
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "–"  # noqa: E731
        lines.append(f"| {w} | {fmt(c)} | {fmt(j)} | {ratio(c, j)} | {fmt(v)} | {ratio(c, v)} | {fmt(p)} | "
                     f"{ratio(c, p)} |")
    comp = ", ".join(f"{peer} {results[peer][str(w)]['compile_s']:.1f}s@{w}" for peer in ("coplay", "jaxmarl")
                     for w in widths if str(w) in results.get(peer, {}))
    lines += ["", f"Compile times (first call): {comp}."]
    write_section("env_throughput", "\n".join(lines))


if __name__ == "__main__":
    main()
