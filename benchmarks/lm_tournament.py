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
from _common import cpu_model, write_results, write_section

import coplay
from coplay.algos.common.bots import make_bot
from coplay.eval.ratings import format_table, ratings_table, win_draw_loss_table
from coplay.eval.round_robin import Player, round_robin
from coplay.envs.text.scoring import score_lm_player, score_text_policy, speaker
from coplay.experiment.playback import load_run
from coplay.lm.acting import lm_policy
from coplay.lm.models import load_model, tiny_model
from coplay.lm.policy import LMPlayer

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
    common = ["seeds=1", "progress=false", "tensorboard=false", f"out_dir={out}"]
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
    trainer = grpo.plan.trainer
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
    write_results("lm_tournament", {"cpu": cpu_model(), "games": args.games, "exploitability": exploit,
                                    "ratings": [r.as_dict() for r in rows], "pairs": [p.as_dict() for p in pairs],
                                    "illegal_losses": illegal, "train_s": train_s, "play_s": play_s})
    listed = ", ".join(f"{k} {v:.3f}" for k, v in exploit.items())
    lost = ", ".join(f"{k} {v}" for k, v in illegal.items() if v)
    write_section("lm_tournament", f"""## Kuhn poker: language models before and after training, a text policy, PPO, random

`python benchmarks/lm_tournament.py --games {args.games} --lm-updates {args.lm_updates} --grpo-updates \
{args.grpo_updates} --ppo-steps {args.ppo_steps}{' --smollm2' if args.smollm2 else ''}` on {cpu_model()}.
Played in `tree:kuhn_poker`, {args.games} games per seated pair; the text policies speak through the game's words.
`tiny+lm_grpo`: `{' '.join(LM)}`, {args.lm_updates} updates;
`grpo`: `{' '.join(GRPO)}`, {args.grpo_updates} updates; `ppo`: `algo=selfplay_ppo`, {args.ppo_steps} steps.
Training took {train_s:.0f} s, the tournament {play_s:.0f} s.

Exact exploitability of each text policy: {listed}.

{format_table(rows)}

{format_table(pairs)}

Games lost by an illegal move: {lost or 'none'}.
""")
    print(format_table(rows))


if __name__ == "__main__":
    main()
