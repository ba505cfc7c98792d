"""Who plays task forge's matches, and how its roles' members fare: every role is a team of
members (``[roles.<role>] members``), and ``[roles.<role>.population]`` makes a role a
population, with snapshots, its own matchmaker, and ratings against the members of the roles
they meet (kept, and written for analysis, once any role is a population).

Without any role population, match m seats every role's live members in turn (m counted in
mixed radix over the teams' sizes), so every member meets every other role's members alike. With them, the learners of the roles with a population take turns as the match's focal
player (match m: learner m mod k). The focal learner sits its own role's seat; every other role
with a population fills its seat by its matchmaker, as an opponent *for that learner*, from the
role's live members and snapshots:

- ``self_play``: its live members in turn (what a role without a population does too);
- ``fictitious``: uniform over its live members and snapshots, so the learner meets the role's
  history as well as its present;
- ``pfsp``: each candidate with probability ∝ f(P[learner beats it]) (AlphaStar's PFSP over
  roles), so players the learner does badly against are met more often.

Every live member in a match learns from its own turns, focal or not. A result between two
members of different roles compares their rewards in the match (payoffs keep both returns per role
pair, as for seat games); one Elo and OpenSkill scale covers every role's players.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from games.play import derive_seed
from marl.pools import MatchPlan
from populations.lineage import Lineage
from populations.config import RolePopulationConfig
from populations.matchmaking import draw, pfsp_weights
from populations.payoffs import PayoffTable
from populations.population import record_results
from populations.ratings import Elo, OpenSkill

class RolePopulations:
    def __init__(
        self, configs: dict[str, RolePopulationConfig], teams: dict[str, list[str]], learners: list[str], seed: int,
        matches: int, game: str, game_kwargs: dict[str, Any], seat_roles: dict[str, str] | None = None,
    ):  # fmt: skip
        """``teams``: every role's live members; ``learners``: those that learn, focal in turn;
        ``seat_roles``: each seat's role, where a role has several seats (a graph node's copies;
        they all seat the role's player of the match), else each role is its one seat."""
        self.configs, self.teams, self.seed = configs, teams, seed
        self.matches, self.game, self.game_kwargs = matches, game, game_kwargs
        self.seat_roles = seat_roles or {role: role for role in teams}
        self.snapshots: dict[str, str] = {}  # snapshot -> its member, oldest first
        self.learners = [n for n in learners if self.role_of(n) in configs]
        self.payoffs = PayoffTable()
        self.elo, self.skill, self.lineage = Elo(), OpenSkill(), Lineage()  # one scale for every role
        for role, team in teams.items():
            for name in team:
                self.elo.add(name)
                self.skill.add(name)
                self.lineage.add(name, kind=role)

    def role_of(self, name: str) -> str:
        member = self.snapshots.get(name, name)
        return next(role for role, team in self.teams.items() if member in team)

    def pool(self, role: str) -> list[str]:
        """The players the role's matchmaker draws from: its live members, then its snapshots."""
        return [*self.teams[role], *(s for s, m in self.snapshots.items() if m in self.teams[role])]

    # ---- planning ------------------------------------------------------------------------------

    def seats(self, m: int) -> dict[str, str]:
        """Match m's players with every role's live members in turn, counting m in mixed radix
        (the first role's members change fastest), so every combination of members comes round."""
        seats = {}
        for role, team in self.teams.items():
            seats[role] = team[m % len(team)]
            m //= len(team)
        return seats

    def plan(self, iteration: int) -> tuple[list[MatchPlan], list[MatchPlan]]:
        """This iteration's matches (and no matches for the ratings alone)."""
        rng = np.random.default_rng([self.seed, iteration])
        plans = []
        for m in range(self.matches):
            seats = self.seats(m)
            if self.learners:
                focal = self.learners[m % len(self.learners)]
                for role in self.configs:
                    seats[role] = focal if role == self.role_of(focal) else self._opponent(role, focal, m, rng)
            match_id, seats = f"it{iteration}-m{m}", self.seated(seats)
            plans.append(MatchPlan(self.game, derive_seed(self.seed, iteration, m), seats, match_id, self.game_kwargs))
        return plans, []

    def seated(self, players: dict[str, str]) -> dict[str, str]:
        """Every seat of the game with its role's player (``players``: role -> player)."""
        return {seat: players[role] for seat, role in self.seat_roles.items()}

    def _opponent(self, role: str, focal: str, m: int, rng: np.random.Generator) -> str:
        config, candidates = self.configs[role], self.pool(role)
        if config.matchmaker == "self_play":
            return self.seats(m)[role]
        if config.matchmaker == "fictitious":
            return candidates[int(rng.integers(len(candidates)))]
        rates = self.payoffs.win_rate_matrix([focal], candidates)[0]
        return draw(candidates, pfsp_weights(rates, config.pfsp_weighting), 1, rng)[0]

    # ---- results and snapshots -----------------------------------------------------------------

    def record(self, episodes) -> None:
        """Every pair of seats of different roles in every match: payoffs per role pair, Elo, OpenSkill."""
        cells, returns = [], []
        for ep in episodes:
            seated = list(ep.members.items())
            for i, (role_a, a) in enumerate(seated):
                for role_b, b in seated[i + 1 :]:
                    if self.seat_roles[role_a] == self.seat_roles[role_b]:
                        continue  # copies of one graph node: one player, no result between them
                    cells.append((a, b, role_a, role_b))
                    returns += (ep.rewards[role_a], ep.rewards[role_b])
        record_results(cells, returns, self.payoffs, self.elo, self.skill)

    def due(self, iteration: int) -> list[str]:
        """The learners whose role snapshots them this iteration."""
        return [n for n in self.learners if iteration % self.configs[self.role_of(n)].snapshot_every == 0]

    def take_snapshot(self, member: str, iteration: int) -> str:
        name = f"{member}@{iteration}"
        if name not in self.snapshots:
            self.snapshots[name] = member
            self.elo.add(name, self.elo[member])
            self.skill.add(name, self.skill.mu(member), self.skill.sigma(member))
            self.lineage.add(name, self.lineage.parent(member), "snapshot", iteration, member=member, kind=self.role_of(member))
            self.lineage.reparent(member, name, "continues", iteration)
        return name

    def ratings(self) -> list[dict]:
        names = [*self.snapshots, *(n for team in self.teams.values() for n in team)]
        return [
            {"player": n, "role": self.role_of(n), "elo": self.elo[n], "mu": self.skill.mu(n), "sigma": self.skill.sigma(n),
             "ordinal": self.skill.ordinal(n)}
            for n in names
        ]  # fmt: skip

    def state_dict(self) -> dict:
        return {
            "snapshots": dict(self.snapshots), "payoffs": self.payoffs.state_dict(), "elo": self.elo.state_dict(),
            "openskill": self.skill.state_dict(), "lineage": self.lineage.state_dict(),
        }  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.snapshots = dict(state["snapshots"])
        self.payoffs.load_state_dict(state["payoffs"])
        self.elo.load_state_dict(state["elo"])
        self.skill.load_state_dict(state["openskill"])
        self.lineage.load_state_dict(state["lineage"])
