"""SmolLM2-135M-Instruct at TextArena's tables: the games SPIRAL trains on, seated beside
scripted bots (and, in coplay's Kuhn poker through TextArena's loop, a coplay text policy).

    coplay lm fetch-smollm2                  # once
    python benchmarks/lm_textarena.py        # about 10 minutes on 2 cores
    python benchmarks/lm_textarena.py --quick

For each game, `--games` games of `coplay.eval.text_match.play_matches` among SmolLM2
(`LMTextAgent("smollm2")`: the game's messages as its user message, free decoding at
temperature 1, at most 24 new tokens, the reply's first line), `random_legal` (a uniformly
drawn legal move) and `first_legal`; in coplay's `text:kuhn_poker` played through
TextArena's loop, a token-level policy trained by `algo=grpo` (`--grpo-updates`) takes the
third seat instead of `first_legal`. Game g seats the g-th ordering of the agents, so each
plays every seat. Per agent: the game's reward (mean, 95% normal interval over its
games), wins and invalid moves per reply.

Writes benchmarks/results/lm_textarena.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, regenerate_page, stamp, write_results  # noqa: E402

RESULTS = "lm_textarena.json"
COMMAND = "python benchmarks/lm_textarena.py"
GAMES = ("textarena:KuhnPoker-v0", "textarena:TicTacToe-v0", "textarena:SimpleNegotiation-v0")
GRPO = ["algo=grpo", "env=text:kuhn_poker", "algo.decoding=legal", "algo.estimator=dr_grpo", "algo.kl_coef=0.2",
        "algo.reference_every=100", "algo.lr=3e-4", "algo.layers=1", "algo.width=32", "seeds=1"]


def main() -> None:
    import jax
    import torch

    import coplay
    from coplay.eval.text_match import PolicyTextAgent, first_legal, play_matches, random_legal
    from coplay.experiment.playback import load_run
    from coplay.interop.textarena import coplay_game
    from coplay.lm.text_agent import LMTextAgent

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", type=int, default=24)
    ap.add_argument("--grpo-updates", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.games, args.grpo_updates = 3, 4
    lm = LMTextAgent("tiny" if args.quick else "smollm2", seed=0, max_new_tokens=24,
                     name="tiny" if args.quick else "SmolLM2-135M-Instruct")
    tables = []
    t0 = time.perf_counter()
    for name in GAMES:
        t = time.perf_counter()
        result = play_matches(coplay.make(name), [lm, random_legal, first_legal], games=args.games, seed=0)
        tables.append({"game": name, "seconds": time.perf_counter() - t, **_rows(result)})
        print(name, result.table(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        env = coplay.make("text:kuhn_poker")
        steps = args.grpo_updates * 64 * env.spec.max_steps   # the default 64 episodes of an update
        run = coplay.train([*GRPO, f"total_steps={steps}", "progress=false", "logger=csv", f"out_dir={tmp}",
                            "eval_episodes=16"])
        loaded = load_run(run.run_dir)
        policy = PolicyTextAgent(loaded.policy, jax.tree.map(lambda x: x[0], loaded.params), env,
                                 name=f"grpo ({args.grpo_updates} updates)")
        t = time.perf_counter()
        result = play_matches(lambda: coplay_game("text:kuhn_poker"), [lm, random_legal, policy], games=args.games,
                              seed=0)
        tables.append({"game": "text:kuhn_poker through TextArena's loop", "seconds": time.perf_counter() - t,
                       **_rows(result)})
        print(result.table(), flush=True)
    data = {"tables": tables, "games": args.games, "grpo_updates": args.grpo_updates, "threads": args.threads,
            "seconds": time.perf_counter() - t0, **stamp()}
    if args.quick:
        print(section(data))
        return
    write_results(RESULTS.removesuffix(".json"), data)
    regenerate_page()


def _rows(result) -> dict:
    rows = []
    for i, name in enumerate(result.names):
        mean, half = result.mean(i)
        rows.append({"agent": name, "games": len(result.rewards[i]), "reward": mean, "half": half,
                     "wins": result.wins[i], "invalid": result.invalid[i] / max(1, result.replies[i]),
                     "dropped": result.dropped[i]})
    return {"rows": rows, "statuses": result.statuses}


def section(d: dict) -> str:
    lines = ["## A pretrained language model at TextArena's tables", "",
             f"`{COMMAND} --games {d['games']} --grpo-updates {d['grpo_updates']}` on {d['machine']}, "
             f"{d['threads']} threads. SmolLM2-135M-Instruct (`coplay.lm.text_agent.LMTextAgent`, free decoding, "
             "temperature 1, at most 24 new tokens) beside scripted bots in the games SPIRAL trains on, and in "
             "coplay's Kuhn poker played through TextArena's loop beside a token-level policy trained by "
             "`algo=grpo`. Reward: the game's own, mean over the agent's games with a 95% normal interval; "
             "invalid: invalid moves per reply (TextArena lets a player retry once, then its rule for a repeated "
             "invalid move applies; coplay's Kuhn poker forfeits at once).", ""]
    for tab in d["tables"]:
        lines += [f"**{tab['game']}** ({tab['seconds']:.0f} s)", "",
                  "| agent | games | reward (95% CI) | wins | invalid per reply |", "|---|---|---|---|---|"]
        lines += [f"| {r['agent']} | {r['games']} | {r['reward']:+.2f} ± {r['half']:.2f} | {r['wins']} | "
                  f"{r['invalid']:.2f} |" for r in tab["rows"]]
        lines.append("")
    lines.append(f"{d['date']}; commit {d['commit']}; {d['seconds'] / 60:.0f} min.")
    return "\n".join(lines)


def load_results() -> dict | None:
    return load(RESULTS)


if __name__ == "__main__":
    main()
