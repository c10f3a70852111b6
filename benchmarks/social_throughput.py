"""Environment throughput of coplay's social dilemmas beside SocialJax's environments of the same name, in one
run, timed in alternation, and beside Melting Pot's published per-environment rate.

    python benchmarks/social_throughput.py --socialjax PATH          # PATH: a SocialJax checkout (holds `socialjax`)
    python benchmarks/social_throughput.py --socialjax PATH --quick  # short timings, nothing written

One env-step is one step of one environment of all its agents (7 in Clean Up and Commons Harvest, 2 in Coins), with
uniformly random actions drawn inside the compiled loop and auto-reset: coplay's `AutoReset(env)` and SocialJax's
`env.step` (which resets a finished episode itself). Both run as `jit(lax.scan(vmap(step)))` in this process, on the
same JAX (the harness of `env_throughput.py`); episodes last 1,000 steps on both sides; compile time is reported
apart. At each width both are prepared, then timed in rounds, one timing of >= `--seconds` each in turn; a rate is
the median over rounds and coplay / SocialJax the median of the per-round ratios. SocialJax is not on PyPI: pass a
checkout (`fetch` cooperativex/SocialJax); nothing of it is committed here.

Melting Pot's figures are its users' measurement of one environment in Python (google-deepmind/meltingpot issue #7,
an Intel MacBook Pro): clean_up 93.1 frames/s, commons_harvest__open 59.4. They are not from this run or machine;
the page divides coplay's batched rate per 2-core machine by them, and says so. Writes
benchmarks/results/social_throughput.json, then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    alternate,
    fmt_ratio,
    git_head,
    paired,
    regenerate_page,
    stamp,
    table,
    version,
    write_results,
)
from env_throughput import _rate, jax_case  # noqa: E402

RESULTS = "social_throughput.json"
COMMAND = "python benchmarks/social_throughput.py --socialjax PATH"
# coplay's name: (SocialJax's, agents, actions on SocialJax's side)
PAIRS = {"clean_up": ("clean_up", 7, 9), "commons_harvest": ("harvest_common_open", 7, 8),
         "coins": ("coin_game", 2, 7)}
MELTING_POT = {"clean_up": 93.1, "commons_harvest": 59.4}   # frames/s of one environment, meltingpot issue #7


def coplay_case(name: str, width: int, length: int):
    import jax

    import coplay
    from coplay.wrappers import AutoReset

    env = AutoReset(coplay.make(name))
    n, actions = env.spec.num_agents, env.spec.action_space.n

    def step(state, acts, key):
        state, ts = env.step(state, acts, key)
        return state, ts.obs

    def reset(key):
        state, ts = env.reset(key)
        return state, ts.obs

    return jax_case(step, reset, lambda key: jax.random.randint(key, (width, n), 0, actions), width, length)


def socialjax_case(name: str, width: int, length: int):
    import jax
    import socialjax

    sj_name, n, actions = PAIRS[name]
    env = socialjax.make(sj_name)

    def step(state, acts, key):
        obs, state, reward, done, info = env.step(key, state, [acts[i] for i in range(n)])
        return state, obs

    def reset(key):
        obs, state = env.reset(key)
        return state, obs

    return jax_case(step, reset, lambda key: jax.random.randint(key, (width, n), 0, actions), width, length)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socialjax", type=Path, required=True, help="a SocialJax checkout (the directory holding "
                    "its `socialjax` package)")
    ap.add_argument("--socialjax-commit", default=None, help="the commit PATH holds, where it is not a git checkout")
    ap.add_argument("--envs", default=",".join(PAIRS))
    ap.add_argument("--widths", default="1,128,1024")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="short timings (smoke run); nothing written")
    args = ap.parse_args()
    if not (args.socialjax / "socialjax" / "__init__.py").exists():
        ap.error(f"--socialjax {args.socialjax}: no socialjax/__init__.py there; pass a SocialJax checkout")
    names = [e for e in args.envs.split(",") if e]
    if set(names) - set(PAIRS):
        ap.error(f"--envs: any of {', '.join(PAIRS)}; got {args.envs}")
    sys.path.insert(0, str(args.socialjax))
    rounds, seconds = (2, 0.2) if args.quick else (args.rounds, args.seconds)
    widths = [int(w) for w in args.widths.split(",")]
    results: dict[str, dict] = {}
    for name in names:
        results[name] = {}
        for width in widths:
            length = 100 if width >= 64 else 1000
            sides, compile_s = {}, {}
            for side, case in (("coplay", coplay_case), ("socialjax", socialjax_case)):
                once, per_call, compile_s[side] = case(name, width, length)
                sides[side] = lambda once=once, per_call=per_call: _rate(once, per_call, seconds)
            rates = alternate(sides, rounds)
            entry = {side: {"steps_per_s": float(np.median(r)), "rates": r, "compile_s": compile_s[side]}
                     for side, r in rates.items()}
            entry["coplay_over_socialjax"] = paired(rates["coplay"], rates["socialjax"])
            results[name][str(width)] = entry
            print(f"{name:>16} width {width:>5}: coplay {entry['coplay']['steps_per_s']:,.0f}, SocialJax "
                  f"{entry['socialjax']['steps_per_s']:,.0f} env-steps/s, {fmt_ratio(entry['coplay_over_socialjax'])}",
                  flush=True)
    if args.quick:
        return
    sj_commit = args.socialjax_commit or git_head(args.socialjax, "a checkout without git history")
    write_results("social_throughput", {**stamp(), "jax": version("jax"), "socialjax": sj_commit, "rounds": rounds,
                                        "seconds_per_timing": seconds, "widths": widths, "results": results})
    regenerate_page()


# ----- the page ----------------------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e5 else f"{x / 1e3:.1f}k"


def section(data: dict) -> str:
    lines = ["## Social dilemmas: environment throughput beside SocialJax, and Melting Pot's published rate", "",
             f"`{COMMAND}` on {data['machine']}; SocialJax at {data['socialjax']}, on the same JAX "
             f"{data.get('jax') or '?'}. Env-steps/s: one step of one environment with all its agents, random "
             f"actions, auto-reset, episodes of 1,000 steps, compile time apart. Both sides timed in turn, "
             f"{data['rounds']} rounds of one timing of >= {data['seconds_per_timing']:g} s each; a rate is the "
             "median over rounds, coplay / SocialJax the median of the per-round ratios (range and rounds in "
             "brackets).", ""]
    rows = []
    for name, by_width in data["results"].items():
        for w in data["widths"]:
            e = by_width.get(str(w))
            if e:
                rows.append([f"`{name}`", w, _fmt(e["coplay"]["steps_per_s"]), _fmt(e["socialjax"]["steps_per_s"]),
                             fmt_ratio(e["coplay_over_socialjax"])])
    lines += table(["environment", "parallel envs", "coplay", "SocialJax", "coplay / SocialJax"], rows)
    mp = []
    for name, fps in MELTING_POT.items():
        widest = max((int(w) for w in data["results"].get(name, {})), default=None)
        if widest is not None:
            rate = data["results"][name][str(widest)]["coplay"]["steps_per_s"]
            mp.append(f"`{name}` {_fmt(rate)} env-steps/s at {widest:,} environments is {rate / fps:,.0f}x Melting "
                      f"Pot's {fps} frames/s of one environment")
    if mp:
        lines += ["", "Beside Melting Pot (its users' measurement of one environment in Python on an Intel MacBook "
                  "Pro, meltingpot issue #7; not this run, not this machine): " + "; ".join(mp) + "."]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    out = []
    for name, by_width in data["results"].items():
        widest = max(int(w) for w in by_width)
        out.append({"claim": f"`{name}` stepping, coplay beside SocialJax",
                    "workload": f"random actions, {widest:,} parallel envs",
                    "ratio": fmt_ratio(by_width[str(widest)]["coplay_over_socialjax"]), "machine": data["machine"]})
    return out


if __name__ == "__main__":
    main()
