"""AlphaStar's league (Vinyals et al. 2019, Nature; the rules of its supplementary pseudocode).

Three kinds of learning member, each with its own opponents and its own checkpoint rule:

- **main agents** — with probability 0.5 PFSP (squared) over every historical snapshot; else they
  pick a random main agent (possibly themselves) and, with probability 0.15 of the whole, first
  verify: PFSP (squared) over main-exploiter snapshots they beat less than 30% of the time, or,
  failing that, over that main agent's snapshots once the monotonically improving tail is
  stripped, if one of them is beaten less than 70%; otherwise (the remaining 35%) self-play
  against it when beating it more than 30%, else PFSP (variance) over its snapshots as a
  curriculum. Never reset.
- **main exploiters** — a random main agent, when beating it more than 10% of the time; else
  PFSP (variance) over its snapshots. Reset to the initial weights at every checkpoint.
- **league exploiters** — PFSP (linear_capped) over every historical snapshot. Reset with
  probability 0.25 at a checkpoint.

Checkpoint (all kinds): at least ``min_matches`` since the last one, and either every win rate
against the relevant set above 0.7 or more than ``max_matches`` played. The relevant set is every
historical snapshot (main agents, league exploiters) or the current main agents (main
exploiters). AlphaStar counts 2e9 and 4e9 agent steps; here the unit is matches the member
played, and the two thresholds are configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from populations.matchmaking import PopulationView, pfsp_choice

KINDS = ("main", "main_exploiter", "league_exploiter")


class LeagueConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    main_agents: int = Field(1, ge=1, description="main agents (AlphaStar: 1 per race)")
    main_exploiters: int = Field(1, ge=0, description="main exploiters (AlphaStar: 1 per race)")
    league_exploiters: int = Field(2, ge=0, description="league exploiters (AlphaStar: 2 per race)")
    min_matches: int = Field(64, ge=1, description="matches before a checkpoint may happen (AlphaStar: 2e9 steps)")
    max_matches: int = Field(256, ge=1, description="matches after which it checkpoints anyway (AlphaStar: 4e9 steps)")
    win_rate: float = Field(0.7, ge=0, le=1, description="checkpoint once the minimum relevant win rate exceeds this")
    league_exploiter_reset: float = Field(0.25, ge=0, le=1, description="chance a league exploiter resets on checkpoint")


@dataclass(frozen=True)
class Checkpoint:
    """A league decision: snapshot ``member``; if ``reset``, it goes back to its initial weights."""

    member: str
    reset: bool


def remove_monotonic_suffix(win_rates: list[float], players: list[str]) -> tuple[list[float], list[str]]:
    """Drop the newest snapshots over which the win rate only falls (they are simply newer and
    stronger, not forgotten): keep everything up to the last place where it rose."""
    for i in range(len(win_rates) - 1, 0, -1):
        if win_rates[i - 1] < win_rates[i]:
            return win_rates[: i + 1], players[: i + 1]
    return [], []


class League:
    def __init__(self, config: LeagueConfig):
        self.config = config

    # ---- matchmaking ---------------------------------------------------------------------------

    def opponents(
        self, pop: PopulationView, learners: Sequence[str], counts: Sequence[int], rng: np.random.Generator
    ) -> list[list[str]]:
        # each match flips its own coins
        return [[self.opponent(pop, learner, rng) for _ in range(count)] for learner, count in zip(learners, counts)]

    def opponent(self, pop: PopulationView, learner: str, rng: np.random.Generator) -> str:
        kind = pop.members[learner].kind
        if kind == "main":
            return self._main_opponent(pop, learner, rng)
        if kind == "main_exploiter":
            main = self._random_main(pop, rng)
            if pop.win_rate(learner, main) > 0.1:
                return main
            return self._pfsp_or(pop, learner, pop.snapshot_names(member=main), "variance", rng, main)
        return self._pfsp_or(pop, learner, pop.historical(), "linear_capped", rng, learner)

    def _main_opponent(self, pop: PopulationView, learner: str, rng: np.random.Generator) -> str:
        coin = rng.random()
        if coin < 0.5:
            return self._pfsp_or(pop, learner, pop.historical(), "squared", rng, learner)
        main = self._random_main(pop, rng)
        if coin < 0.65:
            verified = self._verification(pop, learner, main, rng)
            if verified is not None:
                return verified
        if pop.win_rate(learner, main) > 0.3:
            return main
        return self._pfsp_or(pop, learner, pop.snapshot_names(member=main), "variance", rng, main)

    def _verification(self, pop: PopulationView, learner: str, main: str, rng: np.random.Generator) -> str | None:
        """An exploiter snapshot the learner still loses to, else a forgotten snapshot of ``main``."""
        exploited = pop.snapshot_names(kind="main_exploiter")
        if exploited and pop.win_rates(learner, exploited).min() < 0.3:
            return pfsp_choice(pop, learner, exploited, "squared", rng)[0]
        history = pop.snapshot_names(member=main)
        rates, history = remove_monotonic_suffix(list(pop.win_rates(learner, history)), history)
        if rates and min(rates) < 0.7:
            return pfsp_choice(pop, learner, history, "squared", rng)[0]
        return None

    @staticmethod
    def _random_main(pop: PopulationView, rng: np.random.Generator) -> str:
        mains = [n for n, m in pop.members.items() if m.kind == "main"]
        return mains[rng.integers(len(mains))]

    @staticmethod
    def _pfsp_or(pop: PopulationView, learner: str, candidates: list[str], weighting: str, rng, fallback: str) -> str:
        return pfsp_choice(pop, learner, candidates, weighting, rng)[0] if candidates else fallback

    # ---- checkpoints ---------------------------------------------------------------------------

    def checkpoints(self, pop: PopulationView, rng: np.random.Generator) -> list[Checkpoint]:
        """The members ready to checkpoint now, and whether each resets."""
        out = []
        for name, member in pop.members.items():
            if member.trainable and self._ready(pop, name):
                reset = member.kind == "main_exploiter" or (
                    member.kind == "league_exploiter" and rng.random() < self.config.league_exploiter_reset
                )
                out.append(Checkpoint(name, reset))
        return out

    def _ready(self, pop: PopulationView, name: str) -> bool:
        played = pop.members[name].matches_since_snapshot
        if played < self.config.min_matches:
            return False
        if pop.members[name].kind == "main_exploiter":
            relevant = [n for n, m in pop.members.items() if m.kind == "main"]
        else:
            relevant = pop.historical()
        rates = pop.win_rates(name, relevant)
        return (len(rates) > 0 and rates.min() > self.config.win_rate) or played > self.config.max_matches
