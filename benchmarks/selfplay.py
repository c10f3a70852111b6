"""Self-play throughput in games per second on tic-tac-toe and connect four:
coplay beside OpenSpiel, PettingZoo and pgx, in one run.

    python benchmarks/selfplay.py                          # both games, every peer
    python benchmarks/selfplay.py --quick                  # short timings, no table written
    python benchmarks/selfplay.py --games connect_four --num-envs 256 --episodes 512
    python benchmarks/selfplay.py --skip-peers openspiel,pettingzoo

Before and after a change: `benchmarks/selfplay_paired.py` times two checkouts in
alternation (a figure from an earlier run is never divided by one of this run).

Rows, for each game (coplay's envs are `coplay.make(name)`, which wrap pgx):

- coplay self-play training: `selfplay_ppo.SelfPlayPPO` with its default config
  (`--num-envs` parallel games), `--updates` updates per compiled call as
  `lax.scan(trainer.update)`, as the experiment runner does. One update is a
  rollout of every game against an opponent drawn per game from the snapshot
  pool, then the PPO epochs on the learner's seat. Games are the games that
  ended in the call (`metrics["episodes"]`), env steps are num_envs x
  rollout_len per update. This row includes learning.
- coplay training rollout only: the same rollout (the trainer's acting
  function, opponents gathered per game from the pool) without the PPO update,
  to show where the training step's time goes. The update's share is the
  training time minus this.
- coplay self-play playing: `make_match(env, [policy, policy], episodes)`
  with the trainer's policy and the same parameters in both seats; each call
  plays `--episodes` complete games (max_steps steps, no auto-reset).
  Inference only.
- coplay random legal play: the same match with `random_policy` in both seats
  (the environment wrapper without a network). Its note gives its time per game
  as a multiple of the pgx loop's below.
- pgx random legal play: `jit(lax.scan(vmap(pgx_env.step)))` over
  `--episodes` games with uniformly random legal moves drawn inside the
  compiled loop by coplay's `sample_from_mask` (one random number per game),
  every step's keys split before the loop, and each game's return summed as
  `make_match` does: the environment alone, an upper bound for everything above.
  It and the coplay random-play row are timed in alternation, one call of each
  per round, for at least `--repeats` rounds and `--min-seconds` (calls take
  about a millisecond at tic-tac-toe, so a few calls each, timed apart, would
  mostly measure the machine's load at the time).
- pgx random legal play, Gumbel-max: the same loop drawing the moves with
  `jax.random.categorical` over the legal mask (a Gumbel draw per action: pgx's
  own `act_randomly` idiom, and how coplay sampled before), to show what the
  sampling alone costs.
- OpenSpiel: `pyspiel.load_game(name)` played to the end with random legal
  moves from a Python loop (`legal_actions`, `apply_action`), one game at a time.
- PettingZoo classic `tictactoe_v3` / `connect_four_v3` AEC env, random legal
  moves from the action mask, one game at a time.

Env steps are moves played (one move of one game). Every row is prepared first
(compiled and called once, untimed), then all are timed in rounds, one
measurement of each row per round, in turn, `--repeats` rounds: a JAX row's
measurement is one call, a Python row's a timing of games played until
`--min-seconds` have passed. A row's rate is its median over rounds; its ratio
to OpenSpiel's loop is the median of the per-round ratios (range in brackets).
A peer that is not installed, or skipped with `--skip-peers`, gets a row saying
so. Results go to benchmarks/results/selfplay.json, then BENCHMARKS.md
(benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    alternate,
    fmt_ratio,
    paired,
    regenerate_page,
    stamp,
    table,
    version,
    write_results,
)

RESULTS = "selfplay.json"
GAMES = {
    # coplay / pgx / OpenSpiel name, PettingZoo classic module
    "tic_tac_toe": "tictactoe_v3",
    "connect_four": "connect_four_v3",
}
TRAIN = "coplay self-play training (rollout vs pool + PPO update)"
ROLLOUT = "coplay training rollout only (vs pool, no update)"
PLAYING = "coplay self-play playing (policy vs policy, inference)"
OPENSPIEL = "OpenSpiel, Python loop"
RANDOM = "coplay random legal play (make_match, random_policy)"
PGX_RANDOM = "pgx random legal play (jit, vmap)"
PGX_GUMBEL = "pgx random legal play, Gumbel-max draws (jax.random.categorical)"
MAX_ROUNDS = 5000  # rounds of alternating random-play calls at most (about 3 ms a round at tic-tac-toe)
PEERS = ("openspiel", "pettingzoo")


def timed(call, games, steps):
    """A JAX row's measurement: `call()` once, timed -> (seconds, games, steps); `games` and
    `steps` are numbers, or functions of the call's output."""
    import jax

    start = time.perf_counter()
    out = jax.block_until_ready(call())
    seconds = time.perf_counter() - start
    return (seconds, float(games(out)) if callable(games) else float(games),
            float(steps(out)) if callable(steps) else float(steps))


def rates(timings: list[tuple[float, float, float]]) -> dict:
    """[(seconds, games, steps)] per measurement -> median games/s and steps/s."""
    return {"games_per_s": statistics.median(g / s for s, g, _ in timings),
            "steps_per_s": statistics.median(n / s for s, _, n in timings),
            "seconds_per_call": statistics.median(s for s, _, _ in timings)}


# ----------------------------------------------------------------------------- coplay


def coplay_rows(env, num_envs: int, updates: int, episodes: int, training: bool) -> dict:
    """{row: (measure, note)} of coplay's training, its rollout alone and its policy playing itself; the
    training chunk is compiled and called once here. Each measure returns (seconds, games, steps)."""
    import jax
    import jax.numpy as jnp

    from coplay.algos import selfplay_ppo
    from coplay.algos.common.matches import make_match
    from coplay.algos.common.rollout import rollout

    config = selfplay_ppo.Config(num_envs=num_envs)
    trainer = selfplay_ppo.SelfPlayPPO(config, env, num_updates=updates * 1000)
    box = {"state": trainer.init(jax.random.PRNGKey(0))}
    rows = {}
    if training:
        chunk = jax.jit(lambda s: jax.lax.scan(lambda s, _: trainer.update(s), s, None, length=updates),
                        donate_argnums=0)
        start = time.perf_counter()
        box["state"], _ = jax.block_until_ready(chunk(box["state"]))
        box["compile_s"] = time.perf_counter() - start

        def train():
            start = time.perf_counter()
            box["state"], metrics = jax.block_until_ready(chunk(box["state"]))
            return time.perf_counter() - start, float(np.sum(metrics["episodes"])), updates * trainer.steps_per_update

        rows[TRAIN] = (train, f"{num_envs} games x {config.rollout_len} steps per update, {updates} updates per call")

        # The rollout alone, as the update runs it (the trainer's own acting function), from the
        # latest trained state, so that games are as long and as far along as in the timed updates.
        # It reaches into the trainer (`_act`), so it is skipped if that changes.
        try:
            def roll(s):
                act = lambda carry, ts, k: trainer._act(s.params, s.pool, carry, ts, k)  # noqa: E731
                _, traj = rollout(trainer.env, act, s.env_state, s.ts, (s.seat, s.opponent, s.opening), s.key,
                                  config.rollout_len)
                return jnp.sum(traj.done)

            roll = jax.jit(roll)
            jax.block_until_ready(roll(box["state"]))
            rows[ROLLOUT] = (lambda: timed(lambda: roll(box["state"]), lambda d: d, trainer.steps_per_update),
                             "share of the training step's time: see below")
        except (AttributeError, TypeError) as e:  # the trainer's internals moved on
            print(f"rollout-only timing skipped: {e!r}", flush=True)
    policy = trainer.policy()
    play = jax.jit(make_match(env, [policy, policy], episodes=episodes))
    keys = iter(list(jax.random.split(jax.random.PRNGKey(1), MAX_ROUNDS + 2)))
    def current():            # the trainer's latest parameters (a training call donates the state it is given)
        params = trainer.policy_params(box["state"])
        return [params, params]

    finished(jax.block_until_ready(play(current(), next(keys))))
    rows[PLAYING] = (lambda: timed(lambda: finished(play(current(), next(keys))), episodes,
                                   lambda out: np.sum(out["length"])),
                     f"{episodes} games per call, the trainer's network in both seats")
    return rows, box


def finished(out: dict) -> dict:
    """A `make_match` result whose every game finished (asserted)."""
    unfinished = int(np.sum(~np.asarray(out["finished"])))
    assert unfinished == 0, f"{unfinished} games did not finish within max_steps"
    return out


def random_play(env, name: str, episodes: int) -> dict:
    """{row: (measure, note)}: coplay's random play and pgx's loops, compiled and called once."""
    import jax

    from coplay.algos.common.matches import make_match, random_policy

    play = jax.jit(make_match(env, [random_policy(env), random_policy(env)], episodes=episodes))
    pgx_play, pgx_gumbel = pgx_loop(name, episodes), pgx_loop(name, episodes, gumbel_from_mask)
    # Keys made before any timing, so that no call times the making of its key.
    keys = {k: iter(list(jax.random.split(jax.random.PRNGKey(i), MAX_ROUNDS * 2 + 2))) for i, k in enumerate("abc")}
    finished(jax.block_until_ready(play([None, None], next(keys["a"]))))
    jax.block_until_ready(pgx_play(next(keys["b"])))
    jax.block_until_ready(pgx_gumbel(next(keys["c"])))
    note = f"{episodes} games per call"
    return {RANDOM: (lambda: timed(lambda: finished(play([None, None], next(keys["a"]))), episodes,
                                   lambda out: np.sum(out["length"])), note),
            PGX_RANDOM: (lambda: timed(lambda: pgx_finished(pgx_play(next(keys["b"])), episodes), episodes,
                                       lambda out: out[0]), note),
            PGX_GUMBEL: (lambda: timed(lambda: pgx_finished(pgx_gumbel(next(keys["c"])), episodes), episodes,
                                       lambda out: out[0]), note)}


def pgx_finished(out, episodes: int):
    assert int(out[1]) == episodes, "pgx games did not finish"
    return out


# ----------------------------------------------------------------------------- pgx


def gumbel_from_mask(key, mask):
    """A uniformly random True entry of each row by Gumbel-max: one draw per entry."""
    import jax
    import jax.numpy as jnp

    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf), axis=-1).astype(jnp.int32)


def pgx_loop(name: str, episodes: int, sampler=None):
    """`play(key) -> (moves, games ended, returns)`: `episodes` games of pgx's `name`, compiled."""
    import jax
    import jax.numpy as jnp
    import pgx

    import coplay
    from coplay.algos.common.matches import sample_from_mask

    sampler = sampler or sample_from_mask
    env = pgx.make(name)
    horizon = coplay.make(name).spec.max_steps

    def play(key):
        k_init, k_run = jax.random.split(key)
        state = jax.vmap(env.init)(jax.random.split(k_init, episodes))

        def body(carry, keys):
            state, returns = carry
            live = ~(state.terminated | state.truncated)
            action = sampler(keys[0], state.legal_action_mask)
            state = jax.vmap(env.step)(state, action, jax.random.split(keys[1], episodes))
            # pgx pays nothing after the end, so the returns need no mask.
            return (state, returns + state.rewards), jnp.sum(live)

        start = (state, jnp.zeros_like(state.rewards))
        (state, returns), moves = jax.lax.scan(body, start, jax.random.split(k_run, (horizon, 2)))
        return jnp.sum(moves), jnp.sum(state.terminated), returns

    return jax.jit(play)


# ----------------------------------------------------------------------------- Python peers


def python_timing(play_one, min_seconds: float):
    """A Python row's measurement: games played one at a time until `min_seconds` -> (seconds, games, moves)."""
    games = moves = 0
    start = time.perf_counter()
    while time.perf_counter() - start < min_seconds:
        moves += play_one()
        games += 1
    return time.perf_counter() - start, games, moves


def openspiel_game(name: str):
    """`play_one() -> moves` of OpenSpiel's `name` with random legal moves, or a reason it is missing."""
    try:
        import pyspiel
    except ImportError:
        return "not installed (pip install open_spiel)"
    game = pyspiel.load_game(name)
    rng = random.Random(0)

    def play_one() -> int:
        state, moves = game.new_initial_state(), 0
        while not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
            moves += 1
        return moves

    return play_one


def pettingzoo_game(module: str):
    try:
        import importlib

        env = importlib.import_module(f"pettingzoo.classic.{module}").env()
    except ImportError:
        return 'not installed (pip install "pettingzoo[classic]")'
    rng = np.random.default_rng(0)

    def play_one() -> int:
        env.reset(seed=int(rng.integers(1 << 30)))
        moves = 0
        for _agent in env.agent_iter():
            obs, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                action = None
            else:
                action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                moves += 1
            env.step(action)
        return moves

    return play_one


# ----------------------------------------------------------------------------- main


def versions() -> dict:
    return {d: version(d) or "not installed" for d in ("pgx", "open_spiel", "pettingzoo")}


def one_game(name: str, args, skip: set[str]) -> list[dict]:
    import coplay

    env = coplay.make(name)
    rows, box = coplay_rows(env, args.num_envs, args.updates, args.episodes, not args.no_training)
    rows.update(random_play(env, name, args.episodes))
    notes = {OPENSPIEL: "random legal moves, one game at a time",
             f"PettingZoo classic {GAMES[name]} (AEC), Python loop": "random legal moves from the action mask"}
    missing = {}
    for what, made in ((OPENSPIEL, "openspiel" in skip and "skipped (--skip-peers)" or openspiel_game(name)),
                       (f"PettingZoo classic {GAMES[name]} (AEC), Python loop",
                        "pettingzoo" in skip and "skipped (--skip-peers)" or pettingzoo_game(GAMES[name]))):
        if isinstance(made, str):
            missing[what] = made
        else:
            made()
            rows[what] = (lambda p=made: python_timing(p, args.min_seconds), notes[what])
    # 1. Every row in turn, `--repeats` rounds.
    measured = alternate({what: m for what, (m, _) in rows.items()}, args.repeats)
    # 2. coplay's random play and pgx's loop alone, in turn, for many rounds: calls of a millisecond.
    pair = alternate({"coplay": rows[RANDOM][0], "pgx": rows[PGX_RANDOM][0]}, args.repeats, args.min_seconds,
                     MAX_ROUNDS)
    out = []
    for what, (_, note) in rows.items():
        r = {"game": name, "what": what, "note": note, **rates(measured[what]),
             "rounds": [list(m) for m in measured[what]]}
        if OPENSPIEL in measured:
            r["x_openspiel"] = paired([g / s for s, g, _ in measured[what]],
                                      [g / s for s, g, _ in measured[OPENSPIEL]])
        out.append(r)
    by = {r["what"]: r for r in out}
    if TRAIN in by:
        by[TRAIN]["compile_s"] = box["compile_s"]
        by[TRAIN]["seconds_per_update"] = by[TRAIN]["seconds_per_call"] / args.updates
        if ROLLOUT in by:
            by[ROLLOUT]["share_of_update"] = paired([s for s, _, _ in measured[ROLLOUT]],
                                                    [s / args.updates for s, _, _ in measured[TRAIN]])
    by[RANDOM]["vs_pgx"] = paired([g / s for s, g, _ in pair["coplay"]], [g / s for s, g, _ in pair["pgx"]])
    by[RANDOM]["vs_pgx_calls"] = len(pair["coplay"])
    out += [{"game": name, "what": what, "note": why} for what, why in missing.items()]
    for r in out:
        speed = f"{r['games_per_s']:12,.0f} games/s" if "games_per_s" in r else ""
        print(f"{name:12s} {r['what']:66s} {speed}  {fmt_ratio(r.get('x_openspiel'))} OpenSpiel  {r['note']}",
              flush=True)
    print(f"{name}: coplay random play / pgx loop {fmt_ratio(by[RANDOM]['vs_pgx'])}", flush=True)
    return out


def main() -> None:
    from coplay.algos import selfplay_ppo

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default=",".join(GAMES), help="comma-separated: " + ", ".join(GAMES))
    parser.add_argument("--num-envs", type=int, default=selfplay_ppo.Config().num_envs,
                        help="parallel training games (selfplay_ppo's num_envs; its default)")
    parser.add_argument("--updates", type=int, default=10, help="training updates per compiled call")
    parser.add_argument("--episodes", type=int, default=1024, help="games per call for the playing rows")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of every row, in turn; median")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="length of one Python-peer timing, and least time of the random-play pair")
    parser.add_argument("--quick", action="store_true", help="short timings; nothing is written")
    parser.add_argument("--no-training", action="store_true",
                        help="playing rows only (the policy plays with untrained parameters); nothing is written")
    parser.add_argument("--skip-peers", default="", help="comma-separated peers not to run: " + ", ".join(PEERS))
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.min_seconds, args.updates = 2, 0.3, 2
    games = args.games.split(",")
    for name in games:
        if name not in GAMES:
            parser.error(f"unknown game {name!r}; valid: {', '.join(GAMES)}")
    skip = set(filter(None, args.skip_peers.split(",")))
    if skip - set(PEERS):
        parser.error(f"unknown peer(s) {', '.join(sorted(skip - set(PEERS)))}; valid: {', '.join(PEERS)}")
    rows = [r for name in games for r in one_game(name, args, skip)]
    if args.quick or args.no_training:
        return
    defaults = selfplay_ppo.Config()
    write_results("selfplay", {**stamp(), "versions": versions(), "args": vars(args), "rows": rows,
                               "config": {"rollout_len": defaults.rollout_len, "epochs": defaults.epochs,
                                          "minibatches": defaults.minibatches, "num_layers": defaults.num_layers,
                                          "hidden_size": defaults.hidden_size, "opponent": defaults.opponent}})
    regenerate_page()


# ----------------------------------------------------------------------------- the page

TITLE = "Self-play throughput on tic-tac-toe and connect four beside OpenSpiel, PettingZoo and pgx"


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def _versions(data: dict) -> str:
    v = data.get("versions")
    return ", ".join(f"{k} {x}" for k, x in v.items()) if isinstance(v, dict) else (v or "")


def section(data: dict) -> str:
    a, c = data["args"], data.get("config")
    cfg = (f"`selfplay_ppo` defaults ({a['num_envs']} games x {c['rollout_len']} steps per update, {c['epochs']} "
           f"epochs x {c['minibatches']} minibatches, MLP {c['num_layers']}x{c['hidden_size']}, opponents drawn per "
           f"game from the snapshot pool by {c['opponent']})" if c else
           f"`selfplay_ppo` defaults ({a['num_envs']} games per update)")
    lines = [f"## {TITLE}", "",
             f"`python benchmarks/selfplay.py` on {data['machine']}, {_versions(data)}. Training: {cfg}, "
             f"{a['updates']} updates per compiled `lax.scan` call. Playing: {a['episodes']} complete games per call. "
             "Env steps are moves."]
    new = any("rounds" in r for r in data["rows"])
    if new:
        lines[-1] += (f" Every row timed in turn, {a['repeats']} rounds (a JAX row: one call, compiled before; a "
                      "Python "
                      f"row: games until {a['min_seconds']:g} s have passed); a rate is the median over rounds, "
                      "x OpenSpiel the median of the per-round ratios to OpenSpiel's Python loop on the same game "
                      "(range in brackets). coplay's random play beside pgx's loop: the two alone, one call of each "
                      f"per round, for at least {a['repeats']} rounds and {a['min_seconds']:g} s.")
    else:
        lines[-1] += (f" JAX rows: median of {a['repeats']} calls; Python rows: median of {a['repeats']} timings of >= "
                      f"{a['min_seconds']:g} s, each row timed "
                      "after the other, so the ratios to OpenSpiel's loop are not given; coplay's and pgx's random "
                      "play were timed in alternation.")
    body = []
    for r in data["rows"]:
        ratio = ("1 (the reference)" if r["what"] == OPENSPIEL else fmt_ratio(r.get("x_openspiel"))) if new else "–"
        note = r["note"]
        if "share_of_update" in r:
            note = f"{r['share_of_update']['median']:.0%} of the training step's time (median over rounds)"
        if "vs_pgx" in r:
            note += f"; {fmt_ratio(r['vs_pgx'], 'rounds')} the pgx loop's games/s"
        elif "x_pgx_time" in r:
            note += f"; the pgx loop's games/s over this row's: {r['x_pgx_time']:.2f} (medians of alternated calls)"
        body.append([r["game"], r["what"], _fmt(r.get("games_per_s")), _fmt(r.get("steps_per_s")), ratio, note])
    lines += ["", *table(["game", "what", "games/s", "env steps/s", "x OpenSpiel Python loop", "notes"], body)]
    compile_s = ", ".join(f"{r['game']} {r['compile_s']:.1f} s" for r in data["rows"] if r["what"] == TRAIN
                          and "compile_s" in r)
    lines += ["", "The coplay training rows include learning: every update runs the rollout against per-game pool "
              "opponents and then the PPO epochs, and the games/s count only the games that ended during the timed "
              "updates (early in training, so of near-random length). Every other row is play only (inference or "
              "random moves, no learning); the playing rows run each game from its reset to the end. JAX rows use "
              "both cores; OpenSpiel and PettingZoo play one game at a time on one core. The pgx loop draws its "
              "moves as `random_policy` does (one random number per game) and sums the returns as `make_match` "
              "does; its Gumbel-max row draws one number per action instead, to show what the sampling alone costs."
              + (f" Training compile time (not in the figures): {compile_s}." if compile_s else "")]
    return "\n".join(lines)


def claims(data: dict) -> list[dict]:
    out = []
    for r in data["rows"]:
        if r["what"] != RANDOM:
            continue
        if "vs_pgx" in r:
            ratio = fmt_ratio(r["vs_pgx"], "rounds")
        elif "x_pgx_time" in r:
            ratio = f"{1 / r['x_pgx_time']:.2f}x (medians of alternated calls)"
        else:
            continue
        out.append({"claim": f"random legal play through `make_match` beside pgx's own loop ({r['game']})",
                    "workload": f"{data['args']['episodes']} games per call, games/s", "ratio": ratio,
                    "machine": data["machine"]})
    return out


if __name__ == "__main__":
    main()
