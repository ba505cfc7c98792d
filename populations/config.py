"""A population's config: ``[population]`` (its matchmaker, meta-solver, league, PBT and PSRO
oracles) and a task forge role's ``[roles.<role>.population]``. The run config that holds them is
``coevo.config.RunConfig``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from marl.config import Strict
from populations.league import LeagueConfig
from populations.matchmaking import PFSP_WEIGHTINGS
from populations.pbt import PBTConfig

MATCHMAKERS = ("self_play", "fictitious", "pfsp", "skill", "psro", "league")


class OracleConfig(Strict):
    """PSRO's best-response oracles (``matchmaker = "psro"``; Lanctot et al. 2017, OpenSpiel's
    ``psro_v2``). An oracle is the learner's training against the meta-strategy; it ends after
    ``snapshot_every`` iterations (its budget) or earlier once it plateaus, and joins the meta-game
    as a snapshot."""

    start: Literal["last", "initial"] = Field(
        "last",
        description="where each new oracle starts: 'last' continues from the oracle before (one line of training), "
        "'initial' from the initial weights with a fresh optimiser (psro_v2's fresh best response)",
    )
    plateau: int = Field(
        0, ge=0,
        description="end an oracle once its mean win rate against its opponents over its last N iterations is no more "
        "than plateau_tolerance above the N before; 0 = the budget alone",
    )  # fmt: skip
    plateau_tolerance: float = Field(0.02, ge=0, le=1, description="the rise in win rate that still counts as learning")


class PopulationConfig(Strict):
    size: int = Field(
        1, ge=0, description="trainable members (the league sets its own from [population.league]); 0 = only opponents"
    )
    matchmaker: Literal[MATCHMAKERS] = Field("self_play", description=" | ".join(MATCHMAKERS))  # type: ignore[valid-type]
    pfsp_weighting: Literal["hard", "squared", "variance", "linear", "linear_capped"] = Field(
        "squared", description="PFSP's f(x) (x = the learner's win rate): hard/squared (1-x)², variance x(1-x), linear 1-x"
    )
    pfsp_self_play: float = Field(
        0.0, ge=0, le=1,
        description="PFSP: the share of each learner's matches played against itself, both seats learning "
        "(AlphaStar's main agents: 0.35); the rest against snapshots",
    )  # fmt: skip
    meta_solver: Literal["uniform", "nash", "prd", "alpharank"] = Field(
        "nash", description="the meta-strategy over the population (PSRO's opponents, the reported mixture)"
    )
    snapshot_every: int = Field(
        5, ge=1, description="freeze a snapshot of each trainable member every N iterations (PSRO: an oracle's budget)"
    )
    opponents: list[str] = Field([], description="fixed members: scripted players by name, never trained")
    eval_matches: int = Field(0, ge=0, description="matches per iteration the evaluation scheduler spends on uncertain pairs")
    meet_matches: int = Field(
        0, ge=0, description="PSRO: matches a new snapshot plays against each member of the meta-game as soon as it is "
        "taken, before the next solve (psro_v2's simulations per entry); 0: the evaluation scheduler plays them, and the "
        "snapshot joins an iteration later",
    )  # fmt: skip
    elo_k: float = Field(32.0, gt=0, description="online Elo's K")
    payoff_decay: float = Field(1.0, gt=0, le=1, description="payoff counters decay before each update (AlphaStar: 0.99)")
    league: LeagueConfig = LeagueConfig()
    pbt: PBTConfig = PBTConfig()
    oracle: OracleConfig = OracleConfig()


ROLE_MATCHMAKERS = ("self_play", "fictitious", "pfsp")


class RolePopulationConfig(Strict):
    """A task forge role as a population (``populations.roles``)."""

    matchmaker: Literal[ROLE_MATCHMAKERS] = Field(  # type: ignore[valid-type]
        "self_play", description="how the role's seat is filled for another role's learner: " + " | ".join(ROLE_MATCHMAKERS)
    )
    pfsp_weighting: Literal[tuple(PFSP_WEIGHTINGS)] = Field("squared", description="PFSP's f(x), x = the learner's win rate")  # type: ignore[valid-type]
    snapshot_every: int = Field(5, ge=1, description="freeze a snapshot of each of the role's learners every N iterations")
