"""Which of TextArena's registered games play in coplay, and why the others do not.

    python benchmarks/textarena_games.py            # every registered id; about 2 minutes on 2 cores
    python benchmarks/textarena_games.py --quick    # the three games SPIRAL trains on, nothing written

Each registered id (its `-raw` and `-train` variants included) is built as
`env=textarena:<id>` (the number of players: the first of 2, 1, 3, 4, 5, 6 it starts
with) and plays one game of uniformly random legal replies (`random_legal_reply`: a legal
move where the game lists them, else a bracketed move its text mentions) under the host
text game contract's checks (`coplay.envs.text.host_game.check_game`), at most 200 replies
and `--timeout` seconds. A game works when it ends by its own rules with a reward for
every player. The others are listed with the error or the status they ended with: a
truncated game did not end within 200 random replies, which is the random player's
failing as much as the adapter's.

Writes benchmarks/results/textarena_games.json, then BENCHMARKS.md (benchmarks/page.py).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, regenerate_page, stamp, table, write_results  # noqa: E402

RESULTS = "textarena_games.json"
COMMAND = "python benchmarks/textarena_games.py"
SPIRAL = ("KuhnPoker-v0", "TicTacToe-v0", "SimpleNegotiation-v0")
VARIANT = re.compile(r"-(raw|train)$")


class _TimeoutError(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _TimeoutError


def main() -> None:
    import importlib.metadata

    from coplay.interop.textarena import catalogue, registered

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=int, default=60, help="seconds one game may take")
    ap.add_argument("--quick", action="store_true", help="the three SPIRAL games only, nothing written")
    args = ap.parse_args()
    ids = list(SPIRAL) if args.quick else registered()
    signal.signal(signal.SIGALRM, _alarm)
    rows = []
    t0 = time.perf_counter()
    for i, game_id in enumerate(ids):
        signal.alarm(args.timeout)
        try:
            rows += catalogue([game_id])
        except _TimeoutError:
            rows.append({"id": game_id, "works": False, "players": None, "status": "", "turns": 0,
                         "why": f"no game within {args.timeout} s", "seconds": float(args.timeout)})
        finally:
            signal.alarm(0)
        r = rows[-1]
        print(f"[{i + 1}/{len(ids)}] {game_id}: {'works' if r['works'] else 'no: ' + r['why'][:100]}", flush=True)
    data = {"version": importlib.metadata.version("textarena"), "games": rows, "seconds": time.perf_counter() - t0,
            **stamp()}
    if args.quick:
        print("\n".join(section(data).splitlines()[:12]))
        return
    write_results(RESULTS.removesuffix(".json"), data)
    regenerate_page()


KINDS = (  # (a phrase of the error, what it means), first match wins
    ("the game ended truncated", "no end within 200 random replies (long games: 2048, PigDice to 200, ...)"),
    ("Resource", "needs an NLTK corpus that it downloads at run time (this machine is offline)"),
    ("API key", "needs an API key: a hosted model plays a part of the game"),
    ("SyntaxError", "its module does not import on Python 3.11 (f-strings of Python 3.12)"),
    ("FileNotFoundError", "a data file it reads is missing from the wheel"),
    ("ImportError", "imports a module that is missing (gym, or one left out of the wheel)"),
    ("Missing required observation types", "the `-train` wrapper refuses the game's own observations"),
    ("the game ended failed", "raised while playing, or ended without a reward for every player"),
    ("no game within", "no game within the time limit"),
)


def _kind(why: str) -> str:
    """A failure's kind, for the summary."""
    return next((meaning for phrase, meaning in KINDS if phrase in why), why.split(":", 1)[0])


def section(data: dict) -> str:
    rows = data["games"]
    base = [r for r in rows if not VARIANT.search(r["id"])]
    works = [r for r in rows if r["works"]]
    kinds: dict[str, int] = {}
    for r in rows:
        if not r["works"]:
            kinds[_kind(r["why"])] = kinds.get(_kind(r["why"]), 0) + 1
    spiral = [next((r for r in rows if r["id"] == g), None) for g in SPIRAL]
    lines = ["## TextArena's games in coplay", "",
             f"Every game TextArena {data['version']} registers, built as `env=textarena:<id>` and played once by "
             "uniformly random legal replies under the host text game contract's checks (200 replies at most): "
             f"**{len(works)} of {len(rows)} ids work** ({sum(r['works'] for r in base)} of {len(base)} without "
             "their `-raw`/`-train` variants). The games SPIRAL trains on:", ""]
    lines += table(["game", "works", "players", "replies", "why not"],
                   [[g, "yes" if r and r["works"] else "no", r["players"] if r else "", r["turns"] if r else "",
                     (r["why"] if r else "not registered")] for g, r in zip(SPIRAL, spiral)])
    lines += ["", "Why the others do not:", ""]
    lines += table(["reason", "ids"], [[k, n] for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])])
    listing = table(["id", "works", "players", "why not"],
                    [[r["id"], "yes" if r["works"] else "no", r["players"] or "",
                      r["why"].replace("|", "/")[:160]] for r in base])
    lines += ["", "<details><summary>Every game without its variants</summary>", "", *listing, "", "</details>",
              "", f"{data['machine']}; {data['date']}; commit {data['commit']}; `{COMMAND}` "
              f"({data['seconds'] / 60:.0f} min)."]
    return "\n".join(lines)


def load_results() -> dict | None:
    return load(RESULTS)


if __name__ == "__main__":
    main()
