"""Self-play throughput in games per second on tic-tac-toe and connect four:
coplay beside OpenSpiel, PettingZoo and pgx, in one run.

    python benchmarks/selfplay.py                          # both games, every peer
    python benchmarks/selfplay.py --quick                  # short timings, no table written
    python benchmarks/selfplay.py --games connect_four --num-envs 256 --episodes 512
    python benchmarks/selfplay.py --skip-peers openspiel,pettingzoo
    python benchmarks/selfplay.py --before old.json        # before/after columns

Before and after a change: run the script at the older commit, keep its
benchmarks/results/selfplay.json aside (say old.json), then run it at the newer
one with `--before old.json` on the same machine; the table gains the older
games/s and the speed-up, row by row.

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

Env steps are moves played (one move of one game). JAX rows: the first call
(compile and warm-up) is not timed; then the median of `--repeats` timed
calls. Python rows: the median of `--repeats` timings, each playing games
until `--min-seconds` have passed. A peer that is not installed, or skipped with
`--skip-peers`, gets a row saying so. Results go to
benchmarks/results/selfplay.json and BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, write_section  # noqa: E402
from train_throughput import machine  # noqa: E402

import coplay  # noqa: E402
from coplay.algos import selfplay_ppo  # noqa: E402
from coplay.algos.common.matches import make_match, random_policy, sample_from_mask  # noqa: E402
from coplay.algos.common.rollout import rollout  # noqa: E402

GAMES = {
    # coplay / pgx / OpenSpiel name, PettingZoo classic module
    "tic_tac_toe": "tictactoe_v3",
    "connect_four": "connect_four_v3",
}
OPENSPIEL = "OpenSpiel, Python loop"
RANDOM = "coplay random legal play (make_match, random_policy)"
PGX_RANDOM = "pgx random legal play (jit, vmap)"
MAX_ROUNDS = 5000  # rounds of alternating random-play calls at most (about 3 ms a round at tic-tac-toe)
PEERS = ("openspiel", "pettingzoo")


def load_before(path: Path) -> tuple[dict[tuple[str, str], float], str]:
    """(game, row) -> games/s of an earlier run's results/selfplay.json, and its machine."""
    earlier = json.loads(path.read_text())
    rates = {(r["game"], r["what"]): r["games_per_s"] for r in earlier["rows"] if "games_per_s" in r}
    return rates, earlier.get("machine", "an unrecorded machine")


def timed_calls(call, repeats: int) -> list[tuple[float, object]]:
    """Call once untimed (compile, warm-up), then `repeats` timed calls: [(seconds, output)]."""
    jax.block_until_ready(call())
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = jax.block_until_ready(call())
        out.append((time.perf_counter() - start, result))
    return out


def rates(timings: list[tuple[float, float, float]]) -> dict:
    """[(seconds, games, steps)] per timed call -> median games/s and steps/s."""
    return {"games_per_s": statistics.median(g / s for s, g, _ in timings),
            "steps_per_s": statistics.median(n / s for s, _, n in timings),
            "seconds_per_call": statistics.median(s for s, _, _ in timings)}


def row(what: str, result: dict | None = None, note: str = "") -> dict:
    return {"what": what, **(result or {}), "note": note}


# ----------------------------------------------------------------------------- coplay


def coplay_training(env, num_envs: int, updates: int, repeats: int):
    """Training throughput (rollout + PPO update) and the rollout alone: (rows, trainer, final state)."""
    config = selfplay_ppo.Config(num_envs=num_envs)
    trainer = selfplay_ppo.SelfPlayPPO(config, env, num_updates=updates * (repeats + 1))
    state = trainer.init(jax.random.PRNGKey(0))

    chunk = jax.jit(lambda s: jax.lax.scan(lambda s, _: trainer.update(s), s, None, length=updates),
                    donate_argnums=0)
    start = time.perf_counter()
    state, _ = jax.block_until_ready(chunk(state))
    compile_s = time.perf_counter() - start
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        state, metrics = jax.block_until_ready(chunk(state))
        timings.append((time.perf_counter() - start, float(np.sum(metrics["episodes"])),
                        updates * trainer.steps_per_update))

    # The rollout alone, as the update runs it (the trainer's own acting function), from the
    # trained state, so that games are as long and as far along as in the timed updates.
    # It reaches into the trainer (`_act`), so it is skipped if that changes.
    rollout_row = None
    try:
        def roll(s):
            act = lambda carry, ts, k: trainer._act(s.params, s.pool, carry, ts, k)  # noqa: E731
            _, traj = rollout(trainer.env, act, s.env_state, s.ts, (s.seat, s.opponent, s.opening), s.key,
                              config.rollout_len)
            return jnp.sum(traj.done)

        roll = jax.jit(roll)
        calls = timed_calls(lambda: roll(state), repeats)
        rollout_row = rates([(s, float(g), trainer.steps_per_update) for s, g in calls])
    except (AttributeError, TypeError) as e:  # the trainer's internals moved on
        print(f"rollout-only timing skipped: {e!r}", flush=True)

    train = rates(timings)
    train.update(compile_s=compile_s, num_envs=num_envs, rollout_len=config.rollout_len, updates_per_call=updates,
                 seconds_per_update=train["seconds_per_call"] / updates)
    size = f"{num_envs} games x {config.rollout_len} steps per update, {updates} updates per call"
    rows = [row("coplay self-play training (rollout vs pool + PPO update)", train, size)]
    if rollout_row is not None:
        rollout_row["seconds_per_update"] = rollout_row["seconds_per_call"]
        share = rollout_row["seconds_per_update"] / train["seconds_per_update"]
        rows.append(row("coplay training rollout only (vs pool, no update)", rollout_row,
                        f"{share:.0%} of the training step's time"))
    return rows, trainer, state


def coplay_match(env, policy, params, episodes: int, repeats: int, what: str, note: str) -> dict:
    play = jax.jit(make_match(env, [policy, policy], episodes=episodes))
    keys = iter(jax.random.split(jax.random.PRNGKey(1), repeats + 1))
    start = time.perf_counter()
    calls = timed_calls(lambda: play([params, params], next(keys)), repeats)
    first_s = time.perf_counter() - start - sum(s for s, _ in calls)
    result = match_rates(calls, episodes)
    result["compile_s"] = first_s
    return row(what, result, note)


def match_rates(calls: list[tuple[float, dict]], episodes: int) -> dict:
    """Games/s and moves/s of timed `make_match` calls, each of which must finish every game."""
    unfinished = sum(int(np.sum(~np.asarray(out["finished"]))) for _, out in calls)
    assert unfinished == 0, f"{unfinished} games did not finish within max_steps"
    return rates([(s, episodes, float(np.sum(out["length"]))) for s, out in calls])


def interleaved_calls(calls: dict[str, object], repeats: int, min_seconds: float,
                      max_rounds: int = MAX_ROUNDS) -> dict[str, list]:
    """Each of `calls` once untimed (compile, warm-up), then timed in turns, one call of
    each per round, for at least `repeats` rounds and until `min_seconds` have passed
    (at most `max_rounds`):
    {name: [(seconds, output)]}. A round times every side within a few milliseconds of
    the others, so a change in the machine's load (other processes on its cores) reaches
    both sides alike; calls of well under a millisecond get many rounds."""
    for call in calls.values():
        jax.block_until_ready(call())
    out: dict[str, list] = {name: [] for name in calls}
    start, rounds = time.perf_counter(), 0
    while rounds < max_rounds and (rounds < repeats or time.perf_counter() - start < min_seconds):
        for name, call in calls.items():
            begin = time.perf_counter()
            result = jax.block_until_ready(call())
            out[name].append((time.perf_counter() - begin, result))
        rounds += 1
    return out


def random_play_pair(env, name: str, episodes: int, repeats: int, min_seconds: float) -> tuple[dict, dict]:
    """The coplay random-play row and the pgx loop's row, timed in alternation
    (`interleaved_calls`): the same games per call, keys and medians on both sides."""
    play = jax.jit(make_match(env, [random_policy(env), random_policy(env)], episodes=episodes))
    pgx_play = pgx_loop(name, episodes)
    # Keys made before any timing, so that no call times the making of its key.
    coplay_keys = iter(list(jax.random.split(jax.random.PRNGKey(1), MAX_ROUNDS + 2)))
    pgx_keys = iter(list(jax.random.split(jax.random.PRNGKey(2), MAX_ROUNDS + 2)))
    start = time.perf_counter()
    jax.block_until_ready(play([None, None], next(coplay_keys)))
    compile_s = time.perf_counter() - start
    timed = interleaved_calls({"coplay": lambda: play([None, None], next(coplay_keys)),
                               "pgx": lambda: pgx_play(next(pgx_keys))}, repeats, min_seconds)
    coplay_rates = match_rates(timed["coplay"], episodes)
    coplay_rates["compile_s"] = compile_s
    coplay_rates["timed_calls"] = len(timed["coplay"])
    pgx_rates = pgx_rates_of(timed["pgx"], episodes)
    pgx_rates["timed_calls"] = len(timed["pgx"])
    return (row(RANDOM, coplay_rates, f"{episodes} games per call"),
            row(PGX_RANDOM, pgx_rates, f"{episodes} games per call"))


# ----------------------------------------------------------------------------- pgx


def gumbel_from_mask(key: jax.Array, mask: jax.Array) -> jax.Array:
    """A uniformly random True entry of each row by Gumbel-max: one draw per entry."""
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf), axis=-1).astype(jnp.int32)


def pgx_loop(name: str, episodes: int, sampler=sample_from_mask):
    """`play(key) -> (moves, games ended, returns)`: `episodes` games of pgx's `name`, compiled."""
    import pgx

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


def pgx_rates_of(calls: list[tuple[float, tuple]], episodes: int) -> dict:
    assert all(int(done) == episodes for _, (_, done, _) in calls), "pgx games did not finish"
    return rates([(s, episodes, float(m)) for s, (m, _, _) in calls])


def pgx_random(name: str, episodes: int, repeats: int, sampler=sample_from_mask, what: str = "") -> dict:
    play = pgx_loop(name, episodes, sampler)
    keys = iter(jax.random.split(jax.random.PRNGKey(2), repeats + 1))
    calls = timed_calls(lambda: play(next(keys)), repeats)
    return row(what, pgx_rates_of(calls, episodes), f"{episodes} games per call")


# ----------------------------------------------------------------------------- Python peers


def python_rate(play_one, min_seconds: float, repeats: int) -> dict:
    """`play_one() -> moves`, one game; median over repeats of games/s, each timing >= min_seconds."""
    play_one()
    timings = []
    for _ in range(repeats):
        games = moves = 0
        start = time.perf_counter()
        while time.perf_counter() - start < min_seconds:
            moves += play_one()
            games += 1
        timings.append((time.perf_counter() - start, games, moves))
    return rates(timings)


def openspiel_random(name: str, min_seconds: float, repeats: int, skip: bool = False) -> dict:
    if skip:
        return row(OPENSPIEL, note="skipped (--skip-peers)")
    try:
        import pyspiel
    except ImportError:
        return row(OPENSPIEL, note="not installed (pip install open_spiel)")
    game = pyspiel.load_game(name)
    rng = random.Random(0)

    def play_one() -> int:
        state, moves = game.new_initial_state(), 0
        while not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
            moves += 1
        return moves

    return row(OPENSPIEL, python_rate(play_one, min_seconds, repeats), "random legal moves, one game at a time")


def pettingzoo_random(module: str, min_seconds: float, repeats: int, skip: bool = False) -> dict:
    what = f"PettingZoo classic {module} (AEC), Python loop"
    if skip:
        return row(what, note="skipped (--skip-peers)")
    try:
        import importlib

        env = importlib.import_module(f"pettingzoo.classic.{module}").env()
    except ImportError:
        return row(what, note='not installed (pip install "pettingzoo[classic]")')
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

    return row(what, python_rate(play_one, min_seconds, repeats), "random legal moves from the action mask")


# ----------------------------------------------------------------------------- main


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in ("pgx", "open_spiel", "pettingzoo"):
        try:
            found.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            found.append(f"{dist} not installed")
    return ", ".join(found)


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default=",".join(GAMES), help="comma-separated: " + ", ".join(GAMES))
    parser.add_argument("--num-envs", type=int, default=selfplay_ppo.Config().num_envs,
                        help="parallel training games (selfplay_ppo's num_envs; its default)")
    parser.add_argument("--updates", type=int, default=10, help="training updates per compiled call")
    parser.add_argument("--episodes", type=int, default=1024, help="games per call for the playing rows")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls (JAX) or timings (Python); median")
    parser.add_argument("--min-seconds", type=float, default=2.0, help="length of one Python-peer timing")
    parser.add_argument("--quick", action="store_true", help="short timings; BENCHMARKS.md is not written")
    parser.add_argument("--no-training", action="store_true",
                        help="playing rows only (the policy plays with untrained parameters); BENCHMARKS.md is "
                             "not written")
    parser.add_argument("--skip-peers", default="", help="comma-separated peers not to run: " + ", ".join(PEERS))
    parser.add_argument("--before", type=Path, default=None,
                        help="results/selfplay.json of an earlier run (e.g. the previous commit) on this machine: "
                             "adds its games/s and the speed-up to every row")
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
    before, before_machine = load_before(args.before) if args.before else ({}, "")
    if before and before_machine != machine():
        print(f"warning: the earlier run was on {before_machine}, this one is on {machine()}", flush=True)

    rows = []
    for name in games:
        env = coplay.make(name)
        if args.no_training:
            trainer = selfplay_ppo.SelfPlayPPO(selfplay_ppo.Config(num_envs=args.num_envs), env, num_updates=1)
            game_rows, state = [], trainer.init(jax.random.PRNGKey(0))
        else:
            game_rows, trainer, state = coplay_training(env, args.num_envs, args.updates, args.repeats)
        policy, params = trainer.policy(), trainer.policy_params(state)
        game_rows.append(coplay_match(env, policy, params, args.episodes, args.repeats,
                                      "coplay self-play playing (policy vs policy, inference)",
                                      f"{args.episodes} games per call, the trainer's network in both seats"))
        random_row, pgx_row = random_play_pair(env, name, args.episodes, args.repeats, args.min_seconds)
        # Time per game against the pgx loop (the environment alone, same sampling).
        random_row["x_pgx_time"] = pgx_row["games_per_s"] / random_row["games_per_s"]
        random_row["note"] += f"; {random_row['x_pgx_time']:.2f}x the pgx loop's time per game"
        game_rows += [random_row, pgx_row,
                      pgx_random(name, args.episodes, args.repeats, gumbel_from_mask,
                                 "pgx random legal play, Gumbel-max draws (jax.random.categorical)"),
                      openspiel_random(name, args.min_seconds, args.repeats, "openspiel" in skip),
                      pettingzoo_random(GAMES[name], args.min_seconds, args.repeats, "pettingzoo" in skip)]
        base = next((r.get("games_per_s") for r in game_rows if r["what"] == OPENSPIEL), None)
        for r in game_rows:
            r["game"] = name
            if base and "games_per_s" in r:
                r["x_openspiel"] = r["games_per_s"] / base
            if (name, r["what"]) in before and "games_per_s" in r:
                r["before_games_per_s"] = before[name, r["what"]]
                r["speedup"] = r["games_per_s"] / r["before_games_per_s"]
            speed = (f"{r['games_per_s']:12,.0f} games/s {r['steps_per_s']:12,.0f} steps/s"
                     if "games_per_s" in r else f"{'':>41}")
            then = f"  ({r['speedup']:.2f}x the earlier run's {r['before_games_per_s']:,.0f})" if "speedup" in r else ""
            print(f"{name:12s} {r['what']:66s} {speed}  {r['note']}{then}", flush=True)
        rows += game_rows

    if args.quick or args.no_training:
        return
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "selfplay.json").write_text(json.dumps({"machine": machine(), "versions": versions(),
                                                   "args": vars(args), "rows": rows}, indent=2, default=str))

    defaults = selfplay_ppo.Config()
    lines = [
        "## Self-play throughput on tic-tac-toe and connect four beside OpenSpiel, PettingZoo and pgx",
        "",
        f"`python benchmarks/selfplay.py` on {machine()}, {versions()}."
        f" Training: `selfplay_ppo` defaults ({args.num_envs} games x {defaults.rollout_len} steps per update,"
        f" {defaults.epochs} epochs x {defaults.minibatches} minibatches, MLP {defaults.num_layers}x"
        f"{defaults.hidden_size}, opponents drawn per game from the snapshot pool by {defaults.opponent}),"
        f" {args.updates} updates per compiled `lax.scan` call. Playing: {args.episodes} complete games per call."
        " JAX rows: compile (first call) not timed, median of"
        f" {args.repeats} calls; Python rows: median of {args.repeats} timings of >= {args.min_seconds:g} s."
        " The coplay and pgx random-play rows are timed in alternation (one call of each per round, at least"
        f" {args.repeats} rounds and {args.min_seconds:g} s; median per side)."
        " Env steps are moves. Ratios are against OpenSpiel's Python loop on the same game.",
        "",
        "| game | what | games/s | env steps/s | x OpenSpiel Python loop | notes |"
        + (" games/s before | speed-up |" if before else ""),
        "|---|---|---|---|---|---|" + ("---|---|" if before else ""),
    ]
    for r in rows:
        ratio = f"{r['x_openspiel']:.2f}x" if "x_openspiel" in r else "–"
        then = (f" {fmt(r.get('before_games_per_s'))} | "
                + (f"{r['speedup']:.2f}x |" if "speedup" in r else "– |")) if before else ""
        lines.append(f"| {r['game']} | {r['what']} | {fmt(r.get('games_per_s'))} | {fmt(r.get('steps_per_s'))} | "
                     f"{ratio} | {r['note']} |{then}")
    compile_s = ", ".join(f"{r['game']} {r['compile_s']:.1f} s" for r in rows
                          if r["what"].startswith("coplay self-play training"))
    lines += [
        "",
        "The coplay training rows include learning: every update runs the rollout against per-game pool"
        " opponents and then the PPO epochs, and the games/s count only the games that ended during the timed"
        " updates (early in training, so of near-random length). Every other row is play only (inference or"
        " random moves, no learning); the playing rows run each game from its reset to the end. JAX rows use"
        " both cores; OpenSpiel and PettingZoo play one game at a time on one core."
        " The pgx loop draws its moves as `random_policy` does (one random number per game) and sums the"
        " returns as `make_match` does; its Gumbel-max row draws one number per action instead, as coplay"
        " sampled before, to show what the sampling alone costs."
        f" Training compile time (not in the figures): {compile_s}.",
    ]
    if before:
        lines.append(f"\nGames/s before: the earlier run in `{args.before.name}` ({before_machine}); speed-up ="
                     " games/s now / games/s before. The two runs are minutes apart, and this machine's speed can"
                     " drift by up to 2x in minutes: the random-play speed-ups are far beyond that, the training"
                     " rows' are not. `benchmarks/selfplay_paired.py` times the training rows of two checkouts in"
                     " alternation (section below when it has been run).")
    write_section("selfplay", "\n".join(lines))


if __name__ == "__main__":
    main()
