"""SmolLM2-135M-Instruct learning Kuhn poker in words: learning curves of its exact
exploitability, one LoRA adapter for both seats against one adapter per seat, with CIs.

    coplay lm fetch-smollm2                      # once
    python benchmarks/lm_smollm2_curves.py       # about an hour on 2 cores
    python benchmarks/lm_smollm2_curves.py --quick    # 2 updates, nothing written

`algo=lm_grpo algo.model=smollm2 algo.decoding=choose_legal` (free decoding forfeits every
game: the pretrained model writes no move in the game's format, see the SmolLM2 section),
the estimator `--estimator` (default `rloo`), 16 episodes in groups of 4 per update, LoRA
rank 8, `--lr`, KL to the base model `--kl-coef`. `adapters=shared` (one adapter plays both
seats) and `adapters=per_role` (an adapter per seat on the one frozen base model), each
with `--seeds` seeds (adapters of one run on one base model, trained one after another).
The exact exploitability of each seed's strategy (its probability of each move's
canonical reply, renormalised over the legal moves, scored on the game's tree) before
training and every `--every` updates; interquartile mean over seeds with 95% bootstrap
intervals, and the per-seed difference of the final exploitability between the two.

Writes benchmarks/results/lm_smollm2_curves.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cpu_model, load, regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "lm_smollm2_curves.json"
COMMAND = "python benchmarks/lm_smollm2_curves.py"
ADAPTERS = ("shared", "per_role")


def curves(adapters: str, seeds: int, updates: int, every: int, options: dict, loaded) -> dict:
    import coplay
    from coplay.algos.lm_grpo import LMGRPO, Config
    from coplay.envs.text.scoring import score_lm_player

    env = coplay.make("text:kuhn_poker")
    learner = LMGRPO(Config(model="smollm2", decoding="choose_legal", adapters=adapters, **options), env, updates,
                     seeds=seeds, seed=0, loaded=loaded)

    def scores() -> list[float]:
        out = []
        for s in range(seeds):
            learner.use_seed(s)
            out.append(float(score_lm_player(env, learner.player).exploitability))
        return out

    points = [(0, scores())]
    t = time.perf_counter()
    for u in range(updates):
        for s in range(seeds):
            learner.update(s, u)
        if (u + 1) % every == 0 or u + 1 == updates:
            points.append((u + 1, scores()))
            print(f"{adapters} update {u + 1}: {np.round(points[-1][1], 3)}", flush=True)
    # unload the adapters: the next condition loads its own on the same base model
    for name in [n for row in learner.adapter_names for n in row]:
        learner.model.delete_adapter(name)
    return {"adapters": adapters, "points": points, "seconds": time.perf_counter() - t}


def main() -> None:
    import torch

    from coplay.lm.models import load_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--estimator", default="rloo")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--kl-coef", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="2 updates, 1 seed, nothing written")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.updates, args.every, args.seeds = 2, 1, 1
    options = {"episodes": 16, "group_size": 4, "lr": args.lr, "kl_coef": args.kl_coef, "estimator": args.estimator}
    runs = []
    for adapters in ADAPTERS:
        loaded = load_model("smollm2")   # a fresh base model for each condition
        runs.append(curves(adapters, args.seeds, args.updates, args.every, options, loaded))
        data = {**stamp(), "cpu": cpu_model(), "threads": args.threads, "updates": args.updates,
                "every": args.every, "seeds": args.seeds, "options": options, "runs": runs}
        if args.quick:
            print(section(data))
        else:   # each condition as it finishes: a run cut short keeps the conditions it finished
            write_results(RESULTS.removesuffix(".json"), data)
            regenerate_page()


def section(d: dict) -> str:
    from coplay.eval.stats import iqm_ci

    runs, options = d["runs"], d["options"]
    steps = [u for u, _ in runs[0]["points"]]
    rows = []
    for r in runs:
        est = iqm_ci(np.asarray([v for _, v in r["points"]]).T)
        rows.append([r["adapters"], *[f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}]" for e in est],
                     f"{r['seconds'] / 60:.0f}"])
    final = {r["adapters"]: np.asarray(r["points"][-1][1]) for r in runs}
    if set(final) == set(ADAPTERS):
        diff = iqm_ci((final["per_role"] - final["shared"])[:, None])[0]
        last = (f"Final exploitability, per_role minus shared (paired by seed): {diff.value:+.3f} "
                f"[{diff.low:+.3f}, {diff.high:+.3f}].")
    else:
        last = f"**Needs a rerun**: only {', '.join(final)} finished; `{COMMAND}`."
    flags = " ".join(f"algo.{k}={v}" for k, v in options.items())
    return "\n".join([
        "## SmolLM2 learning Kuhn poker: one adapter for both seats, or one per seat", "",
        f"`{COMMAND} --updates {d['updates']} --every {d['every']} --seeds {d['seeds']} --estimator "
        f"{options['estimator']} --lr {options['lr']} --kl-coef {options['kl_coef']}` on {d['machine']}, "
        f"{d['threads']} threads: `algo=lm_grpo algo.model=smollm2 algo.decoding=choose_legal {flags}`. Exact "
        "exploitability of each seed's strategy after each number of updates (0: a Nash equilibrium; the uniform "
        f"strategy's is 0.458), interquartile mean over {d['seeds']} seeds with 95% bootstrap intervals; min: "
        "minutes of training and scoring.", "",
        *table(["adapters", *map(str, steps), "min"], rows), "",
        last,
        "", f"{d['date']}; commit {d['commit']}."])


def load_results() -> dict | None:
    return load(RESULTS)


if __name__ == "__main__":
    main()
