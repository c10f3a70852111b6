"""Tic-tac-toe in words: GRPO self-play, then the text policy against random and perfect play.

    python benchmarks/grpo_tic_tac_toe.py                 # 600 updates, 500 games per seat and bot
    python benchmarks/grpo_tic_tac_toe.py --opponent random   # trained against the random bot instead
    python benchmarks/grpo_tic_tac_toe.py --quick         # 40 updates, 200 games, nothing written
    python benchmarks/grpo_tic_tac_toe.py --set algo.decoding=legal seed=1 --name legal_seed1

`algo=grpo` self-play on `text:tic_tac_toe` through `coplay.train` (one model
in both seats, defaults otherwise unless given with --set), or with
`--opponent random|minimax` against that scripted bot (`algo.opponent`: the
learner takes one seat per group, drawn per group). The trained text
policy then plays `tic_tac_toe` itself through `coplay.envs.text.scoring.speaker`
against the uniformly random bot and the perfect one (`minimax`), sampled as in
training; pgx draws who moves first, so each result is split by whether the
text policy moved first. Each run is one file of the study
benchmarks/results/grpo_tic_tac_toe/ (`--name`), which enters BENCHMARKS.md
(benchmarks/page.py) as one table: configurations over seeds.
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, regenerate_page, stamp, table, write_results  # noqa: E402

import coplay  # noqa: E402
from coplay.algos.common.bots import tic_tac_toe_minimax  # noqa: E402
from coplay.algos.common.matches import bare_env, make_match, outcomes, random_policy  # noqa: E402
from coplay.envs.text.scoring import speaker  # noqa: E402
from coplay.experiment.playback import load_run  # noqa: E402

EPISODES, STEPS = 64, 9          # episodes per update (defaults), steps reserved per game


def train(updates: int, opponent: str, settings: list[str], out: Path):
    per_update = EPISODES * STEPS
    args = ["algo=grpo", "env=text:tic_tac_toe", "seeds=1", "seed=0", f"total_steps={updates * per_update}",
            f"chunk_steps={updates * per_update // 10}", "eval_episodes=16", "progress=false", "logger=csv",
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
    trainer = run.engine.learner
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


def run_table(r: dict, info: str) -> str:
    """One run's results, printed when it ends (the page gives the study's summary)."""
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
    parser.add_argument("--name", default=None, help="the run's file in benchmarks/results/grpo_tic_tac_toe/ "
                                                      "(default: defaults, or vs_<opponent> against a bot)")
    a = parser.parse_args()
    updates, games = (40, 100) if a.quick else (a.updates, a.games)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, seconds, curve = train(updates, a.opponent, a.set, Path(tmp))
        bots = against_bots(run_dir, games)
        greedy = against_bots(run_dir, games, GREEDY)
    r = {"updates": updates, "games": games, "opponent": a.opponent, "settings": a.set, "seconds": seconds,
         "curve": curve, "bots": bots, "bots_greedy": greedy, "name": a.name}
    print(run_table(r, machine()))
    if not a.quick:
        name = a.name or ("defaults" if a.opponent == "self" else f"vs_{a.opponent}")
        write_results(f"grpo_tic_tac_toe/{name}", {**stamp(), **r, "name": name})
        regenerate_page()



# ----- the page ----------------------------------------------------------------------------------------------

RESULTS = "grpo_tic_tac_toe/"
WIN_BAR, DRAW_BAR = 0.9, 0.5     # the bars, as first player: wins against random, draws against perfect play


def _seed(r: dict) -> int:
    """`seed=S` given with --set is the run's seed (the last setting of a field wins); 0 otherwise."""
    return int(next((x.split("=", 1)[1] for x in reversed(r["settings"]) if x.startswith("seed=")), "0"))


def _config(r: dict) -> str:
    opponent = r.get("opponent", "self")
    how = "self-play" if opponent == "self" else f"against the {opponent} bot"
    rest = [x for x in r["settings"] if not x.startswith("seed=")]
    return how + (", " + " ".join(f"`{x}`" for x in rest) if rest else ", defaults")


def section(data: dict) -> str:
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in data.values():
        groups.setdefault((_config(r), r["updates"]), []).append(r)
    rows = []
    for (config, updates), runs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        runs = sorted(runs, key=_seed)

        def per_seed(bots: str, opponent: str, what: str, runs: list[dict] = runs) -> str:
            vals = [r[bots][opponent]["first"][what] if bots in r else None for r in runs]
            return ", ".join("–" if v is None else f"{v:.2f}" for v in vals)

        met = sum(r["bots"]["random"]["first"]["win"] >= WIN_BAR and r["bots"]["minimax"]["first"]["draw"] >= DRAW_BAR
                  for r in runs)
        rows.append([config, updates, ", ".join(str(_seed(r)) for r in runs),
                     per_seed("bots", "random", "win"), per_seed("bots", "minimax", "draw"),
                     per_seed("bots_greedy", "random", "win"), per_seed("bots_greedy", "minimax", "draw"),
                     f"{met} of {len(runs)}", ", ".join(f"{max(r['bots'][b]['illegal'] for b in r['bots']):.2f}"
                                                      for r in runs),
                     ", ".join(f"{r['curve'][-1]['zero_advantage']:.2f}" for r in runs)])
    machines = sorted({r["machine"] for r in data.values() if "machine" in r})
    return "\n".join([
        "## Tic-tac-toe in words: GRPO self-play against random and perfect play", "",
        f"A study of {len(data)} runs (`benchmarks/results/grpo_tic_tac_toe/`; its README gives the question and "
        "the commands): `algo=grpo` on `text:tic_tac_toe` (self-play, one model in both seats, unless trained "
        "against a bot), `python benchmarks/grpo_tic_tac_toe.py --updates U --set <settings> seed=S`, 64 games per "
        "update, then 1000 games per bot in `tic_tac_toe` itself (the text policy through `speaker`), sampled as "
        "in training and (where measured) greedily. Per seed, as first player: wins against the uniformly random "
        f"bot and draws against the perfect one (`minimax`); the issue's bars are {WIN_BAR:.0%} wins and "
        f"{DRAW_BAR:.0%} draws, both met (sampled) in the seeds counted. Illegal: the larger share of games lost "
        "by an utterance that names no free square, of the two bots; zero advantage: the share of turns, in the "
        "last tenth of training, whose group gave no signal."
        + (f" Machines: {'; '.join(machines)}." if machines else ""), "",
        *table(["configuration", "updates", "seeds", "wins vs random", "draws vs perfect", "greedy: wins vs random",
                "greedy: draws vs perfect", "both bars", "illegal", "zero advantage at the end"], rows)])


def claims(data: dict) -> list[dict]:
    return []


if __name__ == "__main__":
    main()
