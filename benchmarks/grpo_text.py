"""GRPO with the token-level policy on poker in words: learning curves and throughput.

    python benchmarks/grpo_text.py                  # Kuhn and Leduc curves, throughput; writes BENCHMARKS.md
    python benchmarks/grpo_text.py --budget 60      # seconds of training per curve (default 300)
    python benchmarks/grpo_text.py --quick          # short budgets, no table written
    python benchmarks/grpo_text.py --seeds 3 --only "kuhn, decoding=legal + KL ..." --name kuhn_seeds
                                                    # one configuration (a prefix of its name), seeds 0..2

Curves: self-play from a fresh token policy (`algo=grpo`, one model in both
seats) on `text:kuhn_poker` and `text:leduc_holdem`, timed on this machine
(compile included), with the text policy's exact exploitability (its move
probabilities read from its utterances' log-probabilities, scored by the game
tree; not timed) and the rate of utterances that name no legal move, every
`--every` updates. Each configuration in `CONFIGS` is run with the same seed.

Throughput (after compiling; best of 3): utterances and tokens generated per
second by the policy alone (a batch of views, every utterance sampled token by
token), and whole training updates per second (episodes played and learned
from). Results go to benchmarks/results/grpo_text.json; an `--only` run's to the
study benchmarks/results/grpo_text_runs/<--name>.json; then BENCHMARKS.md
(benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import regenerate_page, stamp, table, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.algos.grpo import GRPO, Config  # noqa: E402
from coplay.envs.text.scoring import score_text_policy  # noqa: E402
from coplay.envs.trees.values import TreeArrays, counterfactual_values, exploitability  # noqa: E402

# name -> (environment, config fields; `updates`: the updates the run plans, for anneal_lr)
RESULTS = "grpo_text.json"
RNAD = {"decoding": "legal", "estimator": "dr_grpo", "kl_coef": 0.2, "reference_every": 100, "lr": 3e-4,
        "anneal_lr": True, "layers": 1, "width": 32}
CONFIGS = {
    "kuhn, defaults (grpo)": ("text:kuhn_poker", {}),
    "kuhn, decoding=legal, defaults otherwise": ("text:kuhn_poker", {"decoding": "legal"}),
    "kuhn, decoding=legal + KL 0.2 to a reference refreshed every 100 updates, dr_grpo, lr 3e-4 annealed "
    "over 4000 updates, 1 layer of width 32": ("text:kuhn_poker", {**RNAD, "updates": 4000}),
    "leduc, defaults (grpo)": ("text:leduc_holdem", {}),
    "leduc, the same as kuhn's third, lr annealed over 3000 updates": ("text:leduc_holdem", {**RNAD, "updates": 3000}),
    "leduc, the same as kuhn's third, lr annealed over 6000 updates": ("text:leduc_holdem", {**RNAD, "updates": 6000}),
    "leduc, KL 0.5 to a reference refreshed every 200 updates, lr annealed over 3000 updates": (
        "text:leduc_holdem", {**RNAD, "kl_coef": 0.5, "reference_every": 200, "updates": 3000}),
    # magnetic mirror descent (Sokota et al., 2023): an entropy reward (the uniform magnet, in the reward) with
    # the KL step to the refreshed reference
    "leduc, MMD: entropy reward 0.05, KL 0.5 to a reference refreshed every 200 updates, lr annealed over 3000 "
    "updates": ("text:leduc_holdem", {**RNAD, "kl_coef": 0.5, "reference_every": 200, "entropy_reward": 0.05,
                                      "updates": 3000}),
    "leduc, MMD: entropy reward 0.2, KL 0.5 to a reference refreshed every 200 updates, lr annealed over 3000 "
    "updates": ("text:leduc_holdem", {**RNAD, "kl_coef": 0.5, "reference_every": 200, "entropy_reward": 0.2,
                                      "updates": 3000}),
    "leduc, MMD: entropy reward 0.5, KL 0.5 to a reference refreshed every 200 updates, lr annealed over 3000 "
    "updates": ("text:leduc_holdem", {**RNAD, "kl_coef": 0.5, "reference_every": 200, "entropy_reward": 0.5,
                                      "updates": 3000}),
}


def averager(env):
    """The time-averaged policy of a run, the one fictitious play and NFSP report: every
    checkpoint's strategy `[I, A]` enters each information set weighted by the player's own
    probability of reaching it (Kuhn's theorem makes that the behaviour policy of playing a
    checkpoint drawn at the start of the episode), with weight 1 (`uniform`) or its
    checkpoint's number (`linear`). Returns `add(sums, strategy, n) -> (sums, scores)`."""
    t = TreeArrays.from_tree(env.game.tree)

    def add(sums, strategy, n):
        reach = counterfactual_values(t, strategy, 0)[1] + counterfactual_values(t, strategy, 1)[1]   # [I]
        sums = {"uniform": sums["uniform"] + reach[:, None] * strategy,
                "linear": sums["linear"] + n * reach[:, None] * strategy}
        scores = {}
        for name, total in sums.items():
            mass = jnp.sum(total, axis=1, keepdims=True)
            uniform = t.legal / jnp.sum(t.legal, axis=1, keepdims=True)
            scores[name] = exploitability(t, jnp.where(mass > 0, total / jnp.maximum(mass, 1e-30), uniform))
        return sums, scores

    zeros = jnp.zeros(t.legal.shape, jnp.float32)
    return {"uniform": zeros, "linear": zeros}, jax.jit(add)


def curve(env_name: str, fields: dict, budget: float, every: int, seed: int = 0, verbose: bool = False) -> dict:
    """`fields` are Config fields, and `updates`, where given: the updates the run plans
    (the learning rate anneals over them with anneal_lr; the curve stops there or at the budget)."""
    env = coplay.make(env_name)
    fields = dict(fields)
    planned = int(fields.pop("updates", 1_000_000))
    config = Config(**fields)
    trainer = GRPO(config, env, num_updates=planned)
    legal_only = config.decoding == "legal"
    score = jax.jit(lambda p: score_text_policy(env, trainer.model, p, config.temperature, legal_only=legal_only))
    chunk = jax.jit(lambda s: jax.lax.scan(lambda s, _: trainer.update(s), s, None, length=every))
    t0 = time.perf_counter()
    state = trainer.init(jax.random.PRNGKey(seed))
    points, updates = [], 0
    start = float(score(state.params).exploitability)
    sums, add = averager(env)
    while time.perf_counter() - t0 < budget and updates + every <= planned:
        state, metrics = chunk(state)
        jax.block_until_ready(state)
        seconds = time.perf_counter() - t0
        updates += every
        s = score(state.params)
        sums, average = add(sums, s.strategy, updates // every)
        points.append({"seconds": round(seconds, 1), "updates": updates,
                       "episodes": updates * config.episodes,
                       "exploitability": round(float(s.exploitability), 4),
                       "average_uniform": round(float(average["uniform"]), 4),
                       "average_linear": round(float(average["linear"]), 4),
                       "invalid": round(float(metrics["invalid"][-1]), 4)})
        if verbose:
            print(points[-1], flush=True)
    best = min(points, key=lambda p: p["exploitability"])
    below = next((p for p in points if p["exploitability"] < 0.05), None)
    last = sorted(p["exploitability"] for p in points[-max(1, len(points) // 3):])
    return {"env": env_name, "config": fields, "start": round(start, 4), "points": points, "best": best,
            "final": points[-1], "reached_0.05": below, "last_third_median": last[len(last) // 2],
            "last_third_below_0.05": round(sum(x < 0.05 for x in last) / len(last), 3)}


def throughput(env_name: str, batch: int = 256, repeats: int = 3) -> dict:
    env = coplay.make(env_name)
    trainer = GRPO(Config(), env, num_updates=1)
    state = trainer.init(jax.random.PRNGKey(0))
    views, _, _ = env.infoset_views()
    views = jnp.resize(views, (batch, views.shape[1]))
    agents = jnp.zeros((batch, 1), jnp.int32)
    gen = jax.jit(lambda p, k: trainer.speakers.generate(p, views[:, None], agents, k))
    out = gen(state.params, jax.random.PRNGKey(1))
    jax.block_until_ready(out)
    best = float("inf")
    for r in range(repeats):
        t = time.perf_counter()
        out = gen(state.params, jax.random.PRNGKey(r))
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - t)
    tokens = float(out.length.sum())
    update = jax.jit(lambda s: jax.lax.scan(lambda s, _: trainer.update(s), s, None, length=10))
    jax.block_until_ready(update(state))
    upd = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(update(state))
        upd = min(upd, (time.perf_counter() - t) / 10)
    return {"env": env_name, "batch": batch, "utterances_per_s": round(batch / best),
            "tokens_per_s": round(tokens / best), "updates_per_s": round(1 / upd, 2),
            "episodes_per_s": round(trainer.config.episodes / upd)}


def seeded(runs: list[dict]) -> list[tuple[int, dict]]:
    """(seed, run) pairs: a run's own seed, or its place for results files written before runs kept it."""
    return [(r.get("seed", i), r) for i, r in enumerate(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of training per curve")
    parser.add_argument("--every", type=int, default=10, help="updates between exploitability checks")
    parser.add_argument("--quick", action="store_true", help="20 s per curve, nothing written to BENCHMARKS.md")
    parser.add_argument("--only", help="run only the configuration whose name starts with this, over --seeds")
    parser.add_argument("--seeds", type=int, default=1, help="with --only: seeds 0..N-1 (from --first-seed)")
    parser.add_argument("--first-seed", type=int, default=0, help="with --only: the first seed")
    parser.add_argument("--name", default=None,
                        help="with --only: the run's results file in the study, grpo_text_runs/<name>.json")
    args = parser.parse_args()
    budget = 20.0 if args.quick else args.budget
    if args.only is not None:
        names = [n for n in CONFIGS if n.startswith(args.only)]
        if len(names) != 1:
            parser.error(f"--only {args.only!r} names {len(names)} configurations; choose one of: {list(CONFIGS)}")
        env_name, fields = CONFIGS[names[0]]
        runs = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            runs.append(r := {**curve(env_name, fields, budget, args.every, seed=seed, verbose=True), "seed": seed})
            print(f"seed {seed}: start {r['start']}, best {r['best']}, final {r['final']}", flush=True)
        if not args.quick:
            if not args.name:
                parser.error("--only needs --name: the results file in benchmarks/results/grpo_text_runs/")
            command = "python benchmarks/grpo_text.py " + " ".join(
                f'"{a}"' if " " in a else a for a in sys.argv[1:])
            write_results(f"grpo_text_runs/{args.name}", {**stamp(), "budget_s": budget, "name": names[0],
                                                          "command": command, "runs": runs})
            regenerate_page()
        return
    results: dict = {"curves": {}, "throughput": []}
    for name, (env_name, fields) in CONFIGS.items():
        results["curves"][name] = r = curve(env_name, fields, budget, args.every)
        print(f"{name}: start {r['start']}, best {r['best']}, final {r['final']}", flush=True)
    for env_name in ("text:kuhn_poker", "text:leduc_holdem"):
        results["throughput"].append(t := throughput(env_name))
        print(t, flush=True)
    if args.quick:
        return
    write_results("grpo_text", {**stamp(), "budget_s": budget, **results})
    regenerate_page()



TARGETS = {"text:kuhn_poker": 0.05, "text:leduc_holdem": 0.5}   # the exploitability each game's runs aim below


def section(data: dict) -> str:
    results = data["curves"], data["throughput"]
    curves, throughput = results
    budget = data["budget_s"]
    lines = [
        "## GRPO with the token-level policy: poker in words, self-play from scratch",
        "",
        f"`python benchmarks/grpo_text.py --budget {budget:g}` on {data['machine']}. One seed per configuration, "
        f"{budget:g} s of training each (compile included). Exploitability is exact: the text policy's probability "
        "of each legal move's utterance at every information set, renormalised over the legal moves, scored by the "
        "game tree (under `decoding=legal` the policy's own restricted probabilities). `reached < 0.05` says "
        "whether and when a configuration first got below 0.05, and the last third of the curve whether it stays: "
        "its median and the share of its points below 0.05.",
        "",
    ]
    rows = []
    for name, r in curves.items():
        b, f, hit = r["best"], r["final"], r["reached_0.05"]
        reached = "no" if hit is None else f"{hit['seconds']:g} s ({hit['updates']} updates)"
        rows.append([name, f"{r['start']:.3f}", f"{b['exploitability']:.3f} ({b['seconds']:g} s, {b['updates']})",
                     f"{f['exploitability']:.3f} ({f['seconds']:g} s)", reached,
                     f"{r['last_third_median']:.3f}, {r['last_third_below_0.05']:.2f}", f"{f['invalid']:.3f}"])
    lines += table(["configuration", "start", "best (s, updates)", "final (s)", "reached < 0.05",
                    "last third: median, share < 0.05", "invalid at the end"], rows)
    lines += ["", "Throughput after compiling (best of 3): generation alone on a batch of 256 views, and whole "
                  "updates (64 episodes in groups of 8, played to their end and learned from, defaults):", ""]
    lines += table(["environment", "utterances/s", "tokens/s", "updates/s", "training episodes/s"],
                   [[t["env"], f"{t['utterances_per_s']:,}", f"{t['tokens_per_s']:,}", t["updates_per_s"],
                     f"{t['episodes_per_s']:,}"] for t in throughput])
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    return []


STUDY = "grpo_text_runs/"


def _below(points: list[dict], key: str, target: float):
    return next((p for p in points if p[key] < target), None)


def study_section(data: dict) -> str:
    rows = []
    for d in data.values():
        for seed, r in seeded(d["runs"]):
            target = TARGETS.get(r["env"], 0.05)
            pts, f = r["points"], r["final"]
            hit = _below(pts, "exploitability", target)
            last = sorted(p["exploitability"] for p in pts[-max(1, len(pts) // 3):])
            b = min(pts, key=lambda p: p["exploitability"])
            averages = "–"
            if "average_linear" in f:
                averages = ", ".join(f"{min(p[k] for p in pts):.3f} / {f[k]:.3f}"
                                     for k in ("average_uniform", "average_linear"))
            rows.append([d["name"], seed, f"{f['updates']} ({f['seconds']:g} s)", f"{r['start']:.3f}", f"{target:g}",
                         "no" if hit is None else f"{hit['updates']} updates",
                         f"{b['exploitability']:.3f} ({b['updates']})", f"**{f['exploitability']:.3f}**",
                         f"{last[len(last) // 2]:.3f}, {sum(x < target for x in last) / len(last):.2f}", averages,
                         f"{f['invalid']:.3f}"])
    return "\n".join([
        "## GRPO with the token-level policy: chosen configurations over seeds", "",
        f"A study of {len(data)} runs (`benchmarks/results/grpo_text_runs/`; its README gives the question and the "
        "commands): one configuration of `grpo_text.py` at a time (`--only`), over seeds, trained until the updates "
        "it plans are done (its learning rate anneals over them) or its time runs out; exploitability exact, as "
        "above, scored every `--every` updates. Target: below 0.05 on Kuhn, below 0.5 on Leduc. The last third: "
        "the median of its points and the share below the target. Averages: the run's time-averaged policy "
        "(each information set's strategy over the scored points, weighted by the player's own reach, uniformly or "
        "by the point's number), best / final, uniform then linear. Machines: "
        + "; ".join(sorted({d["machine"] for d in data.values()})) + ".", "",
        *table(["configuration", "seed", "updates (s)", "start", "target", "first below the target",
                "best (updates)", "final", "last third: median, share below", "averages: uniform, linear",
                "invalid at the end"], rows)])


if __name__ == "__main__":
    main()
