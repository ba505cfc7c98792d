"""Ratings: how strong is each member? Each puts every member on one line.

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
(Balduzzi et al. 2018). The payoff table (``populations.payoffs``) keeps the raw pairwise facts
for the tools that can (``populations.metagame``).

>>> elo = Elo()
>>> elo.add("alice"); elo.add("bob")
>>> elo.update("alice", "bob", 1.0)
>>> elo["alice"], elo["bob"]
(1016.0, 984.0)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Container, Iterable

import numpy as np
from openskill.models import PlackettLuce
from scipy.sparse.csgraph import connected_components

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
        self.update_many([(a, b, score_a)])

    def update_many(self, results: Iterable[tuple[str, str, float]]) -> None:
        """Apply matches ``(a, b, score_a)`` in order: a population's batch of episodes in one call."""
        ratings, k = self._ratings, self.k
        for a, b, score_a in results:
            if a == b or a not in ratings or b not in ratings:
                _check_opponents(a, b, ratings)
            ratings[a], ratings[b] = elo_update(ratings[a], ratings[b], score_a, k)

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
        self.update_many([(a, b, score_a)])

    def update_many(self, results: Iterable[tuple[str, str, float]]) -> None:
        """Apply matches ``(a, b, score_a)`` in order, as :meth:`update` does one by one.

        Same numbers as ``model.rate([[a], [b]], ...)`` per match, without its cost: ``rate``
        validates its arguments and deep-copies every rating on each call (~11 µs, most of a
        population's per-match budget with scripted players). We own these ratings and replace
        them anyway, so we take the two steps ``rate`` takes — τ's additive dynamics on σ, then the
        model's update (``_compute``, which writes the new μ, σ into the ratings it is given) — in
        place, ~3 µs. A property test holds this equal to ``rate``, so a library change cannot slip by.
        """
        ratings, model = self._ratings, self.model
        tau_sq, limit_sigma = model.tau * model.tau, model.limit_sigma
        for a, b, score_a in results:
            if a == b or a not in ratings or b not in ratings:
                _check_opponents(a, b, ratings)
            if score_a not in _SCORES:
                raise ValueError(f"score_a must be 1, 0.5 or 0, got {score_a}")
            ra, rb = ratings[a], ratings[b]
            sigma_a, sigma_b = ra.sigma, rb.sigma
            ra.sigma = math.sqrt(sigma_a * sigma_a + tau_sq)
            rb.sigma = math.sqrt(sigma_b * sigma_b + tau_sq)
            if score_a == 0.5:
                model._compute(teams=[[ra], [rb]], ranks=[1, 1])  # equal ranks: a draw
            elif score_a == 1:  # teams in finishing order
                model._compute(teams=[[ra], [rb]])
            else:
                model._compute(teams=[[rb], [ra]])
            if limit_sigma:  # σ may not grow from a match
                ra.sigma, rb.sigma = min(ra.sigma, sigma_a), min(rb.sigma, sigma_b)

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
