"""A run's config with a population: ``[population]`` on top of the training config.

Without ``[population]`` a run is plain self-play of one policy (``marl.train``); with it, a
population of members is trained, matched, rated and evolved (``populations.train``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

import games

from marl.config import Strict, TrainConfig, load_config
from populations.league import LeagueConfig
from populations.pbt import PBTConfig

MATCHMAKERS = ("self_play", "fictitious", "pfsp", "skill", "psro", "league")
SAMPLING_HPARAMS = ("temperature", "top_p")  # a member's own sampling settings, which PBT may tune


class PopulationConfig(Strict):
    size: int = Field(
        1, ge=0, description="trainable members (the league sets its own from [population.league]); 0 = only opponents"
    )
    matchmaker: Literal[MATCHMAKERS] = Field("self_play", description=" | ".join(MATCHMAKERS))  # type: ignore[valid-type]
    pfsp_weighting: Literal["hard", "squared", "variance", "linear", "linear_capped"] = Field(
        "squared", description="PFSP's f(x) (x = the learner's win rate): hard/squared (1-x)², variance x(1-x), linear 1-x"
    )
    meta_solver: Literal["uniform", "nash", "prd", "alpharank"] = Field(
        "nash", description="the meta-strategy over the population (PSRO's opponents, the reported mixture)"
    )
    snapshot_every: int = Field(5, ge=1, description="freeze a snapshot of each trainable member every N iterations")
    opponents: list[str] = Field([], description="fixed members: scripted players by name, never trained")
    eval_matches: int = Field(0, ge=0, description="matches per iteration the evaluation scheduler spends on uncertain pairs")
    elo_k: float = Field(32.0, gt=0, description="online Elo's K")
    payoff_decay: float = Field(1.0, gt=0, le=1, description="payoff counters decay before each update (AlphaStar: 0.99)")
    league: LeagueConfig = LeagueConfig()
    pbt: PBTConfig = PBTConfig()


class RunConfig(TrainConfig):
    population: PopulationConfig | None = None

    @model_validator(mode="after")
    def _population_fits_the_run(self) -> RunConfig:
        if self.population is None:
            return self
        if self.population.size == 0 and self.population.matchmaker != "league":
            raise ValueError("population.size: training needs at least one trainable member")
        ranges = self.population.pbt.ranges
        unknown = sorted(set(ranges) - set(type(self.optim).model_fields) - set(SAMPLING_HPARAMS))
        if unknown:
            raise ValueError(f"population.pbt.ranges: {unknown} are neither optim settings nor {' or '.join(SAMPLING_HPARAMS)}")
        if "top_p" in ranges and ranges["top_p"][1] > 1:
            raise ValueError("population.pbt.ranges: top_p is a probability; its range must end at 1 or below")
        if self.population.opponents:
            if len(self.games) != 1:
                raise ValueError("population.opponents: scripted members need a run of one game")
            game = next(iter(self.games))
            missing = sorted(set(self.population.opponents) - set(games.scripted_players(game)))
            if missing:
                raise ValueError(f"population.opponents: {game} has no scripted players {missing}")
        return self


def load_run_config(path: str | Path, overrides: Sequence[str] = ()) -> RunConfig:
    return load_config(path, overrides, schema=RunConfig)
