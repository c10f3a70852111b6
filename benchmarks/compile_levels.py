"""Compile time and run time of a training chunk at XLA's LLVM optimisation levels.

    python benchmarks/compile_levels.py              # every row, 3 repeats
    python benchmarks/compile_levels.py --repeats 1 --only qmix

coplay compiles the programs that run over and over (training chunks, evaluators of
long runs) at `xla_backend_optimization_level` 2 (`coplay.core.compile.RUN_OPTIONS`)
and those that run once at 0 (`RUN_ONCE_OPTIONS`); XLA's own default is 3. Each row
here is the chunk program of a run as `coplay.train` builds it (`compiled.chunk_function`,
the runner's own code), compiled at 3, 2 and 0 in turn (the compilation cache off),
then run once from the run's initial state. Levels are interleaved within a repeat;
each figure is the median over repeats.

Results go to benchmarks/results/compile_levels.json, then BENCHMARKS.md (benchmarks/page.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

from coplay.core import compile as compile_options  # noqa: E402
from coplay.experiment import compiled, runner  # noqa: E402

# The chunks of some of the suite's learning runs (one chunk each: chunk_steps = the chunk asked).
ROWS = {
    "qmix foraging": ["algo=qmix", "env=foraging", "env.grid_size=5", "env.n_food=1", "env.force_coop=true",
                      "env.max_steps=25", "algo.n_step=3", "algo.batch_size=256", "algo.lr=3e-3",
                      "algo.target_interval=50", "total_steps=100000", "chunk_steps=100000", "seeds=2"],
    "mappo spread": ["algo=mappo", "env=spread", "total_steps=200000", "chunk_steps=200000", "seeds=2"],
    "selfplay_ppo connect_four": ["algo=selfplay_ppo", "env=connect_four", "total_steps=100000",
                                  "chunk_steps=100000", "algo.lr=3e-3", "seeds=1"],
    "grpo text:kuhn_poker": ["algo=grpo", "env=text:kuhn_poker", "algo.episodes=32", "algo.group_size=8",
                             "total_steps=36864", "chunk_steps=2304", "seeds=1"],
}
LEVELS = (3, 2, 0)
RESULTS = "compile_levels.json"


def measure(args: list[str], level: int) -> tuple[float, float, int]:
    """(compile s, run s, updates) of the run's chunk compiled at `level`."""
    p = compiled.plan(runner.resolve(args + ["progress=false", "logger=csv"]))
    try:
        state = compiled.place(p, compiled.init_state(p))
        saved = compile_options.RUN_OPTIONS
        compile_options.RUN_OPTIONS = {"xla_backend_optimization_level": level}
        try:
            chunk = compiled.chunk_function(p, state)
        finally:
            compile_options.RUN_OPTIONS = saved
        t = time.perf_counter()
        program = chunk.lower(state).compile()
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        jax.block_until_ready(program(state))
        return compile_s, time.perf_counter() - t, p.updates_per_chunk
    finally:
        p.env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="", help="rows whose name contains this")
    a = ap.parse_args()
    jax.config.update("jax_enable_compilation_cache", False)
    rows = {k: v for k, v in ROWS.items() if a.only in k}
    for name, args in rows.items():   # the runs' chunks lead to once=False (more than FEW_UPDATES updates)
        p = compiled.plan(runner.resolve(args))
        assert p.num_chunks * p.updates_per_chunk > compiled.FEW_UPDATES, name
        p.env.close()
    times: dict[str, dict[int, list[tuple[float, float]]]] = {k: {lv: [] for lv in LEVELS} for k in rows}
    updates = {}
    for r in range(a.repeats):
        for name, args in rows.items():
            for level in LEVELS:
                c, t, updates[name] = measure(args, level)
                times[name][level].append((c, t))
                print(f"repeat {r} {name} level {level}: compile {c:.2f} s, run {t:.2f} s", flush=True)
    result = {name: {str(lv): {"compile_s": float(np.median([c for c, _ in v])),
                               "run_s": float(np.median([t for _, t in v]))} for lv, v in per.items()}
              for name, per in times.items()}
    write_results("compile_levels", {**stamp(), "updates": updates, "repeats": a.repeats, "result": result})
    regenerate_page()


def section(data: dict) -> str:
    where = f"on {data['machine']}" if "machine" in data else "(machine not recorded)"
    lines = ["## Compile levels", "",
             f"`python benchmarks/compile_levels.py --repeats {data['repeats']}` {where}. One training chunk per row, "
             "built by `compiled.chunk_function`, compiled at XLA's LLVM optimisation level 3 (XLA's default), 2 "
             "(coplay's `jit`) and 0 (coplay's `jit_once`), the compilation cache off, then run once; medians over "
             "repeats, levels interleaved.", ""]
    rows = []
    for name, per in data["result"].items():
        c = [per[str(lv)]["compile_s"] for lv in LEVELS]
        t = [per[str(lv)]["run_s"] for lv in LEVELS]
        rows.append([name, data["updates"][name], " / ".join(f"{x:.2f}" for x in c), " / ".join(f"{x:.2f}" for x in t),
                     f"{c[1] / c[0]:.2f}x, {t[1] / t[0]:.2f}x"])
    lines += table(["chunk", "updates", "compile s: 3 / 2 / 0", "run s: 3 / 2 / 0", "level 2 vs 3: compile, run"],
                   rows)
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return []

if __name__ == "__main__":
    main()
