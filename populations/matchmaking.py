"""Matchmakers: for a learning member, whom to play next.

Every matchmaker answers one question, ``opponents(population, learners, counts, rng)``: whom
each learner plays in its ``counts[i]`` matches this iteration, a list of names per learner; a
name is a live member (possibly the learner itself) or a historical player (a frozen snapshot, or
a fixed member such as a scripted player). All learners are asked at once and weights are
computed once per learner and iteration (PFSP's for every learner in one array pass), then
sampled, so matchmaking stays cheap for hundreds of members with thousands of snapshots
(``benchmarks/population_overhead.py``). They are chosen by name in the config
(``population.matchmaker``):

- ``self_play``: the learner's latest self against itself (SPIRAL).
- ``fictitious``: uniform over the historical players (fictitious self-play as an opponent
  sampler, Heinrich et al. 2015): the learner best-responds to the average of its history.
- ``pfsp``: prioritised fictitious self-play (AlphaStar): historical player B is drawn with
  probability ``f(P[learner beats B]) / Σ_C f(P[learner beats C])`` under one of AlphaStar's
  weightings (``PFSP_WEIGHTINGS``), so hard opponents are met more often; an untried one counts
  as x = ½. With a self-play share (AlphaStar's main agents: 0.35), that share of the learner's
  matches are against itself instead, where both seats learn.
- ``skill``: rating-matched play: OpenSkill predicts each candidate's win probability against the
  learner and the closest to ½ are preferred (the FTW/TrueSkill "match quality" idea).
- ``psro``: opponents drawn from the meta-strategy — the meta-solver's mixture over the
  historical players given the empirical payoff matrix — so the learner trains as a best
  response to it and its snapshots are the new policies PSRO adds (Lanctot et al. 2017).
- ``league``: AlphaStar's league (``populations.league``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np


class MemberView(Protocol):
    @property
    def kind(self) -> str: ...  # main | main_exploiter | league_exploiter | fixed

    @property
    def matches_since_snapshot(self) -> int: ...


class SkillView(Protocol):
    def predict_win(self, a: str, b: str) -> float: ...


class PopulationView(Protocol):
    """What matchmakers (and the league) read of a population: who is in it and how they fare,
    never how it trains. ``populations.population.Population`` is one; so is any stand-in a test
    or an outside trainer builds."""

    @property
    def members(self) -> Mapping[str, MemberView]: ...

    @property
    def skill(self) -> SkillView: ...

    def snapshot_names(self, member: str | None = None, kind: str | None = None) -> list[str]: ...

    def historical(self) -> list[str]: ...

    def meta_strategy(self) -> dict[str, float]: ...

    def win_rate(self, a: str, b: str) -> float: ...

    def win_rates(self, a: str, candidates: Sequence[str]) -> np.ndarray: ...

    def win_rate_table(self, players: Sequence[str], candidates: Sequence[str]) -> np.ndarray: ...

PFSP_WEIGHTINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "hard": lambda x: (1 - x) ** 2,  # f_hard with p = 2: focus on the opponents the learner loses to
    "squared": lambda x: (1 - x) ** 2,  # AlphaStar pseudocode's name for the same
    "variance": lambda x: x * (1 - x),  # f_var: opponents of about equal strength, a curriculum
    "linear": lambda x: 1 - x,
    "linear_capped": lambda x: np.minimum(0.5, 1 - x),  # league exploiters: never ignore easy ones entirely
}


def pfsp_weights(win_rates: Sequence[float] | np.ndarray, weighting: str = "squared") -> np.ndarray:
    """Selection probabilities over the last axis (one row per learner, if 2-D); uniform where
    every weight is (near) zero, as in AlphaStar."""
    x = np.asarray(win_rates, dtype=float)
    if weighting not in PFSP_WEIGHTINGS:
        raise ValueError(f"unknown PFSP weighting {weighting!r}; choose from {', '.join(PFSP_WEIGHTINGS)}")
    weights = PFSP_WEIGHTINGS[weighting](x)
    total = weights.sum(axis=-1, keepdims=True)
    return np.where(total < 1e-10, 1 / x.shape[-1], weights / np.maximum(total, 1e-10))


def draw(candidates: Sequence[str], weights: np.ndarray, count: int, rng: np.random.Generator) -> list[str]:
    """``count`` candidates drawn with replacement, with probabilities ∝ ``weights`` (≥ 0, some > 0).

    Inverse-CDF sampling: one uniform per draw, placed in the cumulative weights by binary
    search. The same picks as ``rng.choice(p=...)`` at half its cost (it re-validates
    ``p`` on every call), and a population draws once per learner and iteration: hundreds of calls.
    The search runs over all but the last bound, so a uniform that rounds up to the total still
    lands on the last candidate."""
    cdf = np.cumsum(weights)
    picks = np.searchsorted(cdf[:-1], rng.random(count) * cdf[-1], side="right")
    return [candidates[i] for i in picks.tolist()]


def pfsp_choice(
    pop: PopulationView, learner: str, candidates: Sequence[str], weighting: str, rng: np.random.Generator, count: int = 1
) -> list[str]:
    return draw(candidates, pfsp_weights(pop.win_rates(learner, candidates), weighting), count, rng)


class Matchmaker(Protocol):
    def opponents(
        self, pop: PopulationView, learners: Sequence[str], counts: Sequence[int], rng: np.random.Generator
    ) -> list[list[str]]: ...


class SelfPlay:
    def opponents(
        self, pop: PopulationView, learners: Sequence[str], counts: Sequence[int], rng: np.random.Generator
    ) -> list[list[str]]:
        return [[learner] * count for learner, count in zip(learners, counts)]


class Fictitious:
    def opponents(
        self, pop: PopulationView, learners: Sequence[str], counts: Sequence[int], rng: np.random.Generator
    ) -> list[list[str]]:
        past = pop.historical()
        if not past:
            return SelfPlay().opponents(pop, learners, counts, rng)
        return [[past[i] for i in rng.integers(len(past), size=count)] for count in counts]


class PFSP:
    def __init__(self, weighting: str = "squared", self_play: float = 0.0):
        """``self_play``: the chance each match is against the learner itself. Why: a match against
        a frozen snapshot teaches one seat, one against itself both, so a population whose members
        see few turns an iteration learns faster per match played."""
        pfsp_weights([0.5], weighting)  # an unknown weighting fails now, not mid-run
        self.weighting, self.self_play = weighting, self_play

    def opponents(
        self, pop: PopulationView, learners: Sequence[str], counts: Sequence[int], rng: np.random.Generator
    ) -> list[list[str]]:
        past = pop.historical()
        if not past:
            return SelfPlay().opponents(pop, learners, counts, rng)
        weights = pfsp_weights(pop.win_rate_table(learners, past), self.weighting)  # (learners, past)
        drawn = [draw(past, row, count, rng) for row, count in zip(weights, counts)]
        if not self.self_play:
            return drawn
        return [
            [learner if mirror else name for name, mirror in zip(names, rng.random(len(names)) < self.self_play)]
            for learner, names in zip(learners, drawn)
        ]


class Skill:
    """Prefer opponents OpenSkill expects to be even with the learner: weight ∝ (1 − 2|p − ½|)²."""

    def opponents(
        self, pop: PopulationView, learners: Sequence[str], counts: Sequence[int], rng: np.random.Generator
    ) -> list[list[str]]:
        return [self._opponents(pop, learner, count, rng) for learner, count in zip(learners, counts)]

    @staticmethod
    def _opponents(pop: PopulationView, learner: str, count: int, rng: np.random.Generator) -> list[str]:
        candidates = [n for n in (*pop.snapshot_names(), *pop.members) if n != learner]
        if not candidates:
            return [learner] * count
        p = np.array([pop.skill.predict_win(learner, c) for c in candidates])
        return draw(candidates, (1 - 2 * np.abs(p - 0.5)) ** 2 + 1e-6, count, rng)


class PSRO:
    def opponents(
        self, pop: PopulationView, learners: Sequence[str], counts: Sequence[int], rng: np.random.Generator
    ) -> list[list[str]]:
        mixture = pop.meta_strategy()
        if not mixture:
            return SelfPlay().opponents(pop, learners, counts, rng)
        names, weights = list(mixture), np.fromiter(mixture.values(), float, len(mixture))
        return [draw(names, weights, count, rng) for count in counts]
