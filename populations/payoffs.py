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

import base64
import math
import sys
from array import array
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
    """The counters of one (roles, a, b) cell, from a's side, or of several cells added up.

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

    def values(self) -> tuple[float, ...]:
        """The counters in field order."""
        return (self.games, self.wins, self.draws, self.losses, self.total, self.total_sq, self.weight_sq)


_FIELDS = [f.name for f in fields(_Counts)]
_WIDTH = len(_FIELDS)
_GAMES, _WINS, _DRAWS, _LOSSES, _TOTAL, _TOTAL_SQ, _WEIGHT_SQ = range(_WIDTH)


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
        self._clear()

    def _clear(self) -> None:
        # Cells live in one flat array of floats, _WIDTH per cell, found by (a, b, role_a, role_b).
        # A population of 256 members fills ~10⁵ cells: as objects, every garbage collection would
        # walk them all; as an array of floats and a dict of strings, the collector skips them.
        self._slots: dict[tuple[str, str, str, str], int] = {}
        self._counters = array("d")
        self._keys = array("i")  # per cell: a's and b's player indices, role_a's and role_b's role indices
        self._mirrors = array("i")  # per cell: the number of its mirror cell, b's side of the same matches
        self._roles: dict[str, int] = {}
        self._role_pairs: dict[tuple[str, str], None] = {}  # every (role_a, role_b) seen: a few
        # Over every role pair, dense by player index: games, score (wins + ½ draws), Σw², so
        # matchmakers and the scheduler read whole blocks without a pass over the cells (8·3 bytes
        # per ordered pair: 24 MiB at 1,000 players). Pairs recorded since the last read are
        # refreshed together on the next one: once per pair and batch, not twice per match.
        self._index: dict[str, int] = {}
        self._dense = np.zeros((3, 0, 0))
        self._stale: set[tuple[str, str]] = set()
        self._pending: list[tuple[str, str, str, str]] = []  # cells of matches recorded, not yet added
        self._pending_returns = array("d")  # their returns: a's, b's, a's, ...

    def record(
        self, a: str, b: str, return_a: float, roles: tuple[str, str] = ("", ""), return_b: float | None = None
    ) -> None:
        """Record one match between ``a`` (in ``roles[0]``) and ``b`` (in ``roles[1]``). O(1).

        ``return_b`` defaults to ``-return_a`` (zero-sum); pass it for general-sum games. When a
        member plays itself in the same role, both sides land in one cell, which ages once per match.
        """
        self.record_many([(a, b, *roles)], [return_a, -return_a if return_b is None else return_b])

    def record_many(self, cells: Sequence[tuple[str, str, str, str]], returns: Sequence[float]) -> None:
        """Record ``len(cells)`` matches at once, as a population does after each batch of episodes.

        Match i is ``cells[i] = (a, b, role_a, role_b)`` with returns ``returns[2i]`` (a's) and
        ``returns[2i + 1]`` (b's): one check and two list extensions for the whole batch.
        """
        if len(returns) != 2 * len(cells):
            raise ValueError(f"need two returns per match: {len(cells)} matches, {len(returns)} returns")
        if not np.isfinite(returns).all():
            raise ValueError(f"returns must be finite, got {[x for x in returns if not math.isfinite(x)]}")
        self._pending.extend(cells)
        self._pending_returns.extend(returns)

    def _flush(self) -> None:
        """Add the matches recorded since the last read to their cells.

        Matches wait in a list until something reads the table (a few µs per match saved: a
        population records thousands of matches between two reads). Without decay they are
        added all at once, to the cells and the dense totals; with decay each cell ages before
        each of its matches, so in order, and the totals of the pairs it touched are recomputed.
        """
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        returns = np.frombuffer(self._pending_returns, dtype=float).reshape(-1, 2)  # (M, 2): a's, b's
        self._pending_returns = array("d")
        forward = np.array(self._offsets(pending)) // _WIDTH  # (M,) cell numbers
        cells = np.stack([forward, np.frombuffer(self._mirrors, dtype=np.int32)[forward]], axis=1)  # (M, 2)
        if self.decay != 1.0:
            for (f, g), (a, b, _, _), (x, y) in zip((cells * _WIDTH).tolist(), pending, returns.tolist(), strict=True):
                self._forget(f)
                if g != f:
                    self._forget(g)
                self._observe(f, x, y)
                self._observe(g, y, x)
                self._stale.update(((a, b), (b, a)))  # aged cells: totals recomputed on the next read
            return
        cells = cells.reshape(-1)  # (2M,): forward, backward, ...
        x, y = np.stack([returns, returns[:, ::-1]], axis=1).reshape(-1, 2).T  # (2M,) each, in the same order
        one = np.ones_like(x)
        rows = np.stack([one, x > y, x == y, x < y, x, x * x, one], axis=1)  # (2M, fields), in _FIELDS order
        counters = np.frombuffer(self._counters, dtype=float).reshape(-1, _WIDTH)  # a view: no resizing meanwhile
        np.add.at(counters, cells, rows)
        del counters
        players = np.frombuffer(self._keys, dtype=np.int32).reshape(-1, 4)[cells, :2].T  # (2, 2M): i, j
        for plane, added in zip(self._dense, (one, rows[:, _WINS] + 0.5 * rows[:, _DRAWS], one)):  # games, score, Σw²
            np.add.at(plane, tuple(players), added)

    def _offsets(self, keys: list[tuple[str, str, str, str]]) -> list[int]:
        """Each (a, b, role_a, role_b) cell's offset in the counter array, appending zeroed cells
        for the new ones and their mirrors (b, a, role_b, role_a), where b's side of a's matches
        goes. New cells are made together (a population of 256 members meets a new pair in most
        of its matches: one at a time, making cells took a third of its bookkeeping)."""
        slots = self._slots
        new = [key for key in dict.fromkeys(keys) if key not in slots]
        if new:
            fresh = dict.fromkeys(new)
            new += [m for a, b, r, s in fresh if (m := (b, a, s, r)) not in slots and m not in fresh]
            start = len(self._counters)
            slots.update(zip(new, range(start, start + _WIDTH * len(new), _WIDTH)))
            self._counters.frombytes(bytes(self._counters.itemsize * _WIDTH * len(new)))
            self._mirrors.extend([slots[b, a, s, r] // _WIDTH for a, b, r, s in new])
            self._role_pairs.update(dict.fromkeys((role_a, role_b) for _, _, role_a, role_b in new))
            for role_a, role_b in self._role_pairs:
                for role in (role_a, role_b):
                    self._roles.setdefault(role, len(self._roles))
            index, role = self._index, self._roles
            for name in dict.fromkeys(name for a, b, _, _ in new for name in (a, b)):  # by first appearance
                if name not in index:
                    self._player(name)
            self._keys.extend([i for a, b, r, s in new for i in (index[a], index[b], role[r], role[s])])
        return list(map(slots.__getitem__, keys))

    def _forget(self, at: int) -> None:
        """Age every past match of the cell at ``at`` by one step (AlphaStar: multiply each counter by the decay)."""
        c = self._counters
        for k in range(at, at + _WEIGHT_SQ):
            c[k] *= self.decay
        c[at + _WEIGHT_SQ] *= self.decay * self.decay

    def _observe(self, at: int, own: float, other: float) -> None:
        """Add to the cell at ``at`` one match in which its side got ``own`` and the opponent ``other``."""
        c = self._counters
        c[at + _GAMES] += 1.0
        c[at + _WINS] += own > other
        c[at + _DRAWS] += own == other
        c[at + _LOSSES] += own < other
        c[at + _TOTAL] += own
        c[at + _TOTAL_SQ] += own * own
        c[at + _WEIGHT_SQ] += 1.0

    def _cell(self, a: str, b: str, roles: tuple[str, str]) -> _Counts | None:
        at = self._slots.get((a, b, *roles))
        return None if at is None else _Counts(*self._counters[at : at + _WIDTH])

    def _refresh(self) -> None:
        """Bring the dense totals of every pair recorded since the last read up to date."""
        self._flush()
        if not self._stale:
            return
        rows, columns, totals = [], [], []
        slots, c = self._slots, self._counters
        for a, b in self._stale:
            rows.append(self._player(a))
            columns.append(self._player(b))
            games = score = weight_sq = 0.0
            for role_a, role_b in self._role_pairs:  # a few
                at = slots.get((a, b, role_a, role_b))
                if at is not None:
                    games += c[at + _GAMES]
                    score += c[at + _WINS] + 0.5 * c[at + _DRAWS]
                    weight_sq += c[at + _WEIGHT_SQ]
            totals.append((games, score, weight_sq))
        self._dense[:, rows, columns] = np.array(totals).T
        self._stale.clear()

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
        self._refresh()
        r = np.array([self._index.get(n, -1) for n in rows], dtype=int)
        c = np.array([self._index.get(n, -1) for n in columns], dtype=int)
        if (r >= 0).all() and (c >= 0).all():  # the usual case: two contiguous takes, no scatter
            return self._dense.take(r, axis=1).take(c, axis=2)
        block = np.zeros((3, len(rows), len(columns)))
        known_r, known_c = np.flatnonzero(r >= 0), np.flatnonzero(c >= 0)
        block[:, known_r[:, None], known_c[None, :]] = self._dense[:, r[known_r][:, None], c[known_c][None, :]]
        return block

    def _played_pairs(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """The unordered pairs of ``names`` that have met, as positions i < j in ``names``, sorted,
        with their totals from i's side (``wins`` holds the score, wins + ½ draws). Reads only the
        pairs that met, not the N² that may not have."""
        self._refresh()
        known = len(self._index)
        position = np.full(known, -1)
        for p, name in enumerate(names):
            if name in self._index:
                position[self._index[name]] = p
        ti, tj = np.nonzero(self._dense[0, :known, :known] > 0)
        pi, pj = position[ti], position[tj]
        keep = (pi >= 0) & (pi < pj)
        order = np.lexsort((pj[keep], pi[keep]))
        ti, tj, pi, pj = ti[keep][order], tj[keep][order], pi[keep][order], pj[keep][order]
        games, score, weight_sq = self._dense[:, ti, tj]
        return pi, pj, {"games": games, "wins": score, "draws": np.zeros(len(pi)), "weight_sq": weight_sq}

    def _counts(self, a: str, b: str, roles: tuple[str, str] | None) -> _Counts:
        """a's counters against b in ``roles``, or summed over every role pair when ``roles`` is None."""
        self._flush()
        if roles is not None:
            return self._cell(a, b, tuple(roles)) or _Counts()
        cells = [c for pair in self._role_pairs if (c := self._cell(a, b, pair)) is not None]
        return _Counts(*map(sum, zip(*(c.values() for c in cells), strict=True))) if cells else _Counts()

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

        Reads the stored cells once, so it costs O(cells), never more than O(N² · role pairs).
        """
        index = {name: i for i, name in enumerate(names)}
        if len(index) != len(names):
            raise ValueError(f"names must be distinct, got {list(names)}")
        keys, values = self._rows()
        rows = np.array([index.get(a, -1) for a, _, _, _ in keys], dtype=int)
        columns = np.array([index.get(b, -1) for _, b, _, _ in keys], dtype=int)
        keep = (rows >= 0) & (columns >= 0)
        if roles is not None:
            keep &= np.array([(role_a, role_b) == tuple(roles) for _, _, role_a, role_b in keys], dtype=bool)
        stacked = np.zeros((len(names), len(names), _WIDTH))
        np.add.at(stacked, (rows[keep], columns[keep]), values[keep])
        return dict(zip(_FIELDS, stacked.transpose(2, 0, 1), strict=True))

    def _rows(self) -> tuple[list[tuple[str, str, str, str]], np.ndarray]:
        """Every cell's key (a, b, role_a, role_b) and its counters, (cells, fields), in storage order."""
        self._flush()
        return list(self._slots), np.array(self._counters, dtype=float).reshape(-1, _WIDTH)

    def role_pairs(self) -> list[tuple[str, str]]:
        """Every (role_a, role_b) seen, both orientations, sorted."""
        self._flush()
        return sorted(self._role_pairs)

    def state_dict(self) -> dict:
        """JSON-serialisable, and cheap at league scale: the decay, the players and roles, and the
        cells as two base64 arrays — keys (a, b, role_a, role_b as int32 indices) and counters
        (float64, ``_FIELDS`` per cell). A population of 256 members holds ~10⁵ cells; as JSON
        numbers they took most of a checkpoint's time. ``to_frame`` is the readable view."""
        self._flush()
        return {
            "decay": self.decay, "players": list(self._index), "roles": list(self._roles), "fields": _FIELDS,
            "keys": _encode(self._keys), "counters": _encode(self._counters),
        }  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` saved, replacing the decay and every cell."""
        if state.get("fields") != _FIELDS:
            raise ValueError(f"payoff state has fields {state.get('fields')}, expected {_FIELDS}")
        self.decay = float(state["decay"])
        self._clear()
        players, roles = state["players"], state["roles"]
        keys, counters = _decode(state["keys"], "i"), _decode(state["counters"], "d")
        cells = [(players[a], players[b], roles[r], roles[s]) for a, b, r, s in zip(*[iter(keys)] * 4, strict=True)]
        self._offsets(cells)  # in saved order: the counters land where they were
        self._counters = counters
        self._stale.update((a, b) for a, b, _, _ in cells)

    def to_frame(self, confidence: float = 0.95) -> pd.DataFrame:
        """One row per cell: role_a, role_b, a, b, games, wins, draws, losses, mean and its interval lo, hi."""
        keys, values = self._rows()
        order = sorted(range(len(keys)), key=lambda n: (keys[n][2], keys[n][3], keys[n][0], keys[n][1]))
        counters = dict(zip(_FIELDS, values[order].T, strict=True))
        lo, hi = _mean_interval(counters, confidence)
        games = counters["games"]
        return pd.DataFrame(
            {
                "role_a": [keys[n][2] for n in order],
                "role_b": [keys[n][3] for n in order],
                "a": [keys[n][0] for n in order],
                "b": [keys[n][1] for n in order],
                "games": games,
                "wins": counters["wins"],
                "draws": counters["draws"],
                "losses": counters["losses"],
                "mean": np.divide(counters["total"], games, out=np.full_like(games, np.nan), where=games > 0),
                "lo": lo,
                "hi": hi,
            }
        )


def _encode(values: array) -> str:
    """An array's bytes, little-endian, in base64."""
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _decode(text: str, typecode: str) -> array:
    """What :func:`_encode` wrote, back as an array of ``typecode``."""
    values = array(typecode, base64.b64decode(text))
    if sys.byteorder == "big":
        values.byteswap()
    return values


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
    the caller's choice. Costs O(pairs that met + budget) in Python-level work and one O(N²)
    boolean pass when unplayed pairs must be drawn.
    Call it once per evaluation round, not per match.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if len(names) < 2:
        raise ValueError(f"need at least two members to pair, got {list(names)}")
    if len(set(names)) != len(names):
        raise ValueError(f"names must be distinct, got {list(names)}")
    row, col, played = table._played_pairs(names)  # (Q,) each: the unordered pairs with games
    n_unplayed = len(names) * (len(names) - 1) // 2 - len(row)
    if n_unplayed > budget:
        return _unplayed_pairs(names, row, col, budget, rng)
    return _apportioned_pairs(names, row, col, played, n_unplayed, budget, rng, confidence)


def _apportioned_pairs(
    names: Sequence[str], row: np.ndarray, col: np.ndarray, played: dict[str, np.ndarray], n_unplayed: int,
    budget: int, rng: np.random.Generator, confidence: float,
) -> list[tuple[str, str]]:  # fmt: skip
    """The general case of :func:`uncertain_pairs`: every pair scored, the budget apportioned."""
    lo, hi = _wilson_interval(played, confidence)  # "wins" carries the score: wins + ½ draws
    straddle = np.minimum(hi - 0.5, 0.5 - lo)  # (Q,) > 0 exactly when 0.5 is inside the interval
    scores = np.maximum(straddle, 0.0) if n_unplayed or (straddle > 0).any() else hi - lo
    # Unplayed pairs all score ½, so all have one quota and which of them get the matches left
    # over is the tiebreak's draw: a uniform sample of at most ``budget`` of them is enough to
    # place the budget, and the population's N² pairs are never enumerated one by one.
    sample = _sample_unplayed(len(names), row, col, min(n_unplayed, budget), rng)
    row, col = np.concatenate([row, sample[0]]), np.concatenate([col, sample[1]])
    scores = np.concatenate([scores, np.full(len(sample[0]), 0.5)])
    tiebreak = rng.random(len(scores))
    counts = _apportion(scores, budget, tiebreak, total=scores[: len(scores) - len(sample[0])].sum() + 0.5 * n_unplayed)
    chosen = np.flatnonzero(counts)
    priority = chosen[np.lexsort((tiebreak[chosen], -scores[chosen]))]
    return [(names[row[p]], names[col[p]]) for p in priority for _ in range(counts[p])]


def _unplayed_pairs(
    names: Sequence[str], row: np.ndarray, col: np.ndarray, budget: int, rng: np.random.Generator
) -> list[tuple[str, str]]:
    """:func:`_apportioned_pairs` when more pairs are unplayed than the budget: each quota is then
    below one and the unplayed pairs' the largest, so the budget goes to ``budget`` unplayed pairs,
    one match each, in tiebreak order. The same draws, without scoring the played pairs (most of
    a small population's planning time)."""
    i, j = _sample_unplayed(len(names), row, col, budget, rng)
    tiebreak = rng.random(len(row) + budget)[len(row) :]
    order = np.argsort(tiebreak, kind="stable")
    return [(names[a], names[b]) for a, b in zip(i[order].tolist(), j[order].tolist())]


def _sample_unplayed(
    n: int, row: np.ndarray, col: np.ndarray, size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``size`` distinct unordered pairs (i < j) of ``n`` players drawn uniformly among those not in (row, col)."""
    if size == 0:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    positions = np.arange(n)
    free = positions[:, None] < positions[None, :]  # i < j (np.triu builds the same mask 4× slower)
    free[row, col] = False
    flat = np.flatnonzero(free)
    picked = flat[rng.choice(len(flat), size=size, replace=False)]
    return picked // n, picked % n


def _apportion(scores: np.ndarray, budget: int, tiebreak: np.ndarray, total: float | None = None) -> np.ndarray:
    """Split ``budget`` whole matches in proportion to ``scores`` (Hamilton's largest remainders).

    ``total`` is the sum the quotas divide by, ``scores.sum()`` unless some scored items were left
    out (they then take none of the budget).

    Each pair first gets the whole part of its quota ``budget · score / Σscore``; the matches
    left go to the largest fractional parts, ties to the smaller ``tiebreak``. When the budget
    is smaller than the number of scored pairs this picks the ``budget`` highest scores.
    """
    quota = budget * scores / (scores.sum() if total is None else total)
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
