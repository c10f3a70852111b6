"""A tournament on Kuhn poker: language models before and after training beside a text
policy trained from scratch, a PPO policy and the random bot.

    python benchmarks/lm_tournament.py [--games 100] [--lm-updates 150] [--smollm2]

Players, all seated in `tree:kuhn_poker` (the text policies through the game's words):
- `tiny`: the tiny model (`algo.model=tiny`, random weights) before training, `decoding=choose_legal`;
- `tiny+lm_grpo`: the same model after `--lm-updates` updates of `algo=lm_grpo` self-play;
- `grpo`: a token-level policy trained from scratch by `algo=grpo` (the configuration of the
  README's Kuhn figures);
- `ppo`: `algo=selfplay_ppo` on `tree:kuhn_poker`;
- `random`: the scripted bot;
- with `--smollm2`: SmolLM2-135M-Instruct before training, `decoding=choose_legal` and free
  (its free replies that name no legal move forfeit).
Every model's exact exploitability is listed beside the table. Writes the `lm_tournament`
section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import jax
import numpy as np
from _common import cpu_model, regenerate_page, stamp, table, write_results

import coplay
from coplay.algos.common.bots import make_bot
from coplay.envs.text.scoring import score_lm_player, score_text_policy, speaker
from coplay.eval.round_robin import Player, round_robin
from coplay.eval.tables import format_table, ratings_table, win_draw_loss_table
from coplay.experiment.playback import load_run
from coplay.lm.acting import lm_policy
from coplay.lm.models import load_model, tiny_model
from coplay.lm.policy import LMPlayer

RESULTS = "lm_tournament.json"
LM = ["algo=lm_grpo", "algo.model=tiny", "algo.decoding=choose_legal", "algo.estimator=rae", "algo.episodes=32",
      "algo.group_size=4", "algo.lr=3e-3", "algo.kl_coef=1.0"]
GRPO = ["algo=grpo", "algo.decoding=legal", "algo.estimator=dr_grpo", "algo.kl_coef=0.2",
        "algo.reference_every=100", "algo.lr=3e-4", "algo.anneal_lr=true", "algo.layers=1", "algo.width=32"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=100, help="games per seated pair")
    ap.add_argument("--lm-updates", type=int, default=150)
    ap.add_argument("--grpo-updates", type=int, default=1000)
    ap.add_argument("--ppo-steps", type=int, default=300_000)
    ap.add_argument("--smollm2", action="store_true")
    args = ap.parse_args()
    text = coplay.make("text:kuhn_poker")
    game = text.game
    out = tempfile.mkdtemp(prefix="lm_tournament-")
    common = ["seeds=1", "progress=false", "logger=csv", f"out_dir={out}"]
    t0 = time.perf_counter()
    lm_run = coplay.train([*LM, "env=text:kuhn_poker",
                           f"total_steps={args.lm_updates * 96}", f"chunk_steps={args.lm_updates * 96}",
                           "eval_episodes=8", *common])
    grpo_run = coplay.train([*GRPO, "env=text:kuhn_poker", f"total_steps={args.grpo_updates * 192}",
                             f"chunk_steps={args.grpo_updates * 192}", *common])
    ppo_run = coplay.train(["algo=selfplay_ppo", "env=tree:kuhn_poker", f"total_steps={args.ppo_steps}",
                            f"chunk_steps={args.ppo_steps}", *common])
    train_s = time.perf_counter() - t0

    exploit: dict[str, float] = {}
    players: list[Player] = []
    before = LMPlayer(tiny_model(), text, decoding="choose_legal")
    exploit["tiny"] = float(score_lm_player(text, before).exploitability)
    players.append(Player("tiny", speaker(text, lm_policy(before)), np.int32(0)))
    after = load_run(lm_run.run_dir)
    exploit["tiny+lm_grpo"] = float(lm_run.summary["final"]["exploitability"]["iqm"])
    players.append(Player("tiny+lm_grpo", speaker(text, after.policy), after.params[0]))
    grpo = load_run(grpo_run.run_dir)
    grpo_params = jax.tree.map(lambda x: x[0], grpo.params)
    trainer = grpo.engine.learner
    exploit["grpo"] = float(score_text_policy(text, trainer.model, grpo_params, legal_only=True).exploitability)
    players.append(Player("grpo", speaker(text, grpo.policy), grpo_params))
    ppo = load_run(ppo_run.run_dir)
    players.append(Player("ppo", ppo.policy, jax.tree.map(lambda x: x[0], ppo.params)))
    if args.smollm2:
        smol = load_model("smollm2")
        for decoding in ("choose_legal", "free"):
            p = LMPlayer(smol, text, decoding=decoding, max_new_tokens=8)
            exploit[f"smollm2 ({decoding})"] = float(score_lm_player(text, p).exploitability)
            players.append(Player(f"smollm2 ({decoding})", speaker(text, lm_policy(p)), np.int32(0)))
    players.append(Player("random", make_bot("random", game)))

    t0 = time.perf_counter()
    results = round_robin(game, players, args.games, jax.random.PRNGKey(0))
    play_s = time.perf_counter() - t0
    rows = ratings_table(results, reps=1000, seed=0)
    pairs = win_draw_loss_table(results)
    illegal = {} if results.illegal is None else dict(zip(results.players, results.illegal.sum(1).tolist()))
    write_results("lm_tournament", {**stamp(), "cpu": cpu_model(), "games": args.games, "lm_updates": args.lm_updates,
                                    "grpo_updates": args.grpo_updates, "ppo_steps": args.ppo_steps,
                                    "smollm2": args.smollm2, "lm_config": LM, "grpo_config": GRPO,
                                    "exploitability": exploit,
                                    "ratings": [r.as_dict() for r in rows], "pairs": [p.as_dict() for p in pairs],
                                    "illegal_losses": illegal, "train_s": train_s, "play_s": play_s})
    regenerate_page()
    print(format_table(rows))


def section(d: dict) -> str:
    listed = ", ".join(f"{k} {v:.3f}" for k, v in d["exploitability"].items())
    lost = ", ".join(f"{k} {v}" for k, v in d["illegal_losses"].items() if v)
    flags = "".join(f" --{k.replace('_', '-')} {d[k]}" for k in ("lm_updates", "grpo_updates", "ppo_steps") if k in d)
    smol = d.get("smollm2", any("smollm2" in k for k in d["exploitability"]))
    configs = (f"`tiny+lm_grpo`: `{' '.join(d['lm_config'])}`; `grpo`: `{' '.join(d['grpo_config'])}`; "
               if "lm_config" in d else "`tiny+lm_grpo` and `grpo`: the script's `LM` and `GRPO` settings (the results "
               "file does not record which they were); ")
    ci = lambda r, k, f: f"[{r[k + '_ci_low']:{f}}, {r[k + '_ci_high']:{f}}]"  # noqa: E731
    ratings = [[i + 1, r["player"], f"{r['elo']:.0f}", ci(r, "elo", ".0f"), f"{r['mu']:.2f}", f"{r['sigma']:.2f}",
                f"{r['ordinal']:.2f}", r["games"], f"{r['score']:.3f}", ci(r, "score", ".3f")]
               for i, r in enumerate(d["ratings"])]
    pairs = [[p["player"], p["opponent"], p["games"],
              *[f"{p[k + '_rate']:.3f} {ci(p, k, '.3f')}" for k in ("wins", "draws", "losses", "score")]]
             for p in d["pairs"]]
    return "\n".join([
        "## Kuhn poker: language models before and after training, a text policy, PPO, random", "",
        f"`python benchmarks/lm_tournament.py --games {d['games']}{flags}{' --smollm2' if smol else ''}` on "
        f"{d.get('machine', d['cpu'])}. Played in `tree:kuhn_poker`, {d['games']} games per seated pair; the text "
        f"policies speak through the game's words. {configs}`ppo`: `algo=selfplay_ppo`. Training took "
        f"{d['train_s']:.0f} s, the tournament {d['play_s']:.0f} s.", "",
        f"Exact exploitability of each text policy: {listed}.", "",
        *table(["rank", "player", "Elo", "Elo 95% CI", "mu", "sigma", "ordinal", "games", "score", "score 95% CI"],
               ratings), "",
        *table(["player", "opponent", "games", "win", "draw", "loss", "score"], pairs), "",
        f"Games lost by an illegal move: {lost or 'none'}."])


def claims(data: dict) -> list[dict]:
    return []

if __name__ == "__main__":
    main()
