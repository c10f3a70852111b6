"""SmolLM2-135M-Instruct learning to answer in the game's format: the share of its free-text
replies that name a move of Kuhn poker in words, before and during `algo=lm_grpo` training.

    coplay lm fetch-smollm2                          # once
    python benchmarks/lm_smollm2_format.py           # about half an hour on 2 cores
    python benchmarks/lm_smollm2_format.py --quick   # 1 update, 1 seed, nothing written

`algo=lm_grpo algo.model=smollm2 algo.decoding=free` (the model writes any reply; the game
reads the words of its first line, and a reply that names no legal move forfeits the game,
so the game's own reward is the format reward), 16 episodes in groups of 4 per update,
LoRA rank 8, `--lr`, KL `--kl-coef`. Conditions: the plain prompt (the rules, the view and
the legal moves; "reply with your move only") at temperature 1 and at 0.3, and the same
prompt after `--examples` worked examples (`algo.examples`: turns of a random game shown as
earlier exchanges of the chat, the view, its moves and a legal reply). Each condition with
`--seeds` seeds; the share of replies that name a legal move over `--eval-episodes`
self-play episodes of each seed before training and every `--every` updates; interquartile
mean over seeds with 95% bootstrap intervals.

Writes benchmarks/results/lm_smollm2_format.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cpu_model, keep_condition, load, stamp, table  # noqa: E402

RESULTS = "lm_smollm2_format.json"
COMMAND = "python benchmarks/lm_smollm2_format.py"


def conditions(examples: int) -> list[tuple[str, int, float]]:
    """(name, worked examples, temperature)."""
    return [("plain, temperature 1", 0, 1.0), ("plain, temperature 0.3", 0, 0.3),
            (f"{examples} worked examples, temperature 1", examples, 1.0)]


def share_curve(examples: int, temperature: float, args: argparse.Namespace, options: dict, loaded) -> dict:
    import coplay
    from coplay.algos.lm_grpo import LMGRPO, Config

    env = coplay.make("text:kuhn_poker")
    learner = LMGRPO(Config(model="smollm2", decoding="free", examples=examples, temperature=temperature, **options),
                     env, args.updates, seeds=args.seeds, seed=0, loaded=loaded)

    def shares(u: int) -> list[float]:
        out = []
        for s in range(args.seeds):
            learner.use_seed(s)
            ev = learner.evaluate(s, u, args.eval_episodes)
            out.append(float(1.0 - np.mean(ev["invalid"])))
        return out

    points = [(0, shares(0))]
    t = time.perf_counter()
    for u in range(args.updates):
        for s in range(args.seeds):
            learner.update(s, u)
        if (u + 1) % args.every == 0 or u + 1 == args.updates:
            points.append((u + 1, shares(u + 1)))
            print(f"examples={examples} temperature={temperature} update {u + 1}: {np.round(points[-1][1], 3)}",
                  flush=True)
    for name in [n for row in learner.adapter_names for n in row]:
        learner.model.delete_adapter(name)
    return {"examples": examples, "temperature": temperature, "points": points,
            "seconds": time.perf_counter() - t}


def main() -> None:
    import torch

    from coplay.lm.models import load_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--examples", type=int, default=2)
    ap.add_argument("--eval-episodes", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--kl-coef", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="1 update, 1 seed, nothing written")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.updates, args.every, args.seeds, args.eval_episodes = 1, 1, 1, 4
    options = {"episodes": 16, "group_size": 4, "lr": args.lr, "kl_coef": args.kl_coef, "estimator": "rloo"}
    runs = []
    for name, examples, temperature in conditions(args.examples):
        loaded = load_model("smollm2")   # a fresh base model for each condition
        runs.append({"condition": name, **share_curve(examples, temperature, args, options, loaded)})
        data = {**stamp(), "cpu": cpu_model(), "threads": args.threads, "updates": args.updates, "every": args.every,
                "seeds": args.seeds, "examples": args.examples, "eval_episodes": args.eval_episodes,
                "options": options, "runs": runs}
        keep_condition(RESULTS.removesuffix(".json"), data, args.quick, section)


def section(d: dict) -> str:
    from coplay.eval.stats import iqm_ci

    runs, options = d["runs"], d["options"]
    steps = [u for u, _ in runs[0]["points"]]
    rows = []
    for r in runs:
        est = iqm_ci(np.asarray([v for _, v in r["points"]]).T)
        rows.append([r["condition"], *[f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]" for e in est],
                     f"{r['seconds'] / 60:.0f}"])
    flags = " ".join(f"algo.{k}={v}" for k, v in options.items())
    missing = "" if len(runs) == 3 else f" **Needs a rerun**: only {len(runs)} of 3 conditions finished."
    return "\n".join([
        "## SmolLM2 learning the game's format with free decoding", "",
        f"`{COMMAND} --updates {d['updates']} --every {d['every']} --seeds {d['seeds']} --examples {d['examples']} "
        f"--eval-episodes {d['eval_episodes']} --lr {options['lr']} --kl-coef {options['kl_coef']}` on "
        f"{d['machine']}, {d['threads']} threads: `algo=lm_grpo algo.model=smollm2 algo.decoding=free {flags}` "
        "on `text:kuhn_poker` (a reply that names no legal move forfeits the game). The share of replies that "
        f"name a legal move, over {d['eval_episodes']} self-play episodes of each seed, after each number of "
        f"updates; interquartile mean over {d['seeds']} seeds with 95% bootstrap intervals; min: minutes of "
        f"training and evaluation.{missing}", "",
        *table(["prompt", *map(str, steps), "min"], rows), "",
        f"{d['date']}; commit {d['commit']}."])


def load_results() -> dict | None:
    return load(RESULTS)


if __name__ == "__main__":
    main()
