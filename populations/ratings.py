"""Ratings and the empirical payoff table: who beats whom, by how much, and how sure we are.

A population needs three kinds of answer from its match results, and each gets its own tool here.

**How strong is each member?** Ratings put every member on one line.

- *Elo* (online): the expected score of A against B is ``E_A = 1 / (1 + 10^((R_B - R_A) / 400))``, so a
  400-point gap means 10:1 odds. After each match ``R_A += K (S_A - E_A)`` with ``S_A`` in {1, ½, 0},
  and B moves by the opposite amount, so the sum of ratings never changes. Elo depends on the
  order of the matches.
- *Bradley–Terry* (batch): ``P(i beats j) = γ_i / (γ_i + γ_j)``, fitted to a whole win table by
  maximum likelihood with Hunter's (2004) MM algorithm and reported as ``400·log10 γ``, the Elo scale.
  It ignores match order, so it suits offline tournament tables.
- *OpenSkill* (online, Bayesian): each member is a Gaussian belief N(μ, σ²) about its skill
  (Weng & Lin 2011, Plackett–Luce model); σ says how sure the estimate is. We wrap the ``openskill``
  library rather than re-derive it.

All three are one-dimensional and transitive: none can express rock-paper-scissors cycles
(Balduzzi et al. 2018). The payoff table keeps the raw pairwise facts for the tools that can.

**What happens when A meets B?** :class:`PayoffTable` keeps, for every ordered member pair and
every pair of roles (seats) they played in, the counts of wins, draws and losses and the sums
needed for a mean return and its confidence interval. Recording a match is O(1), so scripted
players can feed it thousands of matches a second. Following the AlphaStar league (Vinyals et
al. 2019), an unplayed pair has win rate 0.5 and an optional decay (AlphaStar: 0.99) forgets old
matches, so the table tracks members that are still learning.

**Where should the next matches go?** :func:`uncertain_pairs` spends an evaluation budget on the
pairs whose winner is least certain, in the spirit of ResponseGraphUCB (Rowland et al. 2019): a
pair is resolved once the confidence interval of its win rate excludes 0.5.

>>> table = PayoffTable()
>>> for result in (1.0, 1.0, -1.0, 0.0):
...     table.record("alice", "bob", result)
>>> table.games("alice", "bob"), table.win_rate("alice", "bob"), table.win_rate("bob", "alice")
(4.0, 0.625, 0.375)
>>> elo = Elo()
>>> elo.add("alice"); elo.add("bob")
>>> elo.update("alice", "bob", 1.0)
>>> elo["alice"], elo["bob"]
(1016.0, 984.0)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Container, Sequence
from dataclasses import dataclass, fields
from statistics import NormalDist

import numpy as np
import pandas as pd
from openskill.models import PlackettLuce
from scipy.sparse.csgraph import connected_components
from scipy.stats import t as student_t

# ---------------------------------------------------------------------------------------------
# Elo
# ---------------------------------------------------------------------------------------------


def elo_expected(rating_a: float, rating_b: float) -> float:
    """Expected score of A against B: ``1 / (1 + 10^((R_B - R_A) / 400))``.

    This is A's win probability when draws count as half a win; equal ratings give 0.5.
    """
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


def elo_update(rating_a: float, rating_b: float, score_a: float, k: float = 32.0) -> tuple[float, float]:
    """Both ratings after one match: ``R_A + K (S_A - E_A)`` and ``R_B - K (S_A - E_A)``.

    ``score_a`` is A's result: 1 for a win, ½ for a draw, 0 for a loss. B's score is ``1 - S_A``
    and its expectation ``1 - E_A``, so B moves by exactly the opposite amount and the ratings'
    sum is conserved. K = 32 is the common convention (FIDE uses 40/20/10).
    """
    if not 0.0 <= score_a <= 1.0:
        raise ValueError(f"score_a must lie in [0, 1] (1 win, 0.5 draw, 0 loss), got {score_a}")
    change = k * (score_a - elo_expected(rating_a, rating_b))
    return rating_a + change, rating_b - change


def _check_opponents(a: str, b: str, known: Container[str]) -> None:
    """Raise unless ``a`` and ``b`` are two different registered players."""
    if a == b:
        raise ValueError(f"a player cannot be rated against itself, got {a!r} twice")
    for name in (a, b):
        if name not in known:
            raise KeyError(f"unknown player {name!r}; call add({name!r}) first")


class Elo:
    """Online Elo ratings for named players.

    >>> elo = Elo(k=32.0)
    >>> elo.add("a"); elo.add("b")
    >>> elo.update("a", "b", 0.5)
    >>> elo.ratings
    {'a': 1000.0, 'b': 1000.0}
    """

    def __init__(self, k: float = 32.0, initial: float = 1000.0) -> None:
        self.k = k
        self.initial = initial
        self._ratings: dict[str, float] = {}

    def add(self, name: str, rating: float | None = None) -> None:
        """Register a new player at ``rating`` (a snapshot starts where its member is), else the initial one."""
        if name in self._ratings:
            raise ValueError(f"player {name!r} is already rated; names must be unique")
        self._ratings[name] = self.initial if rating is None else float(rating)

    def set(self, name: str, rating: float) -> None:
        """Move a known player's rating (a PBT copy or a reset takes its origin's)."""
        self[name]
        self._ratings[name] = float(rating)

    def update(self, a: str, b: str, score_a: float) -> None:
        """Apply one match between ``a`` and ``b``; ``score_a`` is 1, ½ or 0 from a's side."""
        _check_opponents(a, b, self._ratings)
        self._ratings[a], self._ratings[b] = elo_update(self._ratings[a], self._ratings[b], score_a, self.k)

    def expected(self, a: str, b: str) -> float:
        """Expected score of ``a`` against ``b``."""
        return elo_expected(self[a], self[b])

    def __getitem__(self, name: str) -> float:
        if name not in self._ratings:
            raise KeyError(f"unknown player {name!r}; call add({name!r}) first")
        return self._ratings[name]

    @property
    def ratings(self) -> dict[str, float]:
        """A copy of every player's rating."""
        return dict(self._ratings)

    def state_dict(self) -> dict:
        """Everything needed to resume: K, the initial rating and every rating (JSON-serialisable)."""
        return {"k": self.k, "initial": self.initial, "ratings": dict(self._ratings)}

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` saved, replacing the current settings and ratings."""
        self.k = float(state["k"])
        self.initial = float(state["initial"])
        self._ratings = {name: float(rating) for name, rating in state["ratings"].items()}


# ---------------------------------------------------------------------------------------------
# Bradley–Terry
# ---------------------------------------------------------------------------------------------


def bradley_terry(
    wins: np.ndarray, max_iterations: int = 2000, tol: float = 1e-10, smoothing: float = 0.01
) -> np.ndarray:
    """Fit Bradley–Terry strengths to a win table; return Elo-scale ratings with minimum 0.

    Model: ``P(i beats j) = γ_i / (γ_i + γ_j)``. Hunter's (2004) MM algorithm, "MM algorithms for
    generalized Bradley–Terry models", Annals of Statistics 32(1), repeats

        γ_i ← W_i / Σ_{j≠i} n_ij / (γ_i + γ_j)

    which never lowers the likelihood and converges to the maximum-likelihood estimate when it
    exists. Ratings are ``400·log10 γ`` shifted so the weakest player is at 0, as in OpenSpiel's
    ``elo.compute_ratings_from_matrices`` (same defaults).

    Symbols: w_ij → ``wins[i, j]``, i's wins over j, fractional allowed (a draw is ½ to each side);
    W_i = Σ_j w_ij; n_ij = w_ij + w_ji games between i and j.

    The MLE is finite only if the "i beat j" graph is strongly connected (Zermelo 1929, Ford
    1957): a player who never lost would have γ = ∞. ``smoothing`` adds that many pseudo-wins each
    way to every pair of distinct players, a weak prior towards equal strength, so the estimate
    always exists; each player gets ``2·smoothing·(N−1)`` pseudo-games in all. With the default 0.01
    this reproduces OpenSpiel's golden example (see the tests). ``smoothing=0`` gives the plain MLE
    and raises ValueError when it does not exist. The diagonal (self-play) carries no information
    about relative strength and is ignored. Iteration stops when no log γ_i moves by ``tol`` or
    more, or after ``max_iterations`` with a RuntimeWarning. MM converges linearly, and slowly when
    a player's only losses are the pseudo-wins: in the tests' example, an undefeated player is
    still 0.002 points short after 2,000 iterations and needs about 3,000.

    Why every pair, not only pairs that have played: members with no games yet, or a group that
    has met nobody outside itself, still get finite, comparable ratings (pulled to the middle).
    """
    won_against = _smoothed_wins(wins, smoothing)  # (N, N) w_ij
    n = len(won_against)
    if n < 2:
        return np.zeros(n)
    games = won_against + won_against.T  # (N, N) n_ij
    total_wins = won_against.sum(axis=1)  # (N,) W_i
    gamma = np.ones(n)
    for _ in range(max_iterations):
        new = total_wins / (games / (gamma[:, None] + gamma[None, :])).sum(axis=1)
        new /= np.exp(np.log(new).mean())  # γ → cγ leaves every probability unchanged: fix the scale
        converged = np.abs(np.log(new) - np.log(gamma)).max() < tol
        gamma = new
        if converged:
            break
    else:
        warnings.warn(
            f"bradley_terry did not converge within {max_iterations} iterations (tol={tol}); "
            "raise max_iterations or smoothing",
            RuntimeWarning,
            stacklevel=2,
        )
    ratings = 400.0 * np.log10(gamma)
    return ratings - ratings.min()


def _smoothed_wins(wins: np.ndarray, smoothing: float) -> np.ndarray:
    """A validated float copy of ``wins`` with the diagonal zeroed and ``smoothing`` added off it."""
    wins = np.array(wins, dtype=float)
    if wins.ndim != 2 or wins.shape[0] != wins.shape[1]:
        raise ValueError(f"wins must be a square (N, N) matrix, got shape {wins.shape}")
    if not np.isfinite(wins).all() or (wins < 0).any():
        raise ValueError("wins must hold finite, non-negative counts")
    if smoothing < 0:
        raise ValueError(f"smoothing must be >= 0, got {smoothing}")
    off_diagonal = ~np.eye(len(wins), dtype=bool)
    wins = np.where(off_diagonal, wins + smoothing, 0.0)
    n_components, _ = connected_components(wins > 0, directed=True, connection="strong")
    if len(wins) > 1 and n_components > 1:
        raise ValueError(
            "no finite Bradley–Terry ratings: some group of players never beat (or never lost to) "
            "the rest; pass smoothing > 0"
        )
    return wins


# ---------------------------------------------------------------------------------------------
# OpenSkill
# ---------------------------------------------------------------------------------------------


_SCORES = (0.0, 0.5, 1.0)  # a loss, a draw, a win


class OpenSkill:
    """Weng–Lin Bayesian ratings (``openskill.models.PlackettLuce``) for named players, one-on-one.

    Each player's skill is a belief N(μ, σ²), from μ = 25, σ = 25/3 by default. ``model_kwargs`` go
    to ``PlackettLuce`` unchanged (mu, sigma, beta, kappa, tau, ...). The conservative
    ``ordinal = μ − 3σ`` ranks a player by the skill it has with high confidence.

    >>> skill = OpenSkill()
    >>> skill.add("a"); skill.add("b")
    >>> skill.update("a", "b", 1.0)
    >>> round(skill.mu("a"), 3), round(skill.sigma("a"), 3), round(skill.predict_win("a", "b"), 3)
    (27.635, 8.066, 0.659)
    """

    def __init__(self, **model_kwargs) -> None:
        self.model = PlackettLuce(**model_kwargs)
        self._ratings: dict = {}  # name -> PlackettLuceRating

    def add(self, name: str, mu: float | None = None, sigma: float | None = None) -> None:
        """Register a new player at (μ, σ), by default the model's prior."""
        if name in self._ratings:
            raise ValueError(f"player {name!r} is already rated; names must be unique")
        self._ratings[name] = self.model.rating(mu=mu, sigma=sigma, name=name)

    def set(self, name: str, mu: float, sigma: float) -> None:
        """Replace a known player's belief (a PBT copy or a reset takes its origin's)."""
        self._rating(name)
        self._ratings[name] = self.model.rating(mu=mu, sigma=sigma, name=name)

    def update(self, a: str, b: str, score_a: float) -> None:
        """Apply one match: ``score_a`` 1 (a won), 0 (b won) or 0.5 (a draw, i.e. equal ranks)."""
        _check_opponents(a, b, self._ratings)
        if score_a not in _SCORES:
            raise ValueError(f"score_a must be 1, 0.5 or 0, got {score_a}")
        ra, rb = self._ratings[a], self._ratings[b]
        if score_a == 0.5:
            [[ra], [rb]] = self.model.rate([[ra], [rb]], ranks=[1, 1])  # equal ranks: a draw
        elif score_a == 1:  # teams in finishing order: the library's fast path, no ranks to sort
            [[ra], [rb]] = self.model.rate([[ra], [rb]])
        else:
            [[rb], [ra]] = self.model.rate([[rb], [ra]])
        self._ratings[a], self._ratings[b] = ra, rb

    def predict_win(self, a: str, b: str) -> float:
        """The model's probability that ``a`` beats ``b``."""
        _check_opponents(a, b, self._ratings)
        return float(self.model.predict_win([[self._ratings[a]], [self._ratings[b]]])[0])

    def ordinal(self, name: str) -> float:
        """Conservative skill ``μ − 3σ``: what the player is very likely at least worth."""
        return float(self._rating(name).ordinal())

    def mu(self, name: str) -> float:
        """Mean of the skill belief."""
        return float(self._rating(name).mu)

    def sigma(self, name: str) -> float:
        """Standard deviation of the skill belief: how unsure the rating still is."""
        return float(self._rating(name).sigma)

    def _rating(self, name: str):
        if name not in self._ratings:
            raise KeyError(f"unknown player {name!r}; call add({name!r}) first")
        return self._ratings[name]

    def state_dict(self) -> dict:
        """μ and σ per player (JSON-serialisable). The model's settings come from the constructor."""
        return {"ratings": {name: {"mu": r.mu, "sigma": r.sigma} for name, r in self._ratings.items()}}

    def load_state_dict(self, state: dict) -> None:
        """Replace every rating with those :meth:`state_dict` saved."""
        self._ratings = {
            name: self.model.rating(mu=float(r["mu"]), sigma=float(r["sigma"]), name=name)
            for name, r in state["ratings"].items()
        }


# ---------------------------------------------------------------------------------------------
# Payoff table
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Counts:
    """Running counters for one (roles, a, b) cell, from a's side. Every field adds up across cells.

    With decay each match has a weight ``decay^age``: ``games`` is Σw, ``weight_sq`` is Σw², and
    ``total``/``total_sq`` are Σw·x and Σw·x² over a's returns x. Without decay w = 1, so ``games``
    is the plain count. Sums (rather than Welford's running variance) are kept because they add,
    which makes aggregating over role pairs a sum of counters.
    """

    games: float = 0.0
    wins: float = 0.0
    draws: float = 0.0
    losses: float = 0.0
    total: float = 0.0
    total_sq: float = 0.0
    weight_sq: float = 0.0

    def forget(self, decay: float) -> None:
        """Age every past match by one step (AlphaStar: multiply each counter by the decay)."""
        self.games *= decay
        self.wins *= decay
        self.draws *= decay
        self.losses *= decay
        self.total *= decay
        self.total_sq *= decay
        self.weight_sq *= decay * decay

    def values(self) -> tuple[float, ...]:
        """The counters in field order."""
        return (self.games, self.wins, self.draws, self.losses, self.total, self.total_sq, self.weight_sq)

    def observe(self, own: float, other: float) -> None:
        """Add one match in which this side got ``own`` and the opponent ``other``."""
        self.games += 1.0
        self.wins += own > other
        self.draws += own == other
        self.losses += own < other
        self.total += own
        self.total_sq += own * own
        self.weight_sq += 1.0


_FIELDS = [f.name for f in fields(_Counts)]


class PayoffTable:
    """Empirical payoffs between members, per ordered pair and per pair of roles.

    A cell is keyed by roles (role_a, role_b) and members (a, b) and describes a's results when a
    played ``role_a`` against b in ``role_b``. Every match is stored from both sides. Queries with
    ``roles=None`` add up a pair's cells over every role pair.

    A match is a win for the side with the higher return, a draw on equal returns, in
    general-sum games too (as in ``populations.tournament.standings``).

    ``decay`` < 1 forgets old matches the AlphaStar way: before a cell takes a new match, all its
    counters are multiplied by ``decay`` (AlphaStar: 0.99), so a match k updates ago weighs
    ``decay^k``. Counts (``games``, wins, ...) are then these weighted sums, and intervals use the
    effective sample size ``(Σw)² / Σw²``.

    >>> table = PayoffTable()
    >>> table.record("a", "b", 1.0, roles=("player_0", "player_1"))
    >>> table.record("b", "a", 0.0, roles=("player_0", "player_1"))
    >>> table.win_rate("a", "b"), table.win_rate("a", "b", roles=("player_0", "player_1"))
    (0.75, 1.0)
    >>> table.mean("a", "b", roles=("player_1", "player_0"))
    0.0
    """

    def __init__(self, decay: float = 1.0) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must lie in (0, 1] (1 keeps every match; AlphaStar uses 0.99), got {decay}")
        self.decay = decay
        self._cells: dict[tuple[str, str], dict[tuple[str, str], _Counts]] = {}  # (a, b) -> roles -> counts

    def record(
        self, a: str, b: str, return_a: float, roles: tuple[str, str] = ("", ""), return_b: float | None = None
    ) -> None:
        """Record one match between ``a`` (in ``roles[0]``) and ``b`` (in ``roles[1]``). O(1).

        ``return_b`` defaults to ``-return_a`` (zero-sum); pass it for general-sum games. When a
        member plays itself in the same role, both sides land in one cell, which ages once per match.
        """
        if return_b is None:
            return_b = -return_a
        if not (math.isfinite(return_a) and math.isfinite(return_b)):
            raise ValueError(f"returns must be finite, got return_a={return_a}, return_b={return_b}")
        role_a, role_b = roles
        forward = self._cell(a, b, (role_a, role_b))
        backward = self._cell(b, a, (role_b, role_a))
        if self.decay != 1.0:
            forward.forget(self.decay)
            if backward is not forward:
                backward.forget(self.decay)
        forward.observe(return_a, return_b)
        backward.observe(return_b, return_a)

    def _cell(self, a: str, b: str, roles: tuple[str, str]) -> _Counts:
        by_roles = self._cells.setdefault((a, b), {})
        counts = by_roles.get(roles)
        if counts is None:
            counts = by_roles[roles] = _Counts()
        return counts

    def _counts(self, a: str, b: str, roles: tuple[str, str] | None) -> _Counts:
        """a's counters against b in ``roles``, or summed over every role pair when ``roles`` is None."""
        by_roles = self._cells.get((a, b), {})
        if roles is not None:
            return by_roles.get(tuple(roles), _Counts())
        columns = zip(*(counts.values() for counts in by_roles.values()), strict=True)  # one tuple per field
        return _Counts(*map(sum, columns))

    def games(self, a: str, b: str, roles: tuple[str, str] | None = None) -> float:
        """Matches a played against b (a weighted count when decay < 1)."""
        return self._counts(a, b, roles).games

    def win_rate(self, a: str, b: str, roles: tuple[str, str] | None = None) -> float:
        """``(wins + ½ draws) / games`` for a against b; 0.5 before any game (AlphaStar's prior)."""
        c = self._counts(a, b, roles)
        return (c.wins + 0.5 * c.draws) / c.games if c.games > 0 else 0.5

    def mean(self, a: str, b: str, roles: tuple[str, str] | None = None) -> float:
        """a's mean return against b; NaN before any game."""
        c = self._counts(a, b, roles)
        return c.total / c.games if c.games > 0 else math.nan

    def interval(
        self, a: str, b: str, roles: tuple[str, str] | None = None, confidence: float = 0.95
    ) -> tuple[float, float]:
        """Student-t confidence interval for a's mean return against b.

        ``mean ± t_{n−1} · s / √n`` with s the sample standard deviation (n the effective sample
        size under decay). Fewer than two games say nothing about the spread, so the interval is
        then (−inf, inf): the t interval with 0 degrees of freedom is unbounded. When every return
        was the same the interval collapses to that value; :meth:`win_rate_interval` stays honest
        in that case.
        """
        lo, hi = _mean_interval(_as_arrays([self._counts(a, b, roles)]), confidence)
        return float(lo[0]), float(hi[0])

    def win_rate_interval(
        self, a: str, b: str, roles: tuple[str, str] | None = None, confidence: float = 0.95
    ) -> tuple[float, float]:
        """Wilson score interval for a's win rate against b (draws count ½); (0, 1) before any game."""
        lo, hi = _wilson_interval(_as_arrays([self._counts(a, b, roles)]), confidence)
        return float(lo[0]), float(hi[0])

    def matrix(self, names: Sequence[str], roles: tuple[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Mean return of row against column (NaN where unplayed) and the game counts, both (N, N)."""
        stacked = self._stack(names, roles)
        games, total = stacked["games"], stacked["total"]
        means = np.divide(total, games, out=np.full_like(total, np.nan), where=games > 0)
        return means, games

    def wins_matrix(self, names: Sequence[str], roles: tuple[str, str] | None = None) -> np.ndarray:
        """``wins + ½ draws`` of row over column, (N, N): the input :func:`bradley_terry` expects."""
        stacked = self._stack(names, roles)
        return stacked["wins"] + 0.5 * stacked["draws"]

    def win_rate_matrix(self, rows: Sequence[str], columns: Sequence[str]) -> np.ndarray:
        """Win rates of each row player against each column player over every role pair, ½ where
        unplayed: (len(rows), len(columns)) in one pass over the stored cells, for matchmakers
        that weigh hundreds of candidates at once."""
        counts = self._stack(rows, None, ("games", "wins", "draws"), columns)
        scores = counts["wins"] + 0.5 * counts["draws"]
        return np.divide(scores, counts["games"], out=np.full_like(scores, 0.5), where=counts["games"] > 0)

    def _stack(
        self, names: Sequence[str], roles: tuple[str, str] | None, only: Sequence[str] = tuple(_FIELDS),
        columns: Sequence[str] | None = None,
    ) -> dict[str, np.ndarray]:  # fmt: skip
        """The ``only`` counters as (N, M) arrays, rows ``names`` against ``columns`` (default the
        same names), summed over role pairs when ``roles`` is None.

        Walks the stored cells once, so it costs O(cells), never more than O(N·M · role pairs).
        """
        index = {name: i for i, name in enumerate(names)}
        if len(index) != len(names):
            raise ValueError(f"names must be distinct, got {list(names)}")
        column_index = index if columns is None else {name: j for j, name in enumerate(columns)}
        wanted = [_FIELDS.index(f) for f in only]
        rows, cols, values = [], [], []
        for (a, b), by_roles in self._cells.items():
            i, j = index.get(a), column_index.get(b)
            if i is None or j is None:
                continue
            for cell_roles, counts in by_roles.items():
                if roles is None or cell_roles == tuple(roles):
                    rows.append(i)
                    cols.append(j)
                    values.append(counts.values())
        shape = (len(names), len(column_index))
        stacked = {field: np.zeros(shape) for field in only}
        if values:
            table = np.array(values)[:, wanted]  # (cells, fields)
            for k, field in enumerate(only):
                np.add.at(stacked[field], (rows, cols), table[:, k])
        return stacked

    def role_pairs(self) -> list[tuple[str, str]]:
        """Every (role_a, role_b) seen, both orientations, sorted."""
        return sorted({roles for by_roles in self._cells.values() for roles in by_roles})

    def state_dict(self) -> dict:
        """The decay and one row per cell: role_a, role_b, a, b, then the counters (JSON-serialisable)."""
        cells = [
            [role_a, role_b, a, b, *counts.values()]
            for (a, b), by_roles in self._cells.items()
            for (role_a, role_b), counts in by_roles.items()
        ]
        return {"decay": self.decay, "cells": cells}

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` saved, replacing the decay and every cell."""
        self.decay = float(state["decay"])
        self._cells = {}
        for role_a, role_b, a, b, *counters in state["cells"]:
            self._cells.setdefault((a, b), {})[(role_a, role_b)] = _Counts(*map(float, counters))

    def to_frame(self, confidence: float = 0.95) -> pd.DataFrame:
        """One row per cell: role_a, role_b, a, b, games, wins, draws, losses, mean and its interval lo, hi."""
        keys = sorted(
            ((roles, pair, counts) for pair, by_roles in self._cells.items() for roles, counts in by_roles.items()),
            key=lambda key: key[:2],
        )
        counters = _as_arrays([counts for _, _, counts in keys])
        lo, hi = _mean_interval(counters, confidence)
        games = counters["games"]
        return pd.DataFrame(
            {
                "role_a": [roles[0] for roles, _, _ in keys],
                "role_b": [roles[1] for roles, _, _ in keys],
                "a": [pair[0] for _, pair, _ in keys],
                "b": [pair[1] for _, pair, _ in keys],
                "games": games,
                "wins": counters["wins"],
                "draws": counters["draws"],
                "losses": counters["losses"],
                "mean": np.divide(counters["total"], games, out=np.full_like(games, np.nan), where=games > 0),
                "lo": lo,
                "hi": hi,
            }
        )


def _as_arrays(cells: Sequence[_Counts]) -> dict[str, np.ndarray]:
    """Counters of many cells as one array per field, shape (cells,)."""
    columns = np.array([c.values() for c in cells], dtype=float).reshape(len(cells), len(_FIELDS))
    return dict(zip(_FIELDS, columns.T, strict=True))


def _effective_size(counters: dict[str, np.ndarray]) -> np.ndarray:
    """Kish's effective sample size ``(Σw)² / Σw²``: the plain game count when there is no decay."""
    games, weight_sq = counters["games"], counters["weight_sq"]
    return np.divide(games**2, weight_sq, out=np.zeros_like(games), where=weight_sq > 0)


def _two_sided(confidence: float) -> float:
    """The upper quantile ``(1 + confidence) / 2`` of a two-sided interval."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return (1.0 + confidence) / 2.0


def _mean_interval(counters: dict[str, np.ndarray], confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Student-t interval of the weighted mean, elementwise; (−inf, inf) where n_eff ≤ 1.

    1) mean = Σwx / Σw;
    2) unbiased variance for reliability weights s² = (Σwx² − (Σwx)²/Σw) / (Σw − Σw²/Σw),
       the usual (Σx² − (Σx)²/n) / (n − 1) when every w = 1;
    3) half-width t_{n_eff−1} · s / √n_eff.
    """
    q = _two_sided(confidence)
    games, total, total_sq, weight_sq = (counters[k] for k in ("games", "total", "total_sq", "weight_sq"))
    n_eff = _effective_size(counters)
    lo, hi = np.full_like(games, -np.inf), np.full_like(games, np.inf)
    ok = n_eff > 1.0
    mean = total[ok] / games[ok]
    variance = (total_sq[ok] - total[ok] * mean) / (games[ok] - weight_sq[ok] / games[ok])
    half = student_t.ppf(q, n_eff[ok] - 1.0) * np.sqrt(np.maximum(variance, 0.0) / n_eff[ok])
    lo[ok], hi[ok] = mean - half, mean + half
    return lo, hi


def _wilson_interval(counters: dict[str, np.ndarray], confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson (1927) score interval for the win rate, elementwise; (0, 1) where unplayed.

    With p = (wins + ½ draws) / games, n the effective sample size and z the normal quantile:
    ``(p + z²/2n ± z √(p(1−p)/n + z²/4n²)) / (1 + z²/n)``. Unlike p ± z√(p(1−p)/n) it never
    collapses to a point at p = 0 or 1 and always stays inside [0, 1].
    """
    z = NormalDist().inv_cdf(_two_sided(confidence))
    games = counters["games"]
    n = _effective_size(counters)
    lo, hi = np.zeros_like(games), np.ones_like(games)
    ok = games > 0
    p = (counters["wins"][ok] + 0.5 * counters["draws"][ok]) / games[ok]
    centre = (p + z**2 / (2 * n[ok])) / (1 + z**2 / n[ok])
    half = z / (1 + z**2 / n[ok]) * np.sqrt(p * (1 - p) / n[ok] + z**2 / (4 * n[ok] ** 2))
    lo[ok], hi[ok] = centre - half, centre + half
    return lo, hi


# ---------------------------------------------------------------------------------------------
# Evaluation scheduling
# ---------------------------------------------------------------------------------------------


def uncertain_pairs(
    table: PayoffTable, names: Sequence[str], budget: int, rng: np.random.Generator, confidence: float = 0.95
) -> list[tuple[str, str]]:
    """Choose ``budget`` matches among the pairs whose winner is least certain.

    In the spirit of ResponseGraphUCB (Rowland et al. 2019, "Multiagent evaluation under
    incomplete information"): a pair is resolved once the Wilson interval of its win rate
    (all role pairs together) excludes 0.5, because the direction of its edge in the response
    graph is then known. Each unordered pair {a, b} scores how far its interval reaches past 0.5
    on the shorter side, ``min(hi − 0.5, 0.5 − lo)``: how much it must still shrink.

    1) Unplayed pairs score 0.5, more than any played pair (Wilson's half-width at p = ½ is
       z / 2√(n + z²) < ½), so they are chosen first.
    2) The budget is shared in proportion to the scores (largest remainders, ties broken by
       ``rng``), so the most uncertain pairs may appear several times.
    3) If every pair is resolved, the widest intervals get the budget instead: more games still
       sharpen the ratings.

    Returns (a, b) with a before b in ``names``, most uncertain first; which seat each plays is
    the caller's choice. Costs O(N²) per call: a population of 256 members has 32,640 pairs.
    Call it once per evaluation round, not per match.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if len(names) < 2:
        raise ValueError(f"need at least two members to pair, got {list(names)}")
    stacked = table._stack(names, None, ("games", "wins", "draws", "weight_sq"))
    row, col = np.triu_indices(len(names), k=1)  # (P,) each unordered pair once, P = N(N−1)/2
    lo, hi = _wilson_interval({k: v[row, col] for k, v in stacked.items()}, confidence)
    straddle = np.minimum(hi - 0.5, 0.5 - lo)  # (P,) > 0 exactly when 0.5 is inside the interval
    scores = np.maximum(straddle, 0.0) if (straddle > 0).any() else hi - lo
    tiebreak = rng.random(len(scores))
    counts = _apportion(scores, budget, tiebreak)
    chosen = np.flatnonzero(counts)  # order only the pairs that get matches: P is N²/2
    priority = chosen[np.lexsort((tiebreak[chosen], -scores[chosen]))]
    return [(names[row[p]], names[col[p]]) for p in priority for _ in range(counts[p])]


def _apportion(scores: np.ndarray, budget: int, tiebreak: np.ndarray) -> np.ndarray:
    """Split ``budget`` whole matches in proportion to ``scores`` (Hamilton's largest remainders).

    Each pair first gets the whole part of its quota ``budget · score / Σscore``; the matches
    left go to the largest fractional parts, ties to the smaller ``tiebreak``. When the budget
    is smaller than the number of scored pairs this picks the ``budget`` highest scores.
    """
    quota = budget * scores / scores.sum()
    counts = np.floor(quota).astype(int)
    left = int(budget - counts.sum())
    if left <= 0:
        return counts
    remainder = quota - counts
    threshold = np.partition(remainder, len(remainder) - left)[len(remainder) - left]  # O(P), no full sort
    above = np.flatnonzero(remainder > threshold)
    ties = np.flatnonzero(remainder == threshold)
    counts[above] += 1
    need = left - len(above)
    first = np.argpartition(tiebreak[ties], need - 1)[:need] if need < len(ties) else slice(None)
    counts[ties[first]] += 1  # the tied pairs with the smallest tiebreaks
    return counts
