"""Ratings and match statistics for two-player competitive evaluation.

A game is `(player_a, player_b, score_a)` with `score_a` 1 (a won), 0.5 (draw)
or 0 (a lost). `Results` aggregates games into counts; from those come

- `wilson`: a rate's Wilson 95% interval;
- `elo`: the batch maximum-likelihood Bradley-Terry fit on the Elo scale, with
  an optional bootstrap interval. This is what a tournament table reports: it
  does not depend on the order the games were played in;
- `elo_online`: the classic sequential Elo update (order matters);
- `openskill_ratings`: Weng-Lin (TrueSkill-style) mu, sigma and ordinal,
  through the `openskill` package.

The tables a tournament reports from them (per pair, one row per player, as text
and as a chart) are in `coplay.eval.tables`.

Host-side numpy only; nothing here is compiled.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy import sparse
from scipy import stats as sps
from scipy.sparse import csgraph

from coplay.core.errors import ConfigError, unknown_name
from coplay.eval.stats import Estimate

SCORES = (0.0, 0.5, 1.0)
ELO_SCALE = 400.0 / math.log(10.0)  # Elo points per natural-log unit of strength
OPENSKILL_MODELS = ("PlackettLuce", "BradleyTerryFull", "BradleyTerryPart",
                    "ThurstoneMostellerFull", "ThurstoneMostellerPart")


class Game(NamedTuple):
    """One game: `score` is player `a`'s result (1 win, 0.5 draw, 0 loss).
    `a` is the first seat, so seat effects stay visible in `Results.counts`."""

    a: str
    b: str
    score: float


GameLike = Game | tuple[str, str, float]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class Results:
    """Aggregated games between named players.

    players: [P] distinct names.
    counts:  [P, P, 3] int64; counts[i, j] = (wins, draws, losses) of players[i]
             in games where it sat first (player a) against players[j]. The two
             seatings are kept apart because some games favour the first mover;
             `totals` merges them. The diagonal is zero: no self-play.
    illegal: [P, P] int64 or None; illegal[i, j] = the games players[i] lost by an
             illegal move (an utterance that named none, for a text policy) in
             either seat against players[j], where the games report it.
    """

    players: tuple[str, ...]
    counts: np.ndarray
    illegal: np.ndarray | None = None

    def __post_init__(self) -> None:
        players = tuple(self.players)
        _indexer(players)  # validates the names
        counts = np.asarray(self.counts)
        P = len(players)
        if counts.shape != (P, P, 3):
            raise ConfigError(f"counts must have shape [P, P, 3] = {(P, P, 3)} for {P} players, "
                              f"got {counts.shape}")
        if counts.size and (not np.all(np.isfinite(counts)) or np.any(counts != np.round(counts))):
            raise ConfigError("counts must be whole numbers of games")
        if np.any(counts < 0):
            i, j, c = np.argwhere(counts < 0)[0]
            raise ConfigError(f"counts must be non-negative, got {counts[i, j, c]:g} "
                              f"{('wins', 'draws', 'losses')[c]} for {players[i]!r} vs {players[j]!r}")
        counts = counts.astype(np.int64)
        diag = np.flatnonzero(counts[np.arange(P), np.arange(P)].sum(-1))
        if diag.size:
            raise ConfigError(f"a player cannot play itself: counts[{players[diag[0]]!r}, "
                              f"{players[diag[0]]!r}] is not zero")
        if counts.sum() == 0:
            raise ConfigError("results are empty: no games were recorded")
        counts.setflags(write=False)
        object.__setattr__(self, "players", players)
        object.__setattr__(self, "counts", counts)
        if self.illegal is not None:
            illegal = np.asarray(self.illegal)
            if illegal.shape != (P, P) or np.any(illegal < 0) or np.any(np.diag(illegal)):
                raise ConfigError(f"illegal must be [P, P] = {(P, P)} non-negative game counts with a zero "
                                  f"diagonal, got shape {illegal.shape}")
            object.__setattr__(self, "illegal", illegal.astype(np.int64))

    @classmethod
    def from_games(cls, games: Sequence[GameLike], players: Sequence[str] | None = None) -> Results:
        """Count a list of games. `players` fixes the order (and may name players
        without games); by default players appear in order of first appearance."""
        checked = [_check_game(g, k) for k, g in enumerate(_game_list(games))]
        if not checked:
            raise ConfigError("results are empty: no games were given")
        if players is None:
            players = list(dict.fromkeys(p for g in checked for p in (g.a, g.b)))
        index = _indexer(players)
        counts = np.zeros((len(players), len(players), 3), np.int64)
        for g in checked:
            # score 1 -> column 0 (win), 0.5 -> 1 (draw), 0 -> 2 (loss)
            counts[index(g.a), index(g.b), int(round(2 * (1.0 - g.score)))] += 1
        return cls(tuple(players), counts)

    @classmethod
    def from_pairs(cls, pairs: Mapping[tuple[str, str], Sequence[int]],
                   players: Sequence[str] | None = None) -> Results:
        """pairs: {(a, b): (wins, draws, losses) of a, with a in the first seat}."""
        if players is None:
            players = list(dict.fromkeys(p for ab in pairs for p in ab))
        index = _indexer(players)
        counts = np.zeros((len(players), len(players), 3))
        for (a, b), pair_wdl in pairs.items():
            if a == b:
                raise ConfigError(f"a player cannot play itself: pair ({a!r}, {b!r})")
            wdl = np.asarray(pair_wdl)
            if wdl.shape != (3,):
                raise ConfigError(f"pair ({a!r}, {b!r}) needs (wins, draws, losses), got {wdl.tolist()}")
            counts[index(a), index(b)] += wdl
        return cls(tuple(players), counts)

    @property
    def totals(self) -> np.ndarray:
        """[P, P, 3] (wins, draws, losses) of row vs column over both seatings."""
        return self.counts + self.counts.transpose(1, 0, 2)[..., ::-1]

    @property
    def n_games(self) -> int:
        return int(self.counts.sum())

    def index(self, player: str) -> int:
        return _indexer(self.players)(player)

    def merge(self, other: Results) -> Results:
        """Both sets of games together; players of `other` not in `self` are appended."""
        players = list(dict.fromkeys(self.players + other.players))
        P = len(players)
        counts = np.zeros((P, P, 3), np.int64)
        for res in (self, other):
            idx = np.array([players.index(p) for p in res.players])
            counts[np.ix_(idx, idx)] += res.counts
        return Results(tuple(players), counts)

    def to_games(self, seed: int = 0) -> list[Game]:
        """The games as a list. Counts do not record order, so the list is a seeded
        shuffle: an online rater then never sees a long run of one outcome."""
        games = [Game(self.players[i], self.players[j], SCORES[2 - c])
                 for i, j, c in np.argwhere(self.counts > 0)
                 for _ in range(self.counts[i, j, c])]
        order = np.random.default_rng(seed).permutation(len(games))
        return [games[k] for k in order]


def _game_list(games: object) -> list:
    if isinstance(games, Results):
        raise ConfigError("this needs the games in the order they were played; Results keeps only "
                          "counts (use Results.to_games() for a shuffled order)")
    if isinstance(games, (str, bytes)) or not isinstance(games, Sequence):
        raise ConfigError(f"games must be a list of (player_a, player_b, score_a), got {type(games).__name__}")
    return list(games)


def _check_game(game: object, k: int) -> Game:
    if isinstance(game, (str, bytes)) or not isinstance(game, Sequence) or len(game) != 3:
        raise ConfigError(f"game {k} must be (player_a, player_b, score_a), got {game!r}")
    a, b, score = game
    for p in (a, b):
        if not isinstance(p, str) or not p:
            raise ConfigError(f"game {k}: player names must be non-empty strings, got {p!r}")
    if a == b:
        raise ConfigError(f"game {k}: a player cannot play itself ({a!r} vs {b!r})")
    if not isinstance(score, numbers.Real) or float(score) not in SCORES:
        raise ConfigError(f"game {k} ({a!r} vs {b!r}): score {score!r} is not one of 1 (win), "
                          f"0.5 (draw), 0 (loss)")
    return Game(a, b, float(score))


def _indexer(players: Sequence[str]) -> Callable[[str], int]:
    """name -> position in `players`, failing with the valid names on an unknown one."""
    players = list(players)
    for p in players:
        if not isinstance(p, str) or not p:
            raise ConfigError(f"player names must be non-empty strings, got {p!r}")
    dup = sorted(p for p, c in Counter(players).items() if c > 1)
    if dup:
        raise ConfigError(f"duplicate player names: {', '.join(map(repr, dup))}")
    pos = {p: i for i, p in enumerate(players)}

    def index(name: str) -> int:
        if name not in pos:
            raise unknown_name("player", name, pos)
        return pos[name]

    return index


def as_results(data: Results | Sequence[GameLike]) -> Results:
    """`data` as `Results`: as it is, or aggregated from a list of games."""
    return data if isinstance(data, Results) else Results.from_games(data)


# --------------------------------------------------------------------------- rates


@dataclass(frozen=True)
class Rate(Estimate):
    """A proportion over `n` games with its confidence interval."""

    def as_dict(self) -> dict:
        return {"rate": self.value, "ci_low": self.low, "ci_high": self.high, "n": self.n}


def wilson(successes: float, n: int, confidence: float = 0.95) -> Rate:
    """The Wilson score interval for `successes` out of `n`.

    Chosen over the normal (Wald) interval because it stays inside [0, 1] and
    keeps a non-zero width at 0/n and n/n, where a player who won every game of
    a short match would otherwise get the interval [1, 1]; its coverage is close
    to nominal even for a handful of games (Brown, Cai and DasGupta, 2001).
    `successes` may be fractional (a score with draws as halves)."""
    if n <= 0:
        raise ConfigError(f"a rate needs at least one game, got n={n}")
    if not 0 <= successes <= n:
        raise ConfigError(f"successes must lie in [0, n={n}], got {successes}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    z = sps.norm.ppf(0.5 + confidence / 2)
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # at 0/n and n/n the bound is exactly 0 or 1; round-off would leave 1 - 1e-16
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return Rate(float(p), float(low), float(high), int(n))


# --------------------------------------------------------------------------- Elo


def expected_score(rating_a: float, rating_b: float) -> float:
    """Elo's expected score of a against b: 1 / (1 + 10^((b - a) / 400))."""
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


def elo_online(games: Sequence[GameLike], k: float = 32.0, initial: float = 1500.0,
               players: Sequence[str] | None = None) -> dict[str, float]:
    """Sequential Elo: after each game, in order, both players move by
    k * (score - expected score), computed from their ratings before the game.
    The result depends on the order of the games; prefer `elo` for a table."""
    if not k > 0:
        raise ConfigError(f"k must be positive, got {k}")
    checked = [_check_game(g, n) for n, g in enumerate(_game_list(games))]
    if not checked:
        raise ConfigError("results are empty: no games were given")
    names = list(players) if players is not None else list(dict.fromkeys(p for g in checked for p in (g.a, g.b)))
    index = _indexer(names)
    rating = {p: float(initial) for p in names}
    for g in checked:
        index(g.a), index(g.b)  # unknown names fail here, naming the valid ones
        delta = k * (g.score - expected_score(rating[g.a], rating[g.b]))
        rating[g.a] += delta
        rating[g.b] -= delta
    return rating


@dataclass(frozen=True, eq=False)
class EloRatings:
    """Batch Elo fit. rating, low, high: [P]; low/high is the bootstrap interval
    (None when the fit was not bootstrapped)."""

    players: tuple[str, ...]
    rating: np.ndarray
    low: np.ndarray | None = None
    high: np.ndarray | None = None

    def __getitem__(self, player: str) -> float:
        return float(self.rating[_indexer(self.players)(player)])

    def as_dict(self) -> dict[str, float]:
        return {p: float(r) for p, r in zip(self.players, self.rating)}

    def expected_score(self, a: str, b: str) -> float:
        return expected_score(self[a], self[b])


def elo(data: Results | Sequence[GameLike], *, anchor: str | None = None, anchor_rating: float = 1500.0,
        prior: float = 1.0, reps: int = 0, confidence: float = 0.95, seed: int = 0) -> EloRatings:
    """Maximum-likelihood Bradley-Terry ratings on the Elo scale.

    P(i beats j) = 1 / (1 + 10^((R_j - R_i) / 400)); a draw counts as half a win
    each way. The fit uses the counts only, so the order of games does not matter.

    anchor:        this player gets `anchor_rating` (e.g. "random" at 0); without
                   an anchor the mean rating is `anchor_rating`.
    prior:         virtual draws added between every pair of players. A player who
                   won (or lost) every game would otherwise get an infinite rating,
                   and players who never met, directly or through others, no
                   relative rating at all. One draw per pair barely moves a table
                   with many games per pair; prior=0 gives the plain maximum-
                   likelihood fit and fails where that is infinite.
    reps:          bootstrap resamples for the interval (0: none). Games are
                   resampled within each seated pair, keeping the tournament's
                   schedule; the interval is the percentile one.
    """
    results = as_results(data)
    if not prior >= 0:
        raise ConfigError(f"prior must be >= 0 virtual draws per pair, got {prior}")
    if reps < 0:
        raise ConfigError(f"reps must be >= 0, got {reps}")
    if reps and prior == 0:
        raise ConfigError("a bootstrap (reps > 0) needs prior > 0: a resample can leave a player "
                          "with no lost game and an infinite rating")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    a = None if anchor is None else results.index(anchor)  # an unknown anchor fails before any fitting
    if prior == 0:
        _check_finite_fit(results)
    theta = _bradley_terry(_points(results.counts[None], prior))[0]
    rating = _anchored(theta[None], results, anchor, anchor_rating)[0]
    low = high = None
    if reps:
        rng = np.random.default_rng(seed)
        n = results.counts.sum(-1)
        pvals = np.where(n[..., None] > 0, results.counts / np.maximum(n, 1)[..., None], 1 / 3)
        sample = rng.multinomial(n, pvals, size=(reps, *n.shape))  # [reps, P, P, 3]
        boot = _anchored(_bradley_terry(_points(sample, prior)), results, anchor, anchor_rating)
        tail = 100 * (1 - confidence) / 2
        low, high = np.percentile(boot, [tail, 100 - tail], axis=0)
        if a is not None:  # exact: the anchor is fixed in every resample
            low[a] = high[a] = anchor_rating
    return EloRatings(results.players, rating, low, high)


def _points(counts: np.ndarray, prior: float) -> np.ndarray:
    """counts: [R, P, P, 3] seated -> [R, P, P] points of row vs column over both
    seatings (win 1, draw 1/2), plus half of each virtual draw."""
    total = counts + counts.transpose(0, 2, 1, 3)[..., ::-1]
    pts = total[..., 0] + 0.5 * total[..., 1] + 0.5 * prior
    P = counts.shape[1]
    pts[:, np.arange(P), np.arange(P)] = 0.0
    return pts.astype(np.float64)


def _check_finite_fit(results: Results) -> None:
    """The plain maximum-likelihood fit is finite iff every player can be reached
    from every other through 'scored at least a draw against' (Zermelo, 1929)."""
    scored = _points(results.counts[None], 0.0)[0] > 0
    n, labels = csgraph.connected_components(sparse.csr_matrix(scored), directed=True, connection="strong")
    if n > 1:
        groups = [[p for p, lab in zip(results.players, labels) if lab == g] for g in range(n)]
        raise ConfigError("with prior=0 the Elo fit is infinite: these groups of players never "
                          f"scored against each other in both directions: {groups}; use prior > 0")


def _bradley_terry(points: np.ndarray, max_iter: int = 100, tol: float = 1e-10) -> np.ndarray:
    """points: [R, P, P], points[r, i, j] = score of i against j. -> theta: [R, P],
    log-strengths with mean 0 maximising sum_ij points_ij * log sigmoid(theta_i - theta_j).

    Damped Newton on the negative log-likelihood, R fits at once. The objective
    is convex and shift-invariant; adding 1/P to every Hessian entry fixes the
    shift (the gradient sums to zero, so steps keep the mean at 0)."""
    R, P, _ = points.shape
    games = points + points.transpose(0, 2, 1)
    theta = np.zeros((R, P))

    def nll(th: np.ndarray) -> np.ndarray:
        d = th[:, :, None] - th[:, None, :]
        return (points * np.logaddexp(0.0, -d)).sum((1, 2))

    f = nll(theta)
    for _ in range(max_iter):
        d = theta[:, :, None] - theta[:, None, :]
        p = 1.0 / (1.0 + np.exp(-d))
        grad = (games * p - points).sum(2)  # expected minus actual score
        w = games * p * (1.0 - p)
        hess = -w
        hess[:, np.arange(P), np.arange(P)] = w.sum(2)
        step = np.linalg.solve(hess + 1.0 / P, grad[..., None])[..., 0]
        if np.abs(step).max() < tol:
            break
        t = np.ones(R)
        for _ in range(50):  # backtracking: halve where the step does not decrease the loss enough
            new = theta - t[:, None] * step
            f_new = nll(new)
            bad = f_new > f - 1e-4 * t * (grad * step).sum(1)
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
        theta, f = new, f_new
    return theta - theta.mean(1, keepdims=True)


def _anchored(theta: np.ndarray, results: Results, anchor: str | None, anchor_rating: float) -> np.ndarray:
    """theta: [R, P] -> Elo [R, P], shifted so the anchor (or the mean) sits at anchor_rating."""
    r = ELO_SCALE * theta
    ref = r[:, results.index(anchor)] if anchor is not None else r.mean(1)
    return r - ref[:, None] + anchor_rating


# --------------------------------------------------------------------------- openskill


@dataclass(frozen=True)
class SkillRating:
    """Weng-Lin Bayesian rating: mean, standard deviation and the conservative
    ordinal mu - 3 sigma (the skill the player exceeds with ~99.7% belief)."""

    mu: float
    sigma: float
    ordinal: float


def openskill_ratings(data: Results | Sequence[GameLike], model: str = "PlackettLuce", *,
                      players: Sequence[str] | None = None, seed: int = 0,
                      **model_kwargs: float) -> dict[str, SkillRating]:
    """TrueSkill-style ratings from the `openskill` package (Weng and Lin, 2011),
    one update per game in order; a draw is a tied rank. A `Results` has no
    order, so its games are rated in a seeded shuffle (`Results.to_games`).
    model_kwargs go to the model (mu, sigma, beta, tau, ...); defaults mu=25,
    sigma=25/3. Players without games keep the prior."""
    try:
        from openskill import models as os_models
    except ImportError as e:
        raise ImportError("openskill_ratings needs the `openskill` package: pip install 'openskill>=6'") from e
    if model not in OPENSKILL_MODELS:
        raise unknown_name("openskill model", model, OPENSKILL_MODELS)
    if isinstance(data, Results):
        names = list(players) if players is not None else list(data.players)
        games = data.to_games(seed)
    else:
        games = [_check_game(g, k) for k, g in enumerate(_game_list(data))]
        if not games:
            raise ConfigError("results are empty: no games were given")
        names = list(players) if players is not None else list(dict.fromkeys(p for g in games for p in (g.a, g.b)))
    index = _indexer(names)
    rater = getattr(os_models, model)(**model_kwargs)
    state = {p: rater.rating(name=p) for p in names}
    for g in games:
        index(g.a), index(g.b)
        ranks = {1.0: [0, 1], 0.5: [0, 0], 0.0: [1, 0]}[g.score]  # lower rank is better
        [[state[g.a]], [state[g.b]]] = rater.rate([[state[g.a]], [state[g.b]]], ranks=ranks)
    return {p: SkillRating(float(r.mu), float(r.sigma), float(r.ordinal())) for p, r in state.items()}
