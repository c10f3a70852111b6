"""`coplay tournament`: a round robin between trained runs and scripted bots.

    coplay tournament runs/a runs/b@1 random minimax env=tic_tac_toe --games 200

A player is a scripted bot by name (`coplay.algos.common.bots.BOTS`), a run directory
(one player per seed of its newest checkpoint) or `<run dir>@<seed>` (that
seed only). The environment comes from `env=` (with `env.<field>=` overrides)
or, when absent, from the runs, which must all agree. Every player must be
built for that environment; one built for another is refused by name.

Writes to the output directory: `tournament.json` (players, counts per seated
pair, ratings rows), `ratings.md` (the tables) and `ratings.png`.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

import jax
import numpy as np

from coplay.algos.common.bots import BOTS, make_bot
from coplay.algos.common.matches import bare_env, env_signature
from coplay.core.config import parse_scalar
from coplay.core.dispatch import in_process
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Policy
from coplay.core.registry import ENVS
from coplay.envs.text.games import TextGame
from coplay.envs.text.scoring import speaker
from coplay.eval.round_robin import Player, round_robin
from coplay.eval.tables import format_table, plot_ratings, ratings_table, win_draw_loss_table
from coplay.experiment import checkpoint
from coplay.experiment.config import seeds_named
from coplay.experiment.outputs import check_output
from coplay.experiment.playback import LoadedRun, load_run
from coplay.experiment.rundir import portable


def _split_seed(entry: str) -> tuple[str, int | None]:
    if "@" in entry:
        path, seed = entry.rsplit("@", 1)
        if not seed.isdigit():
            raise ConfigError(f"player {entry!r}: the part after '@' must be a seed number, got {seed!r}")
        return path, int(seed)
    return entry, None


def run_seeds(entry: str, run: LoadedRun) -> list[int]:
    """The seeds of `run` that `entry` (`<run dir>` or `<run dir>@<seed>`) names."""
    return seeds_named(_split_seed(entry)[1], run.exp.run.seeds, f"player {entry!r}")


def _run_players(entry: str, run: LoadedRun) -> list[Player]:
    params = run.params
    seeds = run.exp.run.seeds
    chosen = run_seeds(entry, run)
    base = Path(_split_seed(entry)[0]).name
    policy = run.policy
    return [Player(base if seeds == 1 else f"{base}@{k}", policy, jax.tree.map(lambda x, k=k: x[k], params))
            for k in chosen]


def parse_env(overrides: list[str]) -> tuple[str | None, dict[str, Any]]:
    """`env=<name>` and `env.<field>=<value>` overrides -> (name, fields)."""
    name, fields = None, {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"expected key=value, got {item!r}; valid keys: env, env.<field>")
        key, value = item.split("=", 1)
        if key == "env":
            name = value
        elif key.startswith("env."):
            fields[key[4:]] = parse_scalar(value)
        else:
            raise ConfigError(f"unknown tournament setting {key!r}; valid: env, env.<field>")
    return name, fields


def _text_game(run: LoadedRun) -> TextGame | None:
    """The text game a run's policy plays (None: not a text game)."""
    env = bare_env(run.policy.env)
    return env if isinstance(env, TextGame) else None


def _common_env(runs: dict[str, LoadedRun], bots: bool, fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The game the runs share: their environment, or, where text policies meet bots or
    policies of the game underneath their text game, that game (text policies then play
    through `speaker`)."""
    def trained_on(r: LoadedRun) -> tuple[str, str]:
        return r.exp.env, json.dumps(r.exp.env_config, sort_keys=True)

    def game_under(r: LoadedRun) -> tuple[str, str]:
        text = _text_game(r)
        return (text.game.spec.name, "{}") if text is not None else trained_on(r)

    names = {trained_on(r) for r in runs.values()}
    if not names:
        raise ConfigError("name the game with env=<name> when every player is a bot")
    if len(names) > 1 or (bots and all(_text_game(r) for r in runs.values())):
        under = {game_under(r) for r in runs.values()}
        if len(under) == 1:
            names = under
        elif len(names) > 1:
            raise ConfigError("the runs were trained on different environments "
                              f"({', '.join(sorted(n for n, _ in names))}); a tournament is played in one "
                              "(text policies also play in the game underneath their text game)")
    (name, cfg), = names
    return name, {**json.loads(cfg), **fields}


def _speaking(player: Player, env: Env, spoken: dict[int, Policy]) -> Player:
    """A text policy seated in the game underneath its text game plays through `speaker`
    (one per policy, kept in `spoken`, so that the seeds of a run still share one policy
    and one compiled match)."""
    text = bare_env(player.policy.env)
    if isinstance(text, TextGame) and env_signature(text) != env_signature(env) \
            and env_signature(text.game) == env_signature(env):
        if id(player.policy) not in spoken:
            spoken[id(player.policy)] = speaker(text, player.policy)
        return Player(player.name, spoken[id(player.policy)], player.params)
    return player


def run_tournament(entries: list[str], overrides: list[str] | None = None, games: int = 100,
                   opening_moves: int = 0, out_dir: str | Path | None = None, seed: int = 0,
                   bootstrap: int = 1000, address: str | None = None) -> dict:
    """Resolve the players, play the round robin, write and return the tables.

    `address`: None plays every match here; a Ray address (`auto`, `host:port`,
    `ray://host:port`, or `local` for a local instance) plays each grid of matches as a
    Ray task over the cluster's nodes (`coplay.scale.ray_tasks`), with the same counts;
    `nodes` in the result says where each grid was played."""
    env_name, env_fields = parse_env(overrides or [])
    # Where the tables go is checked before anything is loaded or played (the default, once the game is known).
    out = check_output(out_dir, what="tournament directory") if out_dir else None
    dispatch = None if address is None else _ray_dispatch(address)
    runs: dict[str, LoadedRun] = {}
    for entry in entries:
        path, _ = _split_seed(entry)
        if entry not in BOTS and path not in runs:
            if not Path(path).is_dir():
                raise ConfigError(f"player {entry!r} is neither a bot ({', '.join(sorted(BOTS))}) nor a run directory")
            runs[path] = load_run(path)
    if env_name is None:
        env_name, env_fields = _common_env(runs, any(e in BOTS for e in entries), env_fields)
    if out is None:
        out = check_output(Path("runs") / portable(f"tournament-{datetime.now():%Y%m%d-%H%M%S}-{env_name}"),
                           what="tournament directory")
    env = ENVS.make(env_name, **env_fields)

    players: list[Player] = []
    spoken: dict[int, Policy] = {}
    for entry in entries:
        if entry in BOTS:
            players.append(Player(entry, make_bot(entry, env)))
        else:
            path, _ = _split_seed(entry)
            players.extend(_speaking(p, env, spoken) for p in _run_players(entry, runs[path]))

    with dispatch or nullcontext():
        results = round_robin(env, players, games, jax.random.PRNGKey(seed), opening_moves,
                              dispatch=dispatch or in_process)
    rows = ratings_table(results, reps=bootstrap, seed=seed)
    pairs = win_draw_loss_table(results)
    out.mkdir(parents=True, exist_ok=True)
    text = f"# Tournament in {env_name}: {games} games per seated pair\n\n" + format_table(rows) + \
        "\n\n" + format_table(pairs) + "\n"
    illegal = {} if results.illegal is None else dict(zip(results.players, results.illegal.sum(1).tolist()))
    played = 2 * games * (len(results.players) - 1)
    if any(illegal.values()):
        text += "\nGames lost by an illegal move (a text policy: an utterance that names no legal move), of " \
                f"{played} each: " + ", ".join(f"{p} {k}" for p, k in illegal.items()) + "\n"
    checkpoint.atomic_write(out / "ratings.md", text.encode())
    record = {"env": env_name, "env_config": env_fields, "games_per_seated_pair": games,
              "opening_moves": opening_moves, "players": list(results.players),
              "counts": np.asarray(results.counts).tolist(), "ratings": [r.as_dict() for r in rows],
              "pairs": [p.as_dict() for p in pairs], "illegal_losses": illegal}
    checkpoint.atomic_write(out / "tournament.json", json.dumps(record, indent=2).encode())
    plot_ratings(rows, out / "ratings.png", title=f"Elo in {env_name}")
    return {"out_dir": out, "results": results, "ratings": rows, "pairs": pairs, "text": text,
            "nodes": None if dispatch is None else dispatch.nodes}


def _ray_dispatch(address: str) -> Any:
    from coplay.scale.ray_tasks import RayDispatch

    return RayDispatch(address, feature="coplay tournament --address")
