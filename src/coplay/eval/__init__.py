"""Statistics and evaluation of trained policies."""

from coplay.eval.ratings import (
    EloRatings,
    Game,
    Results,
    elo,
    elo_online,
    openskill_ratings,
    wilson,
)
from coplay.eval.stats import Estimate, iqm, iqm_ci, summarize
from coplay.eval.tables import PairStats, RatingRow, format_table, plot_ratings, ratings_table, win_draw_loss_table

__all__ = [
    "EloRatings", "Estimate", "Game", "PairStats", "RatingRow", "Results", "elo", "elo_online",
    "format_table", "iqm", "iqm_ci", "openskill_ratings", "plot_ratings", "ratings_table",
    "summarize", "win_draw_loss_table", "wilson",
]
