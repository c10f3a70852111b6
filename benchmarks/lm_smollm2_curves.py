"""SmolLM2-135M-Instruct learning Kuhn poker in words: learning curves of its exact
exploitability, one LoRA adapter for both seats against one adapter per seat, with CIs.

    coplay lm fetch-smollm2                      # once
    python benchmarks/lm_smollm2_curves.py       # about an hour on 2 cores
    python benchmarks/lm_smollm2_curves.py --quick    # 2 updates, nothing written

`algo=lm_grpo algo.model=smollm2 algo.decoding=choose_legal` (free decoding forfeits every
game: the pretrained model writes no move in the game's format, see the SmolLM2 section),
the estimator `--estimator` (default `rloo`), 16 episodes in groups of 4 per update, LoRA
rank 8, `--lr`, KL to the base model `--kl-coef`, sampling temperature `--temperature`
(default 2: it is part of the policy, in play and in scoring alike; at temperature 1 the
model plays the first listed move about 99% of the time, so the few episodes that differ
carry the whole gradient, and one Adam step pushes every move toward the first one).
`adapters=shared` (one adapter plays both
seats) and `adapters=per_role` (an adapter per seat on the one frozen base model), each
with `--seeds` seeds (adapters of one run on one base model, trained one after another).
The exact exploitability of each seed's strategy (its probability of each move's
canonical reply, renormalised over the legal moves, scored on the game's tree) before
training and every `--every` updates, and its exact expected return against the uniform
random player (the fixed opponent, both seats); interquartile mean over seeds with 95%
bootstrap intervals, and the per-seed differences between the two after the last update.

Writes benchmarks/results/lm_smollm2_curves.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cpu_model, keep_condition, load, stamp, table  # noqa: E402

RESULTS = "lm_smollm2_curves.json"
COMMAND = "python benchmarks/lm_smollm2_curves.py"
ADAPTERS = ("shared", "per_role")


def curves(adapters: str, seeds: int, updates: int, every: int, options: dict, loaded) -> dict:
    import coplay
    from coplay.algos.lm_grpo import LMGRPO, Config
    from coplay.envs.text.scoring import score_lm_player
    from coplay.envs.trees.values import TreeArrays, expected_value, exploitability

    env = coplay.make("text:kuhn_poker")
    learner = LMGRPO(Config(model="smollm2", decoding="choose_legal", adapters=adapters, **options), env, updates,
                     seeds=seeds, seed=0, loaded=loaded)

    tree = TreeArrays.from_tree(env.game.tree)
    _, owner, _ = env.infoset_views()
    owner = np.asarray(owner)[:, None]
    legal = np.asarray(env.game.tree.legal, np.float32)
    uniform = legal / legal.sum(-1, keepdims=True)

    def scores() -> tuple[list[float], list[float]]:
        """Each seed's exact exploitability, and its exact expected return against the uniform
        random player, the mean of its two seats."""
        expl, value = [], []
        for s in range(seeds):
            learner.use_seed(s)
            strategy = np.asarray(score_lm_player(env, learner.player).strategy)
            expl.append(float(exploitability(tree, strategy)))
            as_first = float(expected_value(tree, np.where(owner == 0, strategy, uniform)))
            as_second = -float(expected_value(tree, np.where(owner == 1, strategy, uniform)))
            value.append((as_first + as_second) / 2)
        return expl, value

    points, against = [], []

    def record(u: int) -> None:
        expl, value = scores()
        points.append((u, expl))
        against.append((u, value))

    record(0)
    t = time.perf_counter()
    for u in range(updates):
        for s in range(seeds):
            learner.update(s, u)
        if (u + 1) % every == 0 or u + 1 == updates:
            record(u + 1)
            print(f"{adapters} update {u + 1}: exploitability {np.round(points[-1][1], 3)}, against uniform "
                  f"{np.round(against[-1][1], 3)}", flush=True)
    # unload the adapters: the next condition loads its own on the same base model
    for name in [n for row in learner.adapter_names for n in row]:
        learner.model.delete_adapter(name)
    return {"adapters": adapters, "points": points, "against_uniform": against, "seconds": time.perf_counter() - t}


def main() -> None:
    import torch

    from coplay.lm.models import load_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--estimator", default="rloo")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--kl-coef", type=float, default=0.1)
    ap.add_argument("--temperature", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="2 updates, 1 seed, nothing written")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.updates, args.every, args.seeds = 2, 1, 1
    options = {"episodes": 16, "group_size": 4, "lr": args.lr, "kl_coef": args.kl_coef, "estimator": args.estimator,
               "temperature": args.temperature}
    runs = []
    for adapters in ADAPTERS:
        loaded = load_model("smollm2")   # a fresh base model for each condition
        runs.append(curves(adapters, args.seeds, args.updates, args.every, options, loaded))
        data = {**stamp(), "cpu": cpu_model(), "threads": args.threads, "updates": args.updates,
                "every": args.every, "seeds": args.seeds, "options": options, "runs": runs}
        keep_condition(RESULTS.removesuffix(".json"), data, args.quick, section)


def section(d: dict) -> str:
    from coplay.eval.stats import iqm_ci

    runs, options = d["runs"], d["options"]
    steps = [u for u, _ in runs[0]["points"]]
    rows, value_rows = [], []
    for r in runs:
        est = iqm_ci(np.asarray([v for _, v in r["points"]]).T)
        rows.append([r["adapters"], *[f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}]" for e in est],
                     f"{r['seconds'] / 60:.0f}"])
        est = iqm_ci(np.asarray([v for _, v in r["against_uniform"]]).T)
        value_rows.append([r["adapters"], *[f"{e.value:+.3f} [{e.low:+.3f}, {e.high:+.3f}]" for e in est]])
    final = {r["adapters"]: np.asarray(r["points"][-1][1]) for r in runs}
    if set(final) == set(ADAPTERS):
        diff = iqm_ci((final["per_role"] - final["shared"])[:, None])[0]
        won = {r["adapters"]: np.asarray(r["against_uniform"][-1][1]) for r in runs}
        gain = iqm_ci((won["per_role"] - won["shared"])[:, None])[0]
        last = (f"Per_role minus shared, paired by seed, after the last update: exploitability {diff.value:+.3f} "
                f"[{diff.low:+.3f}, {diff.high:+.3f}]; return against the uniform player {gain.value:+.3f} "
                f"[{gain.low:+.3f}, {gain.high:+.3f}].")
    else:
        last = f"**Needs a rerun**: only {', '.join(final)} finished; `{COMMAND}`."
    flags = " ".join(f"algo.{k}={v}" for k, v in options.items())
    return "\n".join([
        "## SmolLM2 learning Kuhn poker: one adapter for both seats, or one per seat", "",
        f"`{COMMAND} --updates {d['updates']} --every {d['every']} --seeds {d['seeds']} --estimator "
        f"{options['estimator']} --lr {options['lr']} --kl-coef {options['kl_coef']} --temperature "
        f"{options['temperature']}` on {d['machine']}, "
        f"{d['threads']} threads: `algo=lm_grpo algo.model=smollm2 algo.decoding=choose_legal {flags}`. Exact "
        "exploitability of each seed's strategy after each number of updates (0: a Nash equilibrium; the uniform "
        f"strategy's is 0.458), interquartile mean over {d['seeds']} seeds with 95% bootstrap intervals; min: "
        "minutes of training and scoring of all seeds, trained one after another.", "",
        *table(["adapters", *map(str, steps), "min"], rows), "",
        "Exact expected return against the uniform random player, the mean of the two seats (chance-weighted "
        "over the deals, so no games are sampled; the untrained model's is the first column), the same seeds:", "",
        *table(["adapters", *map(str, steps)], value_rows), "",
        last, "",
        *[f"- Target (at most half the untrained model's exploitability, within 30 minutes of 2 cores): "
          f"{r['adapters']}, {sum(v <= r['points'][0][1][i] / 2 for i, v in enumerate(r['points'][-1][1]))} of "
          f"{len(r['points'][-1][1])} seeds at or below half their start after {r['points'][-1][0]} updates, "
          f"{r['seconds'] / 60 / len(r['points'][-1][1]):.0f} minutes a seed." for r in runs],
        "", f"{d['date']}; commit {d['commit']}."])


def load_results() -> dict | None:
    return load(RESULTS)


if __name__ == "__main__":
    main()
