"""Environment throughput of coplay's `spread` beside its peers, in one run, timed in alternation.

    python benchmarks/env_throughput.py                    # all peers, widths 1, 64, 1024, 4096
    python benchmarks/env_throughput.py --quick            # short timings, for a smoke run (nothing written)
    python benchmarks/env_throughput.py --peers coplay,jaxmarl

One env-step is one step of one 3-agent simple-spread environment; actions are
uniformly random and finished episodes (25 steps) are reset. JAX environments
(coplay, JaxMARL) run as `jit(lax.scan(vmap(step)))` with the random actions
drawn inside the compiled loop; compile time (the first call) is reported
apart. VMAS runs batched in torch on the CPU; PettingZoo's mpe2 steps one
environment in a Python loop. Peers are imported only if installed
(`pip install -e ".[bench]"`); a missing one is skipped with a note.

At each width every peer is prepared (compiled, warmed up) first, then timed in
rounds: one timing of >= `--seconds` of each peer per round, in turn, for
`--rounds` rounds, so that a change in the machine's load reaches every peer
alike. A peer's rate is its median over rounds; coplay / peer is the median of
the per-round ratios, with their range. Writes
benchmarks/results/env_throughput.json, then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    alternate,
    fmt_ratio,
    jaxmarl_imports,
    needs_rerun,
    paired,
    regenerate_page,
    stamp,
    table,
    version,
    write_results,
)

RESULTS = "env_throughput.json"
N_AGENTS = 3
PEERS = ("coplay", "jaxmarl", "vmas", "pettingzoo")
LABELS = {"coplay": "coplay", "jaxmarl": "JaxMARL", "vmas": "VMAS", "pettingzoo": "PettingZoo mpe2"}
COMMAND = "python benchmarks/env_throughput.py"


def _rate(run, steps_per_call: int, min_seconds: float) -> float:
    """Env-steps/s of `run` called until `min_seconds` have passed."""
    calls, t0 = 0, time.perf_counter()
    while True:
        run()
        calls += 1
        dt = time.perf_counter() - t0
        if dt >= min_seconds:
            return calls * steps_per_call / dt


def jax_case(step_fn, reset_fn, sample_fn, width: int, length: int):
    """(one call, steps per call, compile s) of `jit(lax.scan(vmap(step)))`."""
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

    return once, width * length, compile_s


def coplay_case(width: int, length: int):
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

    return jax_case(step, reset, sample, width, length)


def jaxmarl_case(width: int, length: int):
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

    return jax_case(step, reset, sample, width, length)


def vmas_case(width: int, length: int):
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

    run_steps()     # warm-up
    return run_steps, width * length, 0.0


def pettingzoo_case(width: int, length: int):
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

    run_steps()
    return run_steps, length, 0.0


CASES = {"coplay": coplay_case, "jaxmarl": jaxmarl_case, "vmas": vmas_case, "pettingzoo": pettingzoo_case}


def versions() -> dict:
    found = {d: v for d in ("jax", "torch", "jaxmarl", "vmas", "pettingzoo", "mpe2") if (v := version(d))}
    if "jaxmarl" not in found and "jaxmarl" in sys.modules:      # imported from a checkout
        found["jaxmarl"] = getattr(sys.modules["jaxmarl"], "__version__", "from a checkout")
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", default="1,64,1024,4096")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--rounds", type=int, default=5, help="rounds of one timing of each peer, in turn")
    ap.add_argument("--seconds", type=float, default=1.0, help="length of one timing")
    ap.add_argument("--quick", action="store_true", help="short timings (smoke run); nothing written")
    ap.add_argument("--jaxmarl", type=Path, default=None,
                    help="a JaxMARL checkout (the directory holding its `jaxmarl` package), where it is not installed")
    args = ap.parse_args()
    stand_ins = jaxmarl_imports(args.jaxmarl) if "jaxmarl" in args.peers else []
    widths = [int(w) for w in args.widths.split(",")]
    peers = [p for p in args.peers.split(",") if p]
    if "coplay" not in peers or set(peers) - set(PEERS):
        ap.error(f"--peers: coplay and any of {', '.join(PEERS[1:])}")
    rounds, seconds = (2, 0.2) if args.quick else (args.rounds, args.seconds)
    results: dict[str, dict] = {p: {} for p in peers}
    missing: dict[str, str] = {}
    for width in widths:
        length = 100 if width >= 64 else 1000
        sides, compile_s = {}, {}
        for peer in peers:
            if peer in missing or (peer == "pettingzoo" and width != 1):
                continue
            try:
                once, per_call, compile_s[peer] = CASES[peer](width, length)
            except ImportError as e:
                missing[peer] = str(e)
                print(f"{peer}: not installed ({e}); skipped. pip install -e '.[bench]'", flush=True)
                continue
            sides[peer] = lambda once=once, per_call=per_call: _rate(once, per_call, seconds)
        rates = alternate(sides, rounds)
        for peer, r in rates.items():
            entry = {"steps_per_s": float(np.median(r)), "rates": r, "compile_s": compile_s[peer]}
            if peer != "coplay":
                entry["coplay_over_peer"] = paired(rates["coplay"], r)
            results[peer][str(width)] = entry
            print(f"{peer:>10} width {width:>5}: {entry['steps_per_s']:,.0f} env-steps/s"
                  + (f", coplay / {peer} {fmt_ratio(entry['coplay_over_peer'])}" if peer != "coplay" else ""),
                  flush=True)
    if args.quick:
        return
    write_results("env_throughput", {**stamp(), "versions": versions(), "stand_ins": stand_ins, "alternated": True,
                                     "rounds": rounds,
                                     "seconds_per_timing": seconds, "widths": widths, "missing": missing,
                                     "results": results})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def _fmt(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x / 1e6:.2f}M" if x >= 1e5 else f"{x / 1e3:.1f}k"


def _machine(data: dict) -> str:
    m = data["machine"]
    if isinstance(m, dict):     # results files written before the rounds were alternated
        return f"{m.get('cores')} cores, {m.get('cpu', '?')}, JAX {m.get('jax', '?')}, Python {m.get('python', '?')}"
    return m


def section(data: dict) -> str:
    res = data["results"]
    widths = data.get("widths") or sorted({int(w) for p in res.values() for w in p})
    vers = data.get("versions") or (data["machine"] if isinstance(data["machine"], dict) else {})
    listed = ", ".join(f"{LABELS.get(k, k)} {vers[k]}" for k in ("jaxmarl", "vmas", "mpe2", "torch") if k in vers)
    lines = ["## Environment throughput: simple spread beside JaxMARL, VMAS and PettingZoo", "",
             f"`{COMMAND}` on {_machine(data)}; {listed}. Env-steps/s: one step of one 3-agent environment, random "
             "actions, auto-reset; compile time apart."]
    get = lambda p, w: res.get(p, {}).get(str(w))  # noqa: E731
    peers = [p for p in PEERS if p in res and res[p]]
    if data.get("alternated"):
        lines[-1] += (f" Every peer timed in turn, {data['rounds']} rounds of one timing of >= "
                      f"{data['seconds_per_timing']:g} s each; a rate is the median over rounds, coplay / peer the "
                      "median of the per-round ratios (their range and the rounds in brackets).")
        header = ["parallel envs", "coplay"] + [x for p in peers[1:] for x in (LABELS[p], f"coplay / {LABELS[p]}")]
        rows = []
        for w in widths:
            row = [w, _fmt((get("coplay", w) or {}).get("steps_per_s"))]
            for p in peers[1:]:
                e = get(p, w)
                row += [_fmt(e["steps_per_s"]), fmt_ratio(e["coplay_over_peer"])] if e else ["–", "–"]
            rows.append(row)
        lines += ["", *table(header, rows)]
    else:
        lines[-1] += (" Best of 3 timings of >= 2 s each, each library's widths timed one after another, not in "
                      "alternation: the rates below are what each measured, and no ratio between them is given.")
        header = ["parallel envs"] + [LABELS[p] for p in peers]
        rows = [[w] + [_fmt((get(p, w) or {}).get("steps_per_s")) for p in peers] for w in widths]
        lines += ["", *table(header, rows), "",
                  needs_rerun("the libraries were not timed in alternation, so their ratios are not given", COMMAND)]
    comp = ", ".join(f"{LABELS[p]} {get(p, w)['compile_s']:.1f} s at {w}" for p in ("coplay", "jaxmarl")
                     for w in widths if get(p, w) and get(p, w).get("compile_s"))
    if comp:
        lines += ["", f"Compile times (first call): {comp}."]
    if data.get("missing"):
        lines += ["", "Not installed, so not timed: " + ", ".join(LABELS.get(p, p) for p in sorted(data["missing"]))
                  + ".", "", needs_rerun("with " + ", ".join(LABELS.get(p, p) for p in sorted(data["missing"]))
                                         + " installed", COMMAND)]
    if data.get("stand_ins"):
        lines += ["", "Imports stood in for (JaxMARL's, absent here): " + "; ".join(data["stand_ins"]) + "."]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    res, out = data["results"], []
    for peer in ("jaxmarl", "vmas", "pettingzoo"):
        claim = f"simple spread stepping, coplay beside {LABELS[peer]}"
        if peer in data.get("missing", {}):
            out.append({"claim": claim, "workload": "3 agents, random actions", "machine": _machine(data),
                        "ratio": f"not timed ({LABELS[peer]} not installed): needs a rerun"})
            continue
        if not res.get(peer):
            continue
        widths = sorted(int(w) for w in res[peer])
        if data.get("alternated"):
            ratios = [res[peer][str(w)]["coplay_over_peer"] for w in widths]
            lo, hi = min(r["median"] for r in ratios), max(r["median"] for r in ratios)
            ratio = (f"{lo:.2f}x-{hi:.2f}x (medians over {ratios[0]['n']} alternated rounds, by width)"
                     if len(ratios) > 1 else fmt_ratio(ratios[0]))
        else:
            ratio = "not timed in alternation: needs a rerun"
        out.append({"claim": claim, "workload": f"3 agents, random actions, {', '.join(map(str, widths))} "
                    f"parallel env{'s' if widths != [1] else ''}", "ratio": ratio, "machine": _machine(data)})
    return out

if __name__ == "__main__":
    main()
