import math

import numpy as np
import pytest

from coplay.core.errors import ConfigError, UnknownNameError
from coplay.eval.ratings import (
    Game,
    Results,
    elo,
    elo_online,
    expected_score,
    openskill_ratings,
    wilson,
)
from coplay.eval.tables import (
    PairStats,
    RatingRow,
    format_table,
    plot_ratings,
    ratings_table,
    win_draw_loss_table,
)


def simulate(true: dict[str, float], per_seat: int, seed: int) -> list[Game]:
    """Games from Bradley-Terry win probabilities on the Elo scale, every ordered pair."""
    rng = np.random.default_rng(seed)
    games = []
    for a in true:
        for b in true:
            if a != b:
                won = rng.random(per_seat) < expected_score(true[a], true[b])
                games += [Game(a, b, float(w)) for w in won]
    return games


# --------------------------------------------------------------------------- results


def test_results_count_games_by_seat_and_merge():
    games = [("a", "b", 1), ("a", "b", 0.5), ("b", "a", 1), ("a", "c", 0)]
    r = Results.from_games(games)
    assert r.players == ("a", "b", "c")
    assert r.counts[0, 1].tolist() == [1, 1, 0]  # a seated first vs b: a win, a draw
    assert r.counts[1, 0].tolist() == [1, 0, 0]
    assert r.totals[0, 1].tolist() == [1, 1, 1]
    assert r.totals[1, 0].tolist() == [1, 1, 1]
    assert r.totals[2, 0].tolist() == [1, 0, 0]
    assert r.n_games == 4
    merged = r.merge(Results.from_games([("d", "a", 1)]))
    assert merged.players == ("a", "b", "c", "d")
    assert merged.n_games == 5 and merged.totals[3, 0].tolist() == [1, 0, 0]
    again = Results.from_games(r.to_games(seed=3), players=r.players)
    assert np.array_equal(again.counts, r.counts)
    pairs = Results.from_pairs({("a", "b"): (1, 1, 0), ("b", "a"): (1, 0, 0), ("a", "c"): (0, 0, 1)})
    assert np.array_equal(pairs.counts, r.counts)


# --------------------------------------------------------------------------- rates


def test_wilson_interval_matches_formula_and_published_value():
    est = wilson(8, 10)
    z = 1.959963984540054
    p, n = 0.8, 10
    center = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    assert est.value == 0.8
    assert est.low == pytest.approx(center - half, abs=1e-12)
    assert est.high == pytest.approx(center + half, abs=1e-12)
    # 8/10 -> [0.4902, 0.9433] (Wilson score interval, 95%)
    assert abs(est.low - 0.4902) < 1e-4 and abs(est.high - 0.9433) < 1e-4
    # all wins: the interval keeps a width: [n / (n + z^2), 1]
    assert wilson(10, 10).high == 1.0
    assert wilson(10, 10).low == pytest.approx(10 / (10 + z**2), abs=1e-12)


def test_win_draw_loss_table_rates():
    games = [("a", "b", 1)] * 6 + [("b", "a", 0.5)] * 2 + [("a", "b", 0)] * 2 + [("c", "a", 1)]
    rows = win_draw_loss_table(games)
    assert [(r.player, r.opponent, r.games) for r in rows] == [("a", "b", 10), ("a", "c", 1)]
    ab = rows[0]
    assert (ab.wins.value, ab.draws.value, ab.losses.value) == (0.6, 0.2, 0.2)
    assert ab.score.value == pytest.approx(0.7)
    assert (ab.wins.low, ab.wins.high) == (wilson(6, 10).low, wilson(6, 10).high)
    assert (ab.score.low, ab.score.high) == (wilson(7, 10).low, wilson(7, 10).high)
    assert rows[1].losses.value == 1.0 and rows[1].score.value == 0.0


# --------------------------------------------------------------------------- Elo


def test_online_elo_classic_update():
    assert elo_online([("a", "b", 1)], k=32) == {"a": 1516.0, "b": 1484.0}
    assert elo_online([("a", "b", 0.5)]) == {"a": 1500.0, "b": 1500.0}
    # second game from the updated ratings: b, the underdog now, gains more than 16
    r = elo_online([("a", "b", 1), ("b", "a", 1)], k=32)
    e_b = 1 / (1 + 10 ** ((1516 - 1484) / 400))
    assert r["b"] == pytest.approx(1484 + 32 * (1 - e_b), abs=1e-9)
    assert r["a"] == pytest.approx(1516 - 32 * (1 - e_b), abs=1e-9)
    # order matters online (but not in the batch fit)
    other = elo_online([("b", "a", 1), ("a", "b", 1)], k=32)
    assert other["a"] != r["a"]
    assert elo([("b", "a", 1), ("a", "b", 1)]).as_dict() == pytest.approx(elo([("a", "b", 1), ("b", "a", 1)]).as_dict())


def test_batch_elo_exact_two_player_values():
    # Without a prior, two players: R_a - R_b = 400 log10(score_a / score_b).
    fit = elo([("a", "b", 1)] * 3 + [("b", "a", 1)], prior=0)
    assert fit["a"] - fit["b"] == pytest.approx(400 * math.log10(3), abs=1e-6)
    assert fit["a"] + fit["b"] == pytest.approx(3000, abs=1e-6)  # mean at 1500
    # a draw is half a win each way: 2 wins + 2 draws scores 3 of 4, like 3 wins + 1 loss
    drawn = elo([("a", "b", 1)] * 2 + [("a", "b", 0.5)] * 2, prior=0)
    assert drawn["a"] - drawn["b"] == pytest.approx(400 * math.log10(3), abs=1e-6)
    # the prior: one virtual draw per pair, so 10 straight wins score 10.5 to 0.5
    sweep = elo([("x", "y", 1)] * 10)
    assert sweep["x"] - sweep["y"] == pytest.approx(400 * math.log10(10.5 / 0.5), abs=1e-6)


def test_batch_elo_recovers_known_strengths():
    true = {"weak": 1500.0, "mid": 1700.0, "strong": 1900.0}
    games = simulate(true, per_seat=500, seed=0)  # 1000 games per pair
    fit = elo(games, anchor="weak", anchor_rating=1500.0)
    assert fit["weak"] == 1500.0
    # Standard error of a pairwise difference from n=1000 games at p~0.76 is
    # (400/ln 10) / sqrt(n p (1-p)) ~ 13 Elo (the joint fit is tighter still):
    # 40 Elo is three standard errors.
    for p in ("mid", "strong"):
        assert abs(fit[p] - true[p]) < 40, (p, fit[p])
    assert fit["strong"] > fit["mid"] > fit["weak"]


def test_batch_elo_bootstrap_interval_matches_analytic_width():
    # 400 games, 300 won: se of the difference is (400/ln 10) / sqrt(400 * 0.75 * 0.25) = 20.06 Elo.
    games = [("a", "b", 1)] * 150 + [("b", "a", 0)] * 150 + [("a", "b", 0)] * 50 + [("b", "a", 1)] * 50
    fit = elo(games, anchor="b", anchor_rating=0.0, reps=2000, seed=1)
    se = 400 / math.log(10) / math.sqrt(400 * 0.75 * 0.25)
    width = fit.high[0] - fit.low[0]
    assert fit.low[0] < fit["a"] < fit.high[0]
    assert width == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert fit.low[1] == fit.high[1] == 0.0  # the anchor is fixed


def test_batch_elo_player_who_wins_everything_stays_finite_and_on_top():
    games = simulate({"a": 1500.0, "b": 1600.0}, per_seat=50, seed=2)
    games += [("champ", "a", 1)] * 20 + [("b", "champ", 0)] * 20
    fit = elo(games)
    assert np.all(np.isfinite(fit.rating))
    assert fit["champ"] == max(fit.rating)
    assert fit.rating.mean() == pytest.approx(1500.0, abs=1e-6)
    with pytest.raises(ConfigError, match="prior=0.*champ"):
        elo(games, prior=0)


def test_batch_elo_anchor_only_shifts():
    games = simulate({"random": 0.0, "p1": 300.0, "p2": 500.0}, per_seat=30, seed=4)
    mean_fit = elo(games)
    anchored = elo(games, anchor="random", anchor_rating=0.0)
    assert anchored["random"] == 0.0
    diff = anchored.rating - mean_fit.rating
    assert np.allclose(diff, diff[0], atol=1e-8)
    assert anchored.expected_score("p1", "random") == pytest.approx(
        1 / (1 + 10 ** (-(anchored["p1"] - anchored["random"]) / 400)))


# --------------------------------------------------------------------------- openskill


def test_openskill_winner_above_loser_and_draws():
    s = openskill_ratings([("w", "l", 1), ("l", "w", 0)] * 5)
    assert s["w"].mu > 25.0 > s["l"].mu
    assert s["w"].ordinal == pytest.approx(s["w"].mu - 3 * s["w"].sigma)
    drawn = openskill_ratings([("x", "y", 0.5)] * 4, model="BradleyTerryFull")
    assert drawn["x"].mu == pytest.approx(25.0) and drawn["y"].mu == pytest.approx(25.0)
    assert drawn["x"].sigma < 25.0 / 3.0  # a draw is still information
    unseen = openskill_ratings([("w", "l", 1)], players=["w", "l", "idle"])
    assert (unseen["idle"].mu, unseen["idle"].sigma) == (25.0, 25.0 / 3.0)
    from_counts = openskill_ratings(Results.from_games([("w", "l", 1)] * 5))
    assert from_counts["w"].mu > from_counts["l"].mu


# --------------------------------------------------------------------------- tables


def test_ratings_table_format_and_plot(tmp_path):
    games = simulate({"random": 1000.0, "greedy": 1300.0, "ppo": 1500.0}, per_seat=40, seed=5)
    rows = ratings_table(games, anchor="random", anchor_rating=1000.0, reps=200)
    assert [r.player for r in rows] == ["ppo", "greedy", "random"]
    assert all(isinstance(r, RatingRow) and r.games == 160 for r in rows)
    assert rows[-1].elo == 1000.0
    assert all(r.elo_low <= r.elo <= r.elo_high for r in rows)
    fit = elo(games, anchor="random", anchor_rating=1000.0)
    assert [r.elo for r in rows] == pytest.approx([fit["ppo"], fit["greedy"], fit["random"]])
    wins = sum(g.score for g in games if g.a == "ppo") + sum(1 - g.score for g in games if g.b == "ppo")
    assert rows[0].score.value == pytest.approx(wins / 160)
    assert rows[0].mu > rows[1].mu > rows[2].mu

    text = format_table(rows)
    lines = text.splitlines()
    assert len(lines) == 2 + 3 and len({len(x) for x in lines}) == 1  # fixed width
    assert lines[0].split("|")[1:4] == [" rank ", " player ", "  Elo "]
    assert lines[2].startswith("|    1 | ppo ")
    assert f"{rows[0].elo:.0f}" in lines[2] and f"[{rows[0].elo_low:.0f}, {rows[0].elo_high:.0f}]" in lines[2]
    pair_text = format_table(win_draw_loss_table(games))
    assert len(pair_text.splitlines()) == 2 + 3 and "opponent" in pair_text

    out = plot_ratings(rows, tmp_path / "ratings.png")
    data = out.read_bytes()
    assert out == tmp_path / "ratings.png" and len(data) > 1000
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob("*.tmp.png"))


def test_table_without_bootstrap():
    rows = ratings_table([("a", "b", 1), ("b", "a", 0.5)], reps=0)
    assert rows[0].player == "a" and rows[0].elo_low is None
    cells = [c.strip() for c in format_table(rows).splitlines()[2].split("|")[1:-1]]
    assert cells[:4] == ["1", "a", f"{rows[0].elo:.0f}", "-"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("games, match", [
    ([], "empty"),
    ([("a", "b", 0.7)], "score 0.7 is not one of"),
    ([("a", "b", "1")], "score '1' is not one of"),
    ([("a", "b", 1), ("c", "c", 1)], "game 1: a player cannot play itself"),
    ([("a", "b")], r"game 0 must be \(player_a, player_b, score_a\)"),
    ([("a", 3, 1)], "names must be non-empty strings, got 3"),
])
def test_bad_games(games, match):
    with pytest.raises(ConfigError, match=match):
        Results.from_games(games)
    with pytest.raises(ConfigError, match=match):
        elo_online(games)


def test_unknown_names_and_bad_counts():
    games = [("alice", "bob", 1)]
    with pytest.raises(UnknownNameError, match="unknown player 'carol'.*alice, bob"):
        Results.from_games(games + [("carol", "bob", 1)], players=["alice", "bob"])
    with pytest.raises(UnknownNameError, match="unknown player 'alcie'; did you mean 'alice'"):
        elo(games, anchor="alcie")
    with pytest.raises(UnknownNameError, match="unknown player 'dave'"):
        elo_online(games + [("dave", "bob", 0)], players=["alice", "bob"])
    with pytest.raises(UnknownNameError, match="unknown openskill model 'Glicko'"):
        openskill_ratings(games, model="Glicko")
    with pytest.raises(ConfigError, match="empty"):
        Results(("a", "b"), np.zeros((2, 2, 3)))
    with pytest.raises(ConfigError, match="cannot play itself.*'a'"):
        Results(("a", "b"), np.array([[[1, 0, 0], [0, 0, 0]], [[0, 0, 0], [0, 0, 0]]]))
    with pytest.raises(ConfigError, match=r"shape \[P, P, 3\]"):
        Results(("a", "b"), np.ones((2, 3)))
    one_game = np.array([[[1, 0, 0], [0, 0, 0]], [[0, 0, 0], [0, 0, 0]]])[:, ::-1]     # a beat b
    with pytest.raises(ConfigError, match=r"illegal must be \[P, P\].*shape \(2,\)"):
        Results(("a", "b"), one_game, illegal=np.zeros(2))
    with pytest.raises(ConfigError, match="zero diagonal"):
        Results(("a", "b"), one_game, illegal=np.eye(2))
    with pytest.raises(ConfigError, match="non-negative, got -1 draws for 'a' vs 'b'"):
        Results.from_pairs({("a", "b"): (2, -1, 0)})
    with pytest.raises(ConfigError, match="duplicate player names: 'a'"):
        Results.from_games(games, players=["a", "a"])
    with pytest.raises(ConfigError, match="in the order they were played"):
        elo_online(Results.from_games(games))
    with pytest.raises(ConfigError, match="prior must be >= 0"):
        elo(games, prior=-1)
    with pytest.raises(ConfigError, match="n=0"):
        wilson(0, 0)
    with pytest.raises(ConfigError, match="RatingRow or PairStats"):
        format_table([object()])


def test_pairstats_as_dict_keys():
    row = win_draw_loss_table([("a", "b", 1)])[0]
    assert isinstance(row, PairStats)
    d = row.as_dict()
    assert d["player"] == "a" and d["wins_rate"] == 1.0 and d["losses_ci_low"] == 0.0
