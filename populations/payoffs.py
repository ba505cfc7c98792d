"""The empirical payoff table, and where the next evaluation matches should go.

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from statistics import NormalDist

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

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
        # Over every role pair, dense by player index: games, score (wins + ½ draws), Σw². Kept up
        # to date per match so matchmakers and the scheduler read whole blocks without a pass over
        # the cells (8·3 bytes per ordered pair: 24 MiB at 1,000 players).
        self._index: dict[str, int] = {}
        self._dense = np.zeros((3, 0, 0))

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
        self._aggregate(a, b)
        self._aggregate(b, a)

    def _aggregate(self, a: str, b: str) -> None:
        """Refresh the dense totals of (a, b) from its cells (a few role pairs)."""
        i, j = self._player(a), self._player(b)
        games = score = weight_sq = 0.0
        for c in self._cells[(a, b)].values():
            games += c.games
            score += c.wins + 0.5 * c.draws
            weight_sq += c.weight_sq
        self._dense[0, i, j], self._dense[1, i, j], self._dense[2, i, j] = games, score, weight_sq

    def _player(self, name: str) -> int:
        index = self._index.get(name)
        if index is None:
            index = self._index[name] = len(self._index)
            if index >= self._dense.shape[1]:  # grow by doubling: amortised O(1)
                grown = np.zeros((3, 2 * index + 8, 2 * index + 8))
                grown[:, :index, :index] = self._dense[:, :index, :index]
                self._dense = grown
        return index

    def _block(self, rows: Sequence[str], columns: Sequence[str]) -> np.ndarray:
        """(3, R, C) dense totals — games, score, Σw² — of rows against columns; 0 where unplayed."""
        r = np.array([self._index.get(n, -1) for n in rows], dtype=int)
        c = np.array([self._index.get(n, -1) for n in columns], dtype=int)
        if (r >= 0).all() and (c >= 0).all():  # the usual case: two contiguous takes, no scatter
            return self._dense.take(r, axis=1).take(c, axis=2)
        block = np.zeros((3, len(rows), len(columns)))
        known_r, known_c = np.flatnonzero(r >= 0), np.flatnonzero(c >= 0)
        block[:, known_r[:, None], known_c[None, :]] = self._dense[:, r[known_r][:, None], c[known_c][None, :]]
        return block

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
        unplayed: (len(rows), len(columns)) read from the dense totals, for matchmakers that weigh
        hundreds of candidates at once."""
        games, score, _ = self._block(rows, columns)
        return np.divide(score, games, out=np.full_like(score, 0.5), where=games > 0)

    def _stack(self, names: Sequence[str], roles: tuple[str, str] | None) -> dict[str, np.ndarray]:
        """Every counter as an (N, N) array over ``names``, summed over role pairs when ``roles`` is None.

        Walks the stored cells once, so it costs O(cells), never more than O(N² · role pairs).
        """
        index = {name: i for i, name in enumerate(names)}
        if len(index) != len(names):
            raise ValueError(f"names must be distinct, got {list(names)}")
        stacked = np.zeros((len(_FIELDS), len(names), len(names)))  # (fields, N, N)
        for (a, b), by_roles in self._cells.items():
            i, j = index.get(a), index.get(b)
            if i is None or j is None:
                continue
            for cell_roles, counts in by_roles.items():
                if roles is None or cell_roles == tuple(roles):
                    stacked[:, i, j] += counts.values()
        return dict(zip(_FIELDS, stacked, strict=True))

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
        self._index, self._dense = {}, np.zeros((3, 0, 0))
        for role_a, role_b, a, b, *counters in state["cells"]:
            self._cells.setdefault((a, b), {})[(role_a, role_b)] = _Counts(*map(float, counters))
        for a, b in self._cells:
            self._aggregate(a, b)

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
    if len(set(names)) != len(names):
        raise ValueError(f"names must be distinct, got {list(names)}")
    games, score, weight_sq = table._block(names, names)
    row, col = np.triu_indices(len(names), k=1)  # (P,) each unordered pair once, P = N(N−1)/2
    pairs = {"games": games[row, col], "wins": score[row, col], "draws": np.zeros(len(row)), "weight_sq": weight_sq[row, col]}
    lo, hi = _wilson_interval(pairs, confidence)  # "wins" carries the score: wins + ½ draws
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
