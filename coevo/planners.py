"""Who plays whom each iteration: a planner turns (seed, iteration) into match plans whose seats
name members. Every choice derives from (seed, iteration), so a resumed run plans what an
unbroken one would have.

- ``SelfPlay``: one member in every seat of every match (plain self-play), games drawn by weight.
- ``PopulationPlan``: the population's matchmaker (self-play, fictitious, PFSP, skill, PSRO, the
  league) shares the matches out between its learners, and the evaluation scheduler adds matches
  where the ranking is least certain.
- task forge's roles: ``populations.roles.RolePopulations``.
"""

from __future__ import annotations

import numpy as np

import games
from games.play import derive_seed
from marl.pools import MatchPlan
from populations.population import Population, seats_of

Plans = tuple[list[MatchPlan], list[MatchPlan]]  # the training matches, and matches only for the ratings


class SelfPlay:
    def __init__(self, seed: int, matches: int, weights: dict[str, float], member: str, kwargs: dict[str, dict]):
        """``kwargs``: what each game is made with beyond its name (a custom graph's spec)."""
        self.seed, self.matches, self.weights, self.member, self.kwargs = seed, matches, weights, member, kwargs
        self.seats = {g: games.make(g, **kwargs[g]).possible_agents for g in weights}

    def plan(self, iteration: int) -> Plans:
        rng = np.random.default_rng([self.seed, iteration])
        names = list(self.weights)
        p = np.array([self.weights[g] for g in names], dtype=float)
        plans = []
        for m in range(self.matches):
            game = names[rng.choice(len(names), p=p / p.sum())]
            seats = dict.fromkeys(self.seats[game], self.member)
            seed, kwargs = derive_seed(self.seed, iteration, m), self.kwargs[game] or None
            plans.append(MatchPlan(game, seed, seats, f"it{iteration}-m{m}", kwargs))
        return plans, []


class PopulationPlan:
    def __init__(
        self, population: Population, matches: int, eval_matches: int, weights: dict[str, float], kwargs: dict[str, dict]
    ):
        """``kwargs``: what each game is made with beyond its name (its ``game_options``)."""
        self.population, self.matches, self.eval_matches, self.weights = population, matches, eval_matches, weights
        self.seats, self.kwargs = seats_of(list(weights)), kwargs

    def plan(self, iteration: int) -> Plans:
        pop = self.population
        plans = pop.plans(iteration, self.matches, self.weights, self.seats)
        return self._made(plans), self._made(pop.evaluation_plans(iteration, self.eval_matches, self.weights, self.seats))

    def meetings(self, iteration: int, matches: int) -> list[MatchPlan]:
        """Matches for the meta-game's pairs that have never met (a new PSRO snapshot's)."""
        return self._made(self.population.meeting_plans(iteration, matches, self.weights, self.seats))

    def _made(self, plans: list[MatchPlan]) -> list[MatchPlan]:
        return [p._replace(game_kwargs=self.kwargs[p.game] or None) for p in plans]
