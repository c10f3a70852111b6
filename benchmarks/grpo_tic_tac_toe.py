"""Tic-tac-toe in words: GRPO self-play, then the text policy against random and perfect play.

    python benchmarks/grpo_tic_tac_toe.py                 # 600 updates, 1000 games per seat; writes BENCHMARKS.md
    python benchmarks/grpo_tic_tac_toe.py --opponent random   # trained against the random bot instead
    python benchmarks/grpo_tic_tac_toe.py --quick         # 40 updates, 200 games, nothing written
    python benchmarks/grpo_tic_tac_toe.py --set algo.decoding=legal --name grpo_tic_tac_toe_legal

`algo=grpo` self-play on `text:tic_tac_toe` through `coplay.train` (one model
in both seats, defaults otherwise unless given with --set), or with
`--opponent random|minimax` against that scripted bot (`algo.opponent`: the
learner takes one seat per group, drawn per group). The trained text
policy then plays `tic_tac_toe` itself through `coplay.envs.text.scoring.speaker`
against the uniformly random bot and the perfect one (`minimax`), sampled as in
training; pgx draws who moves first, so each result is split by whether the
text policy moved first. Results go to benchmarks/results/grpo_tic_tac_toe.json
and BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write_section  # noqa: E402
from train_throughput import machine  # noqa: E402

import coplay  # noqa: E402
from coplay.algos.common.bots import tic_tac_toe_minimax  # noqa: E402
from coplay.algos.common.matches import bare_env, make_match, outcomes, random_policy  # noqa: E402
from coplay.envs.text.scoring import speaker  # noqa: E402
from coplay.experiment.playback import load_run  # noqa: E402

EPISODES, STEPS = 64, 9          # episodes per update (defaults), steps reserved per game


def train(updates: int, opponent: str, settings: list[str], out: Path):
    per_update = EPISODES * STEPS
    args = ["algo=grpo", "env=text:tic_tac_toe", "seeds=1", "seed=0", f"total_steps={updates * per_update}",
            f"chunk_steps={updates * per_update // 10}", "eval_episodes=16", "progress=false", "tensorboard=false",
            f"out_dir={out}", "name=ttt", f"algo.opponent={opponent}", *settings]
    t = time.perf_counter()
    result = coplay.train(args)
    seconds = time.perf_counter() - t
    rows = list(csv.DictReader((result.run_dir / "metrics.csv").open()))
    curve = [{"update": int(float(r["env_steps"])) // per_update, "invalid": float(r["invalid"]),
              "entropy": float(r["loss/entropy"]), "zero_advantage": float(r["zero_advantage"])} for r in rows]
    return result.run_dir, seconds, curve


GREEDY = 1e-3   # the temperature of greedy play: the most probable utterance, up to ties


def against_bots(run_dir: Path, games: int, temperature: float | None = None) -> dict:
    """The run's text policy against random and perfect play, sampled as in training
    (`temperature` None) or at `temperature` (GREEDY: its most probable move)."""
    run = load_run(str(run_dir))
    trainer = run.plan.trainer
    if temperature is not None:
        trainer = copy.copy(trainer)
        trainer.config = dataclasses.replace(trainer.config, temperature=temperature)
    policy = trainer.policy()
    text = bare_env(policy.env)
    me = speaker(text, policy)                                      # type: ignore[arg-type]
    params = jax.tree.map(lambda x: x[0], run.params)
    game = text.game                                                # type: ignore[attr-defined]
    out = {}
    for name, bot in (("random", random_policy(game)), ("minimax", tic_tac_toe_minimax(game))):
        first, second = {"win": [], "draw": [], "loss": []}, {"win": [], "draw": [], "loss": []}
        illegal = []
        for seat in (0, 1):
            policies, ps = ([me, bot], [params, None]) if seat == 0 else ([bot, me], [None, params])
            res = jax.device_get(jax.jit(make_match(game, policies, games))(ps, jax.random.PRNGKey(seat)))
            o = outcomes(res["return"], seat)
            moved_first = np.asarray(res["first"]) == seat
            for k in first:
                first[k].extend(np.asarray(o[k])[moved_first].tolist())
                second[k].extend(np.asarray(o[k])[~moved_first].tolist())
            illegal.extend(np.asarray(res["illegal"])[:, seat].tolist())
        out[name] = {"first": {k: float(np.mean(v)) for k, v in first.items()}, "first_games": len(first["win"]),
                     "second": {k: float(np.mean(v)) for k, v in second.items()},
                     "second_games": len(second["win"]), "illegal": float(np.mean(illegal))}
    return out


def table(r: dict, info: str) -> str:
    opponent = r.get("opponent", "self")
    how = "self-play" if opponent == "self" else f"trained against the {opponent} bot"
    command = (f"--updates {r['updates']}" + ("" if opponent == "self" else f" --opponent {opponent}")
               + (f" --set {' '.join(r['settings'])}" if r["settings"] else "")
               + (f" --name {r['name']}" if r.get("name") else ""))
    # `seed=S` given with --set is the run's seed (the last setting of a field wins)
    seed = next((x.split("=", 1)[1] for x in reversed(r["settings"]) if x.startswith("seed=")), "0")
    lines = [
        f"## Tic-tac-toe in words: GRPO {how}{' with ' + ' '.join(r['settings']) if r['settings'] else ''}, "
        "against random and perfect play",
        "",
        f"`python benchmarks/grpo_tic_tac_toe.py {command}` on {info}. `algo=grpo` {how} on "
        f"`text:tic_tac_toe`, defaults{' and ' + ' '.join(r['settings']) if r['settings'] else ''}, "
        f"{r['updates']} updates of {EPISODES} games (seed {seed}, {r['seconds']:.0f} s of training), then "
        f"{2 * r['games']} games per bot in `tic_tac_toe` itself (the text policy through `speaker`, sampled as "
        "in training), split by whether the text policy moved first. Illegal: games it lost by an utterance "
        "that names no free square.",
        "",
        "| opponent | moved first: win / draw / loss | moved second: win / draw / loss | illegal |",
        "|---|---|---|---|",
    ]
    plays = [("", r["bots"])] + ([(" (greedy)", r["bots_greedy"])] if "bots_greedy" in r else [])
    for how_played, bots in plays:
        for name, v in bots.items():
            f, s = v["first"], v["second"]
            lines.append(f"| {name}{how_played} | {f['win']:.3f} / {f['draw']:.3f} / {f['loss']:.3f} "
                         f"(n={v['first_games']}) | {s['win']:.3f} / {s['draw']:.3f} / {s['loss']:.3f} "
                         f"(n={v['second_games']}) | {v['illegal']:.3f} |")
    if "bots_greedy" in r:
        lines += ["", f"Greedy: the same policy playing its most probable move (temperature {GREEDY:g})."]
    lines += ["", "Training (per tenth of the run): invalid utterances per turn, token entropy, share of turns "
              "whose group gave no signal:", "",
              "| update | invalid | entropy | zero advantage |", "|---|---|---|---|"]
    for c in r["curve"]:
        lines.append(f"| {c['update']} | {c['invalid']:.3f} | {c['entropy']:.3f} | {c['zero_advantage']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=600)
    parser.add_argument("--games", type=int, default=500, help="games per seat per bot")
    parser.add_argument("--opponent", default="self", choices=("self", "random", "minimax"),
                        help="who the learner trains against (algo.opponent)")
    parser.add_argument("--set", nargs="*", default=[], help="extra overrides, e.g. algo.ent_coef=0.03")
    parser.add_argument("--quick", action="store_true", help="40 updates, 100 games, nothing written")
    parser.add_argument("--name", default=None, help="results file and BENCHMARKS.md section (default: "
                                                      "grpo_tic_tac_toe, with _vs_<opponent> against a bot)")
    a = parser.parse_args()
    updates, games = (40, 100) if a.quick else (a.updates, a.games)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, seconds, curve = train(updates, a.opponent, a.set, Path(tmp))
        bots = against_bots(run_dir, games)
        greedy = against_bots(run_dir, games, GREEDY)
    r = {"updates": updates, "games": games, "opponent": a.opponent, "settings": a.set, "seconds": seconds,
         "curve": curve, "bots": bots, "bots_greedy": greedy, "name": a.name}
    text = table(r, machine())
    print(text)
    if not a.quick:
        (ROOT / "benchmarks" / "results").mkdir(exist_ok=True)
        name = a.name or "grpo_tic_tac_toe" + ("" if a.opponent == "self" else f"_vs_{a.opponent}")
        (ROOT / "benchmarks" / "results" / f"{name}.json").write_text(json.dumps(r, indent=2))
        write_section(name, text)


if __name__ == "__main__":
    main()
