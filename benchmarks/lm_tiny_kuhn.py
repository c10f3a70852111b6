"""Learning curves of `algo=lm_grpo` with the tiny model on Kuhn poker in words, on the CPU.

    python benchmarks/lm_tiny_kuhn.py [--updates 200] [--every 20] [--lr 3e-3] [--kl-coef 1.0]
                                      [--estimators grpo rae dr_grpo]

The tiny model (`algo.model=tiny`: a 2-layer Llama of width 64 with random weights and
a word-level tokenizer) plays both seats with `decoding=choose_legal` and learns with LoRA
(rank 8) from each estimator in turn, same seed, same budget. The exact exploitability
of its strategy is measured before training and every `--every` updates. Writes the
`lm_tiny_kuhn` section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _common import cpu_model, regenerate_page, stamp, table, write_results

import coplay
from coplay.algos.lm_grpo import LMGRPO, Config
from coplay.envs.text.scoring import score_lm_player
from coplay.lm.models import tiny_model

RESULTS = "lm_tiny_kuhn.json"


def curve(estimator: str, updates: int, every: int, options: dict) -> dict:
    env = coplay.make("text:kuhn_poker")
    learner = LMGRPO(Config(model="tiny", decoding="choose_legal", estimator=estimator, **options), env, updates,
                     seeds=1, seed=0, loaded=tiny_model())
    points = [(0, float(score_lm_player(env, learner.player).exploitability))]
    t = time.perf_counter()
    for u in range(updates):
        learner.update(0, u)
        if (u + 1) % every == 0:
            points.append((u + 1, float(score_lm_player(env, learner.player).exploitability)))
    seconds = time.perf_counter() - t
    bet = np.asarray(score_lm_player(env, learner.player).strategy)[:, 1]
    return {"estimator": estimator, "points": points, "seconds": seconds, "spread": float(bet.max() - bet.min())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--estimators", nargs="+", default=["grpo", "rae", "dr_grpo"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--kl-coef", type=float, default=1.0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    # A strong KL to the base model (near uniform over the moves) keeps the policy from settling on one
    # move everywhere before it has learned to read the card; without it (or with kl_coef=0.2) every
    # estimator ends at always-bet, the same strategy at every information set.
    options = {"episodes": 32, "group_size": 4, "lr": args.lr, "kl_coef": args.kl_coef}
    runs = [curve(e, args.updates, args.every, options) for e in args.estimators]
    write_results("lm_tiny_kuhn", {**stamp(), "cpu": cpu_model(), "threads": args.threads, "updates": args.updates,
                                   "every": args.every, "options": options, "runs": runs})
    regenerate_page()
    print(runs)


def section(d: dict) -> str:
    runs, options = d["runs"], d["options"]
    steps = [u for u, _ in runs[0]["points"]]
    flags = " ".join(f"algo.{k}={v}" for k, v in options.items())
    rows = [[r["estimator"], *[f"{v:.3f}" for _, v in r["points"]], f"{r['spread']:.3f}", f"{r['seconds']:.0f}"]
            for r in runs]
    updates, every = d.get("updates", steps[-1]), d.get("every", steps[1] - steps[0])
    return "\n".join([
        "## A language model learning Kuhn poker from scratch: the tiny model, LoRA, by estimator", "",
        f"`python benchmarks/lm_tiny_kuhn.py --updates {updates} --every {every} --lr {options['lr']} --kl-coef "
        f"{options['kl_coef']} --estimators {' '.join(r['estimator'] for r in runs)}` on {d.get('machine', d['cpu'])}: "
        f"`algo=lm_grpo algo.model=tiny {flags}`, one seed (0), the same for every estimator. Exact exploitability "
        "of the model's strategy after each number of updates, and the spread of its probability of betting over "
        "the 12 information sets (0: the same strategy everywhere) at the end; s: seconds of training.", "",
        *table(["estimator", *map(str, steps), "spread", "s"], rows)])


def claims(data: dict) -> list[dict]:
    return []

if __name__ == "__main__":
    main()
