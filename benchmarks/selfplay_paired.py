"""Self-play training step time of an older coplay checkout beside this one, timed in
alternation, for a before/after that survives a machine whose speed drifts.

    python benchmarks/selfplay_paired.py --before-src /path/to/older/checkout/src
    python benchmarks/selfplay_paired.py --before-src OLD/src --games connect_four --rounds 60

Two worker processes, one per checkout (each imports coplay from its own `src`),
build `selfplay_ppo.SelfPlayPPO` with its default config on the same game and
compile two programs: `--updates` training updates as one `lax.scan` (rollout
against the snapshot pool, then the PPO epochs), and the rollout alone (the
trainer's acting function, as `benchmarks/selfplay.py` times it). Then the driver
asks them in turn for one timed call each: an update call, then two rollout calls,
the pair's order flipping every round. Only one worker runs at a time, and the
two calls of a pair are seconds apart, so each pair's ratio (older time / newer
time) compares the two on one machine speed. The table gives the median paired
ratio and its quartiles; a ratio above 1 means this checkout is faster.

Both workers train from the same seed, so their games stay comparable in length
as training goes on, although their trajectories differ wherever the two
checkouts sample differently. Results go to benchmarks/results/selfplay_paired.json,
then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, git_head, regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "selfplay_paired.json"
GAMES = ("tic_tac_toe", "connect_four")
SELF = ROOT / "src"


def worker(game: str, updates: int, num_updates: int) -> None:
    """Compile both programs, say `ready`, then answer each line `update` or `rollout` with one call's seconds."""
    import jax
    import jax.numpy as jnp

    import coplay
    from coplay.algos import selfplay_ppo
    from coplay.algos.common.rollout import rollout

    env = coplay.make(game)
    config = selfplay_ppo.Config()
    trainer = selfplay_ppo.SelfPlayPPO(config, env, num_updates=num_updates)
    state = trainer.init(jax.random.PRNGKey(0))
    chunk = jax.jit(lambda s: jax.lax.scan(lambda s, _: trainer.update(s), s, None, length=updates),
                    donate_argnums=0)

    def roll(s):  # reaches into the trainer (`_act`), as benchmarks/selfplay.py does
        act = lambda carry, ts, k: trainer._act(s.params, s.pool, carry, ts, k)  # noqa: E731
        _, traj = rollout(trainer.env, act, s.env_state, s.ts, (s.seat, s.opponent, s.opening), s.key,
                          config.rollout_len)
        return jnp.sum(traj.done)

    roll = jax.jit(roll)
    state, _ = jax.block_until_ready(chunk(state))
    jax.block_until_ready(roll(state))
    print(json.dumps({"ready": True, "coplay": str(Path(coplay.__file__).parent)}), flush=True)
    for line in sys.stdin:
        start = time.perf_counter()
        if line.strip() == "update":
            state, _ = jax.block_until_ready(chunk(state))
            seconds = (time.perf_counter() - start) / updates
        else:
            jax.block_until_ready(roll(state))
            seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds}), flush=True)


class Worker:
    def __init__(self, src: Path, game: str, updates: int, num_updates: int):
        env = {**os.environ, "PYTHONPATH": str(src)}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)  # both compile; compile time is not measured here anyway
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", game, "--updates", str(updates), "--num-updates", str(num_updates)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        hello = self._read()
        if not hello.get("ready"):
            raise RuntimeError(f"worker for {src} did not start: {hello}")
        self.coplay = hello["coplay"]
        if not Path(self.coplay).resolve().is_relative_to(src.resolve()):
            raise RuntimeError(f"worker meant for {src} imported coplay from {self.coplay}")

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited with code {self.proc.wait()}")
        return json.loads(line)

    def call(self, what: str) -> float:
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        return self._read()["seconds"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def paired(game: str, before: Path, rounds: int, updates: int) -> dict:
    num_updates = updates * (rounds + 1)       # the learning-rate schedule spans every update run
    workers = {"before": Worker(before, game, updates, num_updates), "now": Worker(SELF, game, updates, num_updates)}
    times: dict[str, dict[str, list[float]]] = {w: {"update": [], "rollout": []} for w in workers}
    try:
        for r in range(rounds):
            order = ["before", "now"] if r % 2 == 0 else ["now", "before"]
            for what in ("update", "rollout", "rollout"):
                for w in order:
                    times[w][what].append(workers[w].call(what))
    finally:
        for w in workers.values():
            w.close()
    out = {}
    for what in ("update", "rollout"):
        a, b = times["before"][what], times["now"][what]
        ratios = [x / y for x, y in zip(a, b)]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        out[what] = {"before_ms": 1000 * statistics.median(a), "now_ms": 1000 * statistics.median(b),
                     "ratio": statistics.median(ratios), "q1": q1, "q3": q3, "pairs": len(ratios),
                     "before_s": a, "now_s": b}
        print(f"{game} {what}: before {out[what]['before_ms']:.1f} ms, now {out[what]['now_ms']:.1f} ms, "
              f"paired ratio {out[what]['ratio']:.2f} ({q1:.2f}-{q3:.2f}, {len(ratios)} pairs)", flush=True)
    return out


TITLE = "Self-play training step, an older coplay checkout beside this one, timed in alternation"


def section(data: dict) -> str:
    a = data["args"]
    where = f"on {data['machine']}" if "machine" in data else "(machine not recorded)"
    lines = [f"## {TITLE}", "",
             f"`python benchmarks/selfplay_paired.py --before-src ...` {where}: commit {data['before']} (before) "
             f"against {data['now']} (now). `selfplay_ppo` defaults; {a['updates']} updates per timed update call, "
             f"{a['rounds']} rounds of one update call and two rollout calls from each checkout, taking turns (see "
             "the script's docstring). Ratio: before's time / now's time of the two calls of a pair, median over "
             "pairs (quartiles in brackets); above 1, now is faster.", ""]
    rows = []
    for game, r in data["results"].items():
        for what, label in (("update", "training update (rollout vs pool + PPO epochs)"),
                            ("rollout", "rollout only (vs pool, no learning)")):
            x = r[what]
            rows.append([game, label, f"{x['before_ms']:.1f}", f"{x['now_ms']:.1f}",
                         f"{x['ratio']:.2f}x ({x['q1']:.2f}-{x['q3']:.2f})", x["pairs"]])
    lines += table(["game", "what", "before, ms", "now, ms", "paired ratio", "pairs"], rows)
    lines += ["", "The ms columns are medians over each checkout's calls; they drift with the machine, the "
              "paired ratios much less. The training update includes the rollout, so the rollout's gain shows "
              "in it only in proportion to the rollout's share of an update."]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return [{"claim": f"self-play training update, this checkout beside an older one ({game})",
             "workload": f"`selfplay_ppo` defaults, {data['args']['updates']} updates per call, commit "
                         f"{data['now']} against {data['before']}",
             "ratio": f"{r['update']['ratio']:.2f}x (quartiles {r['update']['q1']:.2f}-{r['update']['q3']:.2f} "
                      f"over {r['update']['pairs']} pairs)",
             "machine": data.get("machine", "not recorded")} for game, r in data["results"].items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-src", type=Path, help="the `src` directory of an older coplay checkout")
    ap.add_argument("--games", default=",".join(GAMES), help="comma-separated: " + ", ".join(GAMES))
    ap.add_argument("--rounds", type=int, default=40, help="rounds of alternating calls")
    ap.add_argument("--updates", type=int, default=5, help="training updates per timed update call")
    ap.add_argument("--no-write", action="store_true",
                    help="print the section instead of writing the results file and BENCHMARKS.md")
    ap.add_argument("--worker", metavar="GAME", help=argparse.SUPPRESS)
    ap.add_argument("--num-updates", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.updates, args.num_updates)
        return
    if args.before_src is None or not (args.before_src / "coplay").is_dir():
        ap.error(f"--before-src must be an older checkout's src directory (holding coplay/); got {args.before_src}")
    games = [g for g in args.games.split(",") if g]
    bad = [g for g in games if g not in GAMES]
    if bad:
        ap.error(f"unknown game(s) {bad}; valid choices: {', '.join(GAMES)}")
    if args.rounds < 2 or args.updates < 1:
        ap.error(f"--rounds must be >= 2 and --updates >= 1; got {args.rounds} and {args.updates}")
    results = {game: paired(game, args.before_src, args.rounds, args.updates) for game in games}
    data = {**stamp(), "before": git_head(args.before_src), "now": git_head(SELF),
            "args": {k: str(v) for k, v in vars(args).items()}, "results": results}
    if args.no_write:
        print(section(data))
        return
    write_results("selfplay_paired", data)
    regenerate_page()

if __name__ == "__main__":
    main()
