"""The memory and the speed of the default SmolLM2 run, before and after a change, in one run.

    git worktree add /tmp/before <commit>          # the code to compare with; never committed
    python benchmarks/lm_memory.py --before /tmp/before [--after <checkout>] [--rounds 2] [--updates 4]

Runs, alternating the two sides each round (so that the machine's load falls on both),

    coplay train algo=lm_grpo env=text:kuhn_poker algo.model=smollm2 algo.decoding=choose_legal seeds=1
                 total_steps=<updates updates> chunk_steps=<one update> eval_every=0 eval_episodes=4

with `PYTHONPATH=<side>/src`, and records each run's peak resident memory (the process and its
children, sampled every 0.2 s; a run past `--cap-gb` is stopped and counted as such) and its
seconds per update: the wall time of the chunks after the first (which compiles and warms up)
and before the last (which also evaluates), from the run's metrics.csv. Writes the
`lm_memory` section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, cores, git_head, median, regenerate_page, stamp, table, write_results

RESULTS = "lm_memory.json"
COMMAND = ["algo=lm_grpo", "env=text:kuhn_poker", "algo.model=smollm2", "algo.decoding=choose_legal", "seeds=1"]
PER_UPDATE = 48       # environment steps (turns) per seed in one update of these settings


def _tree_rss(pid: int) -> int:
    out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,rss="], capture_output=True, text=True).stdout
    rows = [tuple(map(int, line.split())) for line in out.splitlines() if line.strip()]
    children: dict[int, list[int]] = {}
    rss = {}
    for p, parent, r in rows:
        children.setdefault(parent, []).append(p)
        rss[p] = r * 1024
    total, stack, seen = 0, [pid], set()
    while stack:
        p = stack.pop()
        if p not in seen:
            seen.add(p)
            total += rss.get(p, 0)
            stack += children.get(p, [])
    return total


def run_side(src: Path, updates: int, cap: float, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    args = [sys.executable, "-m", "coplay.cli.main", "train", *COMMAND, f"total_steps={updates * PER_UPDATE}",
            f"chunk_steps={PER_UPDATE}", "eval_every=0", "eval_episodes=4", "progress=false", "logger=csv",
            f"out_dir={out}", "name=run"]
    start = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, capped = 0, False
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        if peak > cap:
            proc.kill()
            capped = True
            break
        time.sleep(0.2)
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    result: dict = {"peak_rss_gb": peak / 2**30, "wall_s": wall, "capped": capped, "returncode": proc.returncode}
    metrics = out / "run" / "metrics.csv"
    if not capped and proc.returncode == 0 and metrics.exists():
        times = [float(r["wall_time"]) for r in csv.DictReader(metrics.open())]
        steps = [b - a for a, b in zip(times, times[1:])][:-1]      # chunks 2 .. n-1: one update each
        result["update_s"] = steps
    elif not capped:
        result["error"] = err.strip().splitlines()[-1:] if err else []
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the code to compare with")
    ap.add_argument("--after", type=Path, default=ROOT, help="the checkout measured as after (default: this one)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--updates", type=int, default=4, help="updates per run (at least 3: the first and the "
                                                            "last are not timed)")
    ap.add_argument("--cap-gb", type=float, default=16.0, help="stop a run whose memory passes this")
    args = ap.parse_args()
    if args.updates < 3:
        ap.error("--updates must be at least 3")
    sides = {"before": args.before / "src", "after": args.after / "src"}
    for name, src in sides.items():
        if not (src / "coplay").is_dir():
            ap.error(f"{name}: {src} holds no coplay package")
    commits = {name: git_head(src.parent, "") for name, src in sides.items()}
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    load = []
    for r in range(args.rounds):
        for name in (sides if r % 2 == 0 else reversed(list(sides))):
            with tempfile.TemporaryDirectory() as out:
                runs[name].append(run_side(sides[name], args.updates, args.cap_gb * 2**30, Path(out)))
            load.append(os.getloadavg()[0])
            print(name, runs[name][-1], flush=True)
    summary = {}
    for name, rs in runs.items():
        steps = [s for r in rs for s in r.get("update_s", [])]
        summary[name] = {"peak_rss_gb": max(r["peak_rss_gb"] for r in rs), "capped": sum(r["capped"] for r in rs),
                         "update_s": median(steps) if steps else None}
    b, a = summary["before"]["update_s"], summary["after"]["update_s"]
    data = {**stamp(), "cores": cores(), "commits": commits, "rounds": args.rounds, "updates": args.updates,
            "cap_gb": args.cap_gb, "command": "coplay train " + " ".join(COMMAND), "runs": runs,
            "summary": summary, "speedup": (b / a) if a and b else None, "load_average": load}
    write_results(RESULTS.removesuffix(".json"), data)
    regenerate_page()


def section(d: dict) -> str:
    s = d["summary"]

    def row(name: str) -> list:
        x = s[name]
        t = "-" if x["update_s"] is None else f"{x['update_s']:.1f}"
        capped = f" (stopped at the {d['cap_gb']:.0f} GB cap in {x['capped']} of {d['rounds']} runs)" \
            if x["capped"] else ""
        return [f"{name} ({d['commits'][name]})", f"{x['peak_rss_gb']:.2f}{capped}", t]

    speed = "" if d.get("speedup") is None else f" The update is {d['speedup']:.2f}x as fast after as before."
    return "\n".join([
        "## The default SmolLM2 run: peak memory and seconds per update, before and after", "",
        f"`python benchmarks/lm_memory.py --before <checkout> --rounds {d['rounds']} --updates {d['updates']}` on "
        f"{d['machine']} (load average {min(d['load_average']):.1f} to {max(d['load_average']):.1f}, other work "
        f"sharing the machine): `{d['command']}` with `PYTHONPATH` at each side's `src`, the sides "
        "alternating each round. Peak resident memory of the run (GB, the largest over its runs) and the median "
        "seconds of one update (its episodes played and learned from; the first update, which warms up, and the "
        f"last, which also evaluates, are not counted). Targets: at most 2 GB, and at least 3x as fast.{speed}", "",
        *table(["code", "peak memory (GB)", "s per update"], [row("before"), row("after")])])


def claims(data: dict) -> list[dict]:
    if data.get("speedup") is None:
        return []
    return [{"claim": "lm_grpo update on SmolLM2, after the memory work beside before it",
             "workload": "text:kuhn_poker, decoding=choose_legal, 16 episodes per update, one seed",
             "ratio": f"{data['speedup']:.2f}x", "machine": data["machine"]}]


if __name__ == "__main__":
    main()
