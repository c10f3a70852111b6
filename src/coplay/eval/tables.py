"""The tables of a tournament, from its games' `Results` (`coplay.eval.ratings`):

- `win_draw_loss_table`: per pair, win/draw/loss and score rates with Wilson
  95% intervals;
- `ratings_table`: one row per player, with its batch Elo and bootstrap interval,
  its openskill rating and its score rate;
- `format_table`, `plot_ratings`: those rows as a Markdown table and a bar chart,
  for the CLI to print and draw.

Host-side numpy only; nothing here is compiled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from coplay.core.errors import ConfigError
from coplay.eval.ratings import GameLike, Rate, Results, as_results, elo, openskill_ratings, wilson


@dataclass(frozen=True)
class PairStats:
    """`player` against `opponent` over all their games (both seatings)."""

    player: str
    opponent: str
    games: int
    wins: Rate
    draws: Rate
    losses: Rate
    score: Rate  # (wins + draws / 2) / games

    def as_dict(self) -> dict:
        return {"player": self.player, "opponent": self.opponent, "games": self.games,
                **{f"{k}_{m}": v for k in ("wins", "draws", "losses", "score")
                   for m, v in getattr(self, k).as_dict().items() if m != "n"}}


def win_draw_loss_table(results: Results | Sequence[GameLike], confidence: float = 0.95) -> list[PairStats]:
    """One row per pair of players that met, from the view of the player listed
    first in `results.players`. Each rate has a Wilson interval. The score rate
    treats a draw as half a success out of one game; its Wilson interval is then
    conservative (with draws the score varies less than a binomial would)."""
    results = as_results(results)
    totals = results.totals
    rows = []
    P = len(results.players)
    for i in range(P):
        for j in range(i + 1, P):
            w, d, lost = (int(x) for x in totals[i, j])
            n = w + d + lost
            if n == 0:
                continue
            rows.append(PairStats(results.players[i], results.players[j], n,
                                  wilson(w, n, confidence), wilson(d, n, confidence),
                                  wilson(lost, n, confidence), wilson(w + d / 2, n, confidence)))
    return rows


@dataclass(frozen=True)
class RatingRow:
    """One player's line in a ratings table."""

    player: str
    elo: float
    elo_low: float | None
    elo_high: float | None
    mu: float
    sigma: float
    ordinal: float
    games: int
    score: Rate  # over all the player's games

    def as_dict(self) -> dict:
        return {"player": self.player, "elo": self.elo, "elo_ci_low": self.elo_low,
                "elo_ci_high": self.elo_high, "mu": self.mu, "sigma": self.sigma,
                "ordinal": self.ordinal, "games": self.games, "score": self.score.value,
                "score_ci_low": self.score.low, "score_ci_high": self.score.high}


def ratings_table(data: Results | Sequence[GameLike], *, anchor: str | None = None,
                  anchor_rating: float = 1500.0, prior: float = 1.0, reps: int = 1000,
                  model: str = "PlackettLuce", seed: int = 0) -> list[RatingRow]:
    """One row per player, best batch Elo first: Elo with its bootstrap interval
    (see `elo`), openskill mu/sigma/ordinal (see `openskill_ratings`; a list of
    games is rated in its order) and the overall score rate with a Wilson interval."""
    results = as_results(data)
    fit = elo(results, anchor=anchor, anchor_rating=anchor_rating, prior=prior, reps=reps, seed=seed)
    skill = openskill_ratings(data, model, players=results.players, seed=seed)
    totals = results.totals
    rows = []
    for i, p in enumerate(results.players):
        w, d, lost = (int(x) for x in totals[i].sum(0))
        n = w + d + lost
        score = wilson(w + d / 2, n) if n else Rate(float("nan"), float("nan"), float("nan"), 0)
        rows.append(RatingRow(
            p, float(fit.rating[i]),
            None if fit.low is None else float(fit.low[i]),
            None if fit.high is None else float(fit.high[i]),
            skill[p].mu, skill[p].sigma, skill[p].ordinal, n, score))
    return sorted(rows, key=lambda r: -r.elo)


def format_table(rows: Sequence[RatingRow] | Sequence[PairStats]) -> str:
    """Fixed-width text (a Markdown table) of `ratings_table` or
    `win_draw_loss_table` rows."""
    if not rows:
        raise ConfigError("format_table got no rows")
    rating_rows = [r for r in rows if isinstance(r, RatingRow)]
    pair_rows = [r for r in rows if isinstance(r, PairStats)]
    if len(rating_rows) == len(rows):
        header = ["rank", "player", "Elo", "Elo 95% CI", "mu", "sigma", "ordinal", "games", "score", "score 95% CI"]
        right = [True, False, True, True, True, True, True, True, True, True]
        cells = [[str(k + 1), r.player, f"{r.elo:.0f}",
                  "-" if r.elo_low is None else f"[{r.elo_low:.0f}, {r.elo_high:.0f}]",
                  f"{r.mu:.2f}", f"{r.sigma:.2f}", f"{r.ordinal:.2f}", str(r.games),
                  f"{r.score.value:.3f}", f"[{r.score.low:.3f}, {r.score.high:.3f}]"]
                 for k, r in enumerate(rating_rows)]
    elif len(pair_rows) == len(rows):
        header = ["player", "opponent", "games", "win", "draw", "loss", "score"]
        right = [False, False, True, True, True, True, True]
        cells = [[r.player, r.opponent, str(r.games), str(r.wins), str(r.draws), str(r.losses), str(r.score)]
                 for r in pair_rows]
    else:
        kinds = sorted({type(r).__name__ for r in rows})
        raise ConfigError(f"format_table takes RatingRow or PairStats rows (one kind), got {kinds}")
    width = [max(len(h), *(len(c[k]) for c in cells)) for k, h in enumerate(header)]

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, width, right)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if r else (":" + "-" * (w + 1)) for w, r in zip(width, right)) + "|"
    return "\n".join([line(header), rule, *(line(c) for c in cells)])


def plot_ratings(rows: Sequence[RatingRow], path: str | Path, title: str = "Elo ratings") -> Path:
    """A horizontal bar chart of Elo, best at the top, with the bootstrap
    interval as error bars where there is one. Written atomically to `path` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ConfigError("plot_ratings got no rows")
    rows = sorted(rows, key=lambda r: r.elo)
    values = np.array([r.elo for r in rows])
    err = np.array([[0.0 if r.elo_low is None else r.elo - r.elo_low for r in rows],
                    [0.0 if r.elo_high is None else r.elo_high - r.elo for r in rows]])
    base = min(values.min(), (values - err[0]).min())
    base -= 0.1 * max(1.0, values.max() - base)  # bars start just below the lowest, so differences show
    fig, ax = plt.subplots(figsize=(6, 1.2 + 0.4 * len(rows)), dpi=100)
    ax.barh(np.arange(len(rows)), values - base, left=base, color="C0", alpha=0.8,
            xerr=err if err.any() else None, capsize=3, ecolor="black")
    ax.set_yticks(np.arange(len(rows)), [r.player for r in rows])
    ax.set_xlabel("Elo" + (" (95% bootstrap CI)" if err.any() else ""))
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, format="png")
    plt.close(fig)
    tmp.replace(path)
    return path
