"""Statistics and evaluation of trained policies."""

from coplay.eval.ratings import (
    EloRatings,
    Game,
    PairStats,
    RatingRow,
    Results,
    elo,
    elo_online,
    format_table,
    openskill_ratings,
    plot_ratings,
    ratings_table,
    wilson,
    win_draw_loss_table,
)
from coplay.eval.stats import Estimate, iqm, iqm_ci, summarize

__all__ = [
    "EloRatings", "Estimate", "Game", "PairStats", "RatingRow", "Results", "elo", "elo_online",
    "format_table", "iqm", "iqm_ci", "openskill_ratings", "plot_ratings", "ratings_table",
    "summarize", "win_draw_loss_table", "wilson",
]
